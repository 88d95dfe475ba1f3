"""The loop's options as `run` and `batch` take them, and how they become the library's.

The options themselves are declared once, in the library's `LoopOptions`: their defaults
and allowed values come from there (`DEFAULTS`, the `Literal` types); this module parses
what a command line or a batch line gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from langchain_core.language_models import BaseChatModel
from langgraph.types import RetryPolicy

from langgraph_refine._calls._budget import LIMITS, Budget
from langgraph_refine._calls._prices import Price
from langgraph_refine._calls._retry import DEFAULT_RETRY_POLICY
from langgraph_refine._decisions._memory import MemoryPolicy
from langgraph_refine._decisions._options import (
    DEFAULTS,
    LINE,
    RUN,
    LoopOptions,
    OnBudgetExhausted,
    OnEvaluatorError,
    criteria_list,
    declaration,
    declared,
    line_key,
)
from langgraph_refine._state import Select, Strategy
from langgraph_refine._typed import OutputSchema
from langgraph_refine.cli._errors import CliError
from langgraph_refine.cli._ladder_view import line_models
from langgraph_refine.cli._specs import EvaluatorSpec, build_evaluators, parse_specs

CLI_RETRY_POLICY: RetryPolicy = DEFAULT_RETRY_POLICY._replace(max_attempts=3)
"""Transient errors are retried twice (about 1.5 s of backoff), so a dead server fails fast."""

# Allowed values come from the library's own Literal types, so they cannot drift apart.
MEMORY_CHOICES: tuple[str, ...] = tuple(
    value for arg in get_args(MemoryPolicy) if get_origin(arg) is Literal for value in get_args(arg)
)
STRATEGY_CHOICES: tuple[str, ...] = get_args(Strategy)
SELECT_CHOICES: tuple[str, ...] = get_args(Select)
ON_BUDGET_CHOICES: tuple[str, ...] = get_args(OnBudgetExhausted)
ON_EVALUATOR_ERROR_CHOICES: tuple[str, ...] = get_args(OnEvaluatorError)
BUDGET_KEYS = LIMITS
"""The limits a batch line's `budget` (and the `--budget-*` / `--max-cost` flags) set."""
PER_LINE_OPTIONS: tuple[str, ...] = tuple(line_key(name) for name in declared(LINE))
"""Keys a batch line may set for itself, from the options' declaration (`LINE`); other
keys are carried along and ignored."""


def read_schema(value: object, *, option: str) -> dict[str, Any]:
    """An output schema: a JSON schema object, or the name of a JSON file that holds one.

    Args:
        value: A dict (a batch line's inline schema) or a file name (`--schema FILE.json`).
        option: Where it came from, for messages (`--schema`, `'schema'`).

    Raises:
        CliError: If the file is missing or not JSON, or the schema is not a valid
            JSON schema object.
    """
    if isinstance(value, str | Path):
        path = Path(value).expanduser()
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CliError(f"{option} {path}: file not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"{option} {path}: cannot read it: {exc}") from None
        except json.JSONDecodeError as exc:
            raise CliError(f"{option} {path} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(
            f"{option} must be a JSON schema object (or a file holding one), got {value!r:.80}"
        )
    try:
        OutputSchema.coerce(value)  # built once: the loop's options find it by content
    except (ValueError, ImportError) as exc:
        raise CliError(f"{option}: {exc}") from None
    return value


def parse_choice(value: object, choices: Sequence[str], *, option: str) -> str:
    """`value` if it is one of `choices` (case and `-`/`_` do not matter).

    Raises:
        CliError: Naming the option, the value and the allowed values.
    """
    if isinstance(value, str):
        text = value.strip().lower().replace("-", "_")
        if text in choices:
            return text
    raise CliError(f"{option} must be one of {', '.join(choices)}; got {value!r}")


EDITS_CHOICES = ("off", "on", "auto")
"""`--edits` values: whole rewrites, SEARCH/REPLACE edits, or edits for long attempts."""


def parse_edits(value: object, *, option: str) -> bool | str:
    """`--edits` or a batch line's `edits` as the library's `edits=` value.

    `on`/`off`/`auto` (a batch line may also give `true`/`false`).

    Raises:
        CliError: Naming the option, the value and the allowed values.
    """
    if isinstance(value, bool):
        return value
    mode = parse_choice(value, EDITS_CHOICES, option=option)
    return "auto" if mode == "auto" else mode == "on"


def parse_budget(value: object) -> Budget | None:
    """A batch line's `budget`: null, or an object with limits and optional `prices`.

    The limits are `max_calls`, `max_tokens`, `max_seconds` and `max_cost`; `prices` maps
    model names to `{"input": ..., "output": ...}` in USD per million tokens.

    Raises:
        CliError: For another shape, an unknown key, or a limit `Budget` rejects.
    """
    if value is None:
        return None
    keys = (*BUDGET_KEYS, "prices")
    if not isinstance(value, dict) or not set(value) <= set(keys):
        raise CliError(
            f"'budget' must be null or an object with keys among {', '.join(keys)}, got {value!r}"
        )
    return make_budget(**value)


def make_budget(
    max_calls: Any = None,
    max_tokens: Any = None,
    max_seconds: Any = None,
    max_cost: Any = None,
    prices: Any = None,
) -> Budget | None:
    """A `Budget` from its limits and prices, or None when none is set.

    Raises:
        CliError: If `Budget` rejects a limit or a price.
    """
    if all(v is None for v in (max_calls, max_tokens, max_seconds, max_cost)) and not prices:
        return None
    try:
        return Budget(
            max_calls=max_calls,
            max_tokens=max_tokens,
            max_seconds=max_seconds,
            max_cost=max_cost,
            prices=prices,
        )
    except (TypeError, ValueError) as exc:
        raise CliError(f"budget: {exc}") from None


def parse_prices(values: Sequence[str] | None) -> dict[str, Price]:
    """`--price MODEL=IN,OUT` options: USD per million input and output tokens, by model.

    Raises:
        CliError: Naming the value and showing the expected form.

    Example:
        >>> parse_prices(["my-model=0.15,0.6"])
        {'my-model': Price(input=0.15, output=0.6, cache_read=None)}
    """
    prices: dict[str, Price] = {}
    for value in values or []:
        model, _, numbers = value.rpartition("=")
        parts = numbers.split(",")
        try:
            usd = [float(part) for part in parts]
        except ValueError:
            usd = []
        if not model.strip() or len(usd) != 2 or not all(0 <= x < float("inf") for x in usd):
            raise CliError(
                f"--price {value!r}: expected MODEL=IN,OUT with IN and OUT in USD per million "
                "input and output tokens (numbers >= 0), e.g. --price gpt-4o-mini=0.15,0.6"
            )
        prices[model.strip()] = Price(input=usd[0], output=usd[1])
    return prices


def with_prices(budget: Budget | None, prices: Mapping[str, Price]) -> Budget | None:
    """`budget` with `prices` added (its own prices win); a budget that only prices if none."""
    if not prices:
        return budget
    if budget is None:
        return Budget(prices=prices)
    return replace(budget, prices={**prices, **(budget.prices or {})})


def budget_dict(budget: Budget | None) -> dict[str, Any] | None:
    """`budget` as the dict a run's context takes (the limits that are set, and prices)."""
    if budget is None:
        return None
    limits = {key: getattr(budget, key) for key in BUDGET_KEYS}
    data: dict[str, Any] = {key: value for key, value in limits.items() if value is not None}
    if budget.prices:
        data["prices"] = {
            model: {k: v for k, v in asdict(price).items() if v is not None}
            for model, price in budget.prices.items()
        }
    return data


def _flag_named(message: str) -> str:
    """A check's message with the option it names written as its flag (`--target-score`).

    The library's checks name an option by its field (`target_score must be in [0, 1]`);
    on the command line the user typed the flag.
    """
    name, sep, rest = message.partition(" must ")
    flag = "--" + name.replace("_", "-")
    if sep and name.isidentifier() and flag in _FLAGS:
        return f"{flag} must {rest}"
    return message


_FLAGS = frozenset(flag for name in declared(RUN) for flag in declaration(name).flags)


def parse_memory(value: str | int) -> str | int:
    """`--memory`: `all`, `last`, `best_and_last`, or a whole number (a window of attempts)."""
    if isinstance(value, int) and not isinstance(value, bool):
        window = value
    elif isinstance(value, str) and value.strip().lower().replace("-", "_") in MEMORY_CHOICES:
        return value.strip().lower().replace("-", "_")
    elif isinstance(value, str) and value.strip().isdigit():
        window = int(value.strip())
    else:
        raise CliError(
            f"memory must be one of {', '.join(MEMORY_CHOICES)} or a whole number >= 1 "
            f"(a window of recent attempts), got {value!r}"
        )
    if window < 1:
        raise CliError(f"memory window must be >= 1, got {window}")
    return window


def parse_patience(value: int | None) -> int | None:
    """`--patience`: rounds without progress before stopping; 0 (or None) disables the rule."""
    if value is None or value == 0:
        return None
    if value < 0:
        raise CliError(f"--patience must be >= 1, or 0 to disable the plateau rule; got {value}")
    return value


@dataclass(frozen=True)
class CommandOptions:
    """The loop's options as given on the command line (or a batch line), parsed.

    Each is a `LoopOptions` field (its default comes from there) or what the command
    line turns into one: `specs` are the run's checks, `prices` add to the budget.

    Attributes:
        specs: Parsed evaluator specs; empty means the default LLM judge.
        target_score: Score that stops the loop.
        max_iterations: Refinement rounds after the first generation.
        patience: Non-improving rounds tolerated (None disables the rule).
        memory: Which earlier attempts the generator sees.
        min_delta: The least gain that counts as progress for the plateau rule.
        strategy: The search strategy; None leaves the library's default.
        budget: Limits on model calls, tokens, seconds and cost.
        on_budget_exhausted: `stop` (return the best so far) or `raise` (fail the task).
        prices: `--price` values: model prices for every task's budget.
        output_schema: The JSON schema each attempt's object must match, or None for text.
        select: How the result is chosen (`score` or `pairwise`); None leaves the default.
        confirm_pass: Judge a round that would stop on PASS or the target once more.
        criteria: What every LLM judge also checks (`--criterion`, a line's `criteria`).
        on_evaluator_error: `retry`, `skip` or `raise` when the judge cannot judge.
        edits: Refinements by SEARCH/REPLACE edits: True, False or `"auto"`.
        models: A batch line's own `model` (one name, or a ladder cheapest first); None:
            the command line's `--model`.
    """

    specs: list[EvaluatorSpec] = field(default_factory=list)
    target_score: float = DEFAULTS.target_score
    max_iterations: int = DEFAULTS.max_iterations
    patience: int | None = DEFAULTS.patience
    memory: str | int = DEFAULTS.memory
    min_delta: float = DEFAULTS.min_delta
    strategy: str | None = None
    budget: Budget | None = DEFAULTS.budget
    on_budget_exhausted: str = DEFAULTS.on_budget_exhausted
    prices: Mapping[str, Price] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    select: str | None = None
    confirm_pass: bool = DEFAULTS.confirm_pass
    criteria: tuple[str, ...] = ()
    on_evaluator_error: str = DEFAULTS.on_evaluator_error
    edits: bool | str = DEFAULTS.edits
    models: tuple[str, ...] | None = DEFAULTS.models

    @classmethod
    def from_cli(
        cls,
        evaluator: Sequence[str] | None,
        target_score: float,
        max_iterations: int,
        patience: int | None,
        memory: str,
        **extra: Any,
    ) -> CommandOptions:
        """Parse and check the command-line values (before any model is built).

        Args:
            evaluator: `--evaluator` specs.
            target_score: `--target-score`.
            max_iterations: `--max-iterations`.
            patience: `--patience` (0 disables).
            memory: `--memory`.
            **extra: `min_delta`, `strategy`, `on_budget_exhausted`, the budget limits
                `max_calls`, `max_tokens`, `max_seconds`, `max_cost` (None: not given),
                `prices` (the `--price` values), `schema` (`--schema`'s file), `select`,
                `confirm_pass`, `criteria` (`--criterion`), `on_evaluator_error` and
                `edits` (`--edits`).

        Raises:
            CliError: With exit code 2 (a usage error), naming the flag and the value.
        """
        strategy = extra.get("strategy")
        select = extra.get("select")
        try:
            options = cls(
                specs=parse_specs(list(evaluator or []), on_server=bool(extra.get("on_server"))),
                target_score=target_score,
                max_iterations=max_iterations,
                patience=parse_patience(patience),
                memory=parse_memory(memory),
                min_delta=extra.get("min_delta", DEFAULTS.min_delta),
                strategy=None
                if strategy is None
                else parse_choice(strategy, STRATEGY_CHOICES, option="--strategy"),
                budget=make_budget(*(extra.get(key) for key in BUDGET_KEYS)),
                prices=parse_prices(extra.get("prices")),
                on_budget_exhausted=parse_choice(
                    extra.get("on_budget_exhausted", DEFAULTS.on_budget_exhausted),
                    ON_BUDGET_CHOICES,
                    option="--on-budget-exhausted",
                ),
                output_schema=None
                if extra.get("schema") is None
                else read_schema(extra["schema"], option="--schema"),
                select=None
                if select is None
                else parse_choice(select, SELECT_CHOICES, option="--select"),
                confirm_pass=bool(extra.get("confirm_pass", DEFAULTS.confirm_pass)),
                criteria=_criteria(extra.get("criteria"), option="--criterion"),
                on_evaluator_error=parse_choice(
                    extra.get("on_evaluator_error", DEFAULTS.on_evaluator_error),
                    ON_EVALUATOR_ERROR_CHOICES,
                    option="--on-evaluator-error",
                ),
                edits=parse_edits(extra.get("edits", "off"), option="--edits"),
            )
            options.check()
        except CliError as exc:  # a bad option value is a usage error
            raise CliError(_flag_named(str(exc)), exit_code=2) from None
        return options

    def check(self) -> None:
        """Reject values outside their ranges, by the library's own checks (`LoopOptions`).

        Raises:
            CliError: For a value the loop would refuse (the message names the option).
        """
        try:
            LoopOptions(
                target_score=self.target_score,
                max_iterations=self.max_iterations,
                patience=self.patience,
                min_delta=self.min_delta,
            )
        except ValueError as exc:
            raise CliError(str(exc)) from None

    def override(self, line: Mapping[str, Any], *, on_server: bool = False) -> CommandOptions:
        """These options with a batch line's own values on top.

        Args:
            line: The batch line.
            on_server: The line runs on a server, which reads the files its checks name
                (see `parse_specs`).

        Raises:
            CliError: For a per-line value of the wrong type or range.
        """
        readers = _line_readers(on_server)
        changes = {name: read(line) for key, (name, read) in readers.items() if key in line}
        if not changes:  # the same object: a batch's lines share one compiled loop
            return self
        updated = replace(self, **changes)
        updated.check()
        return updated

    def run_context(self, models: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """These options as a run's `context` on a server (`RefineContext`).

        The check, the stop rules, and the options that are set (the others are left to
        the server's assistant).

        Args:
            models: `judge_model` / `max_tokens` given on the command line, for every run.
        """
        context: dict[str, Any] = {
            **({"evaluator": [spec.text for spec in self.specs]} if self.specs else {}),
            **(models or {}),
            "target_score": self.target_score,
            "max_iterations": self.max_iterations,
            "patience": self.patience,
            "min_delta": self.min_delta,
        }
        budget = budget_dict(self.run_budget())
        if budget:
            context["budget"] = budget
        if self.strategy is not None:
            context["strategy"] = self.strategy
        if self.select is not None:
            context["select"] = self.select
        if self.confirm_pass:
            context["confirm_pass"] = True
        if self.criteria:
            context["criteria"] = list(self.criteria)
        if self.on_evaluator_error != DEFAULTS.on_evaluator_error:
            context["on_evaluator_error"] = self.on_evaluator_error
        if self.output_schema is not None:  # the line's "schema" (or --schema): typed answers
            context["output_schema"] = self.output_schema
        if self.edits:  # the line's "edits" (or --edits): refinements by SEARCH/REPLACE
            context["edits"] = self.edits
        if self.models is not None:  # the line's own model(s) win over --model
            context["models"] = list(self.models)
        return context

    def run_budget(self) -> Budget | None:
        """The budget a task runs with: its limits, priced with the `--price` values."""
        return with_prices(self.budget, self.prices)

    def graph_kwargs(self, judge_model: Callable[[], BaseChatModel]) -> dict[str, Any]:
        """Keyword arguments for `create_refine_graph` / `refine` / `arefine`.

        Args:
            judge_model: Returns the LLM judge's model (called only if a judge is used).

        Raises:
            CliError: If a model cannot be built or an evaluator rejects its argument.
        """
        evaluator = build_evaluators(self.specs, judge_model)
        kwargs: dict[str, Any] = {
            "evaluator": evaluator,
            "target_score": self.target_score,
            "max_iterations": self.max_iterations,
            "patience": self.patience,
            "memory": self.memory,
            "min_delta": self.min_delta,
            "budget": self.run_budget(),
            "on_budget_exhausted": self.on_budget_exhausted,
            "retry_policy": CLI_RETRY_POLICY,
        }
        if self.strategy is not None:  # only when given: the library's default otherwise
            kwargs["strategy"] = self.strategy
        if self.output_schema is not None:
            kwargs["output_schema"] = self.output_schema
        if self.select is not None:
            kwargs["select"] = self.select
        if self.select == "pairwise":  # the judge model compares, whatever the checks are
            kwargs["comparer"] = judge_model()
        if self.confirm_pass:
            kwargs["confirm_pass"] = True
        if self.criteria:
            kwargs["criteria"] = self.criteria
        if self.on_evaluator_error != DEFAULTS.on_evaluator_error:
            kwargs["on_evaluator_error"] = self.on_evaluator_error
        if self.edits:
            kwargs["edits"] = self.edits
        if evaluator is None:
            kwargs["judge_model"] = judge_model()
        return kwargs


def _line_readers(on_server: bool) -> dict[str, tuple[str, Callable[[Mapping[str, Any]], Any]]]:
    """Each key a batch line may set: the option it sets, and how its value is read."""

    def choice(
        key: str, allowed: tuple[str, ...], optional: bool = False
    ) -> Callable[[Mapping[str, Any]], Any]:
        return lambda line: (
            None
            if optional and line[key] is None
            else parse_choice(line[key], allowed, option=repr(key))
        )

    def or_none(key: str, read: Callable[[Any], Any]) -> Callable[[Mapping[str, Any]], Any]:
        return lambda line: None if line[key] is None else read(line[key])

    return {
        "evaluator": ("specs", lambda line: parse_specs(line["evaluator"], on_server=on_server)),
        "target_score": ("target_score", lambda line: _number(line, "target_score")),
        "max_iterations": ("max_iterations", lambda line: _whole(line, "max_iterations")),
        "patience": (
            "patience",
            lambda line: (
                None if line["patience"] is None else parse_patience(_whole(line, "patience"))
            ),
        ),
        "memory": ("memory", lambda line: parse_memory(line["memory"])),
        "min_delta": ("min_delta", lambda line: _number(line, "min_delta")),
        "strategy": ("strategy", choice("strategy", STRATEGY_CHOICES)),
        "budget": ("budget", lambda line: parse_budget(line["budget"])),
        "schema": (
            "output_schema",
            lambda line: (
                None if line["schema"] is None else read_schema(line["schema"], option="'schema'")
            ),
        ),
        "edits": ("edits", lambda line: parse_edits(line["edits"], option="'edits'")),
        "select": ("select", choice("select", SELECT_CHOICES, optional=True)),
        "confirm_pass": ("confirm_pass", lambda line: _flag(line, "confirm_pass")),
        "criteria": ("criteria", lambda line: _criteria(line["criteria"], option="'criteria'")),
        "on_evaluator_error": (
            "on_evaluator_error",
            choice("on_evaluator_error", ON_EVALUATOR_ERROR_CHOICES),
        ),
        "model": (
            "models",
            lambda line: None if line["model"] is None else line_models(line["model"]),
        ),
        "on_budget_exhausted": (
            "on_budget_exhausted",
            choice("on_budget_exhausted", ON_BUDGET_CHOICES),
        ),
    }


def _flag(line: Mapping[str, Any], key: str) -> bool:
    value = line[key]
    if not isinstance(value, bool):
        raise CliError(f"{key!r} must be true or false, got {value!r}")
    return value


def _criteria(value: object, *, option: str) -> tuple[str, ...]:
    try:
        return tuple(criteria_list(value, option=option))
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _number(line: Mapping[str, Any], key: str) -> float:
    value = line[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CliError(f"{key!r} must be a number, got {value!r}")
    return float(value)


def _whole(line: Mapping[str, Any], key: str) -> int:
    value = line[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise CliError(f"{key!r} must be a whole number, got {value!r}")
    return value
