"""The loop's options as `run` and `batch` take them, and how they become the library's.

The options themselves are declared once, in the library's `LoopOptions`: the plain ones
are read as their declaration says (`cli._flags`). This module holds the readers of the
others (checks, memory, budget and prices, schema, edits, a line's models), which the
shared flags (`cli._shared.SharedFlags`) and a batch line use, and `CommandOptions`: what
a command line or a batch line gave, turned into the library's keywords or a server run's
context.
"""

from __future__ import annotations

import functools
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
    CONTEXT,
    GRAPH,
    LINE,
    RUN,
    LoopOptions,
    context_key,
    declaration,
    declared,
    line_key,
)
from langgraph_refine._typed import OutputSchema
from langgraph_refine.cli._calibration import Calibration
from langgraph_refine.cli._errors import CliError, given
from langgraph_refine.cli._flags import loop_flags, parse_choice
from langgraph_refine.cli._ladder_view import line_models
from langgraph_refine.cli._specs import EvaluatorSpec, build_evaluators, parse_specs

CLI_RETRY_POLICY: RetryPolicy = DEFAULT_RETRY_POLICY._replace(max_attempts=3)
"""Transient errors are retried twice (about 1.5 s of backoff), so a dead server fails fast."""

# Allowed values come from the library's own Literal types, so they cannot drift apart.
MEMORY_CHOICES: tuple[str, ...] = tuple(
    value for arg in get_args(MemoryPolicy) if get_origin(arg) is Literal for value in get_args(arg)
)
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


def flag_named(message: str) -> str:
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
            f"(a window of recent attempts), got {given(value)}"
        )
    if window < 1:
        raise CliError(f"memory window must be >= 1, got {window}")
    return window


@dataclass(frozen=True)
class CommandOptions:
    """The loop's options as given on the command line (or a batch line), parsed.

    Attributes:
        specs: Parsed evaluator specs; empty means the default LLM judge.
        settings: The `LoopOptions` fields given, by name, each as the field takes it
            (a flag not given is not here: the library's default, or the server's).
        prices: `--price` values: model prices for every task's budget.
        calibration: `--calibration FILE`: the check is judged calibrated (see
            `cli._calibration`); None without it.
    """

    specs: list[EvaluatorSpec] = field(default_factory=list)
    settings: Mapping[str, Any] = field(default_factory=dict)
    prices: Mapping[str, Price] = field(default_factory=dict)
    calibration: Calibration | None = None

    @property
    def models(self) -> tuple[str, ...] | None:
        """A batch line's own `model` (a ladder, cheapest first); None: `--model`'s."""
        models: tuple[str, ...] | None = self.settings.get("models")
        return models

    def check(self) -> None:
        """Reject values outside their ranges, by the library's own checks (`LoopOptions`).

        Raises:
            CliError: For a value the loop would refuse (the message names the option).
        """
        try:
            LoopOptions(**self.settings)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        criteria = self.settings.get("criteria")
        if criteria and self.specs and not any(_reads_criteria(spec) for spec in self.specs):
            checks = ", ".join(spec.text for spec in self.specs)
            raise CliError(
                f"the criteria ({', '.join(map(repr, criteria))}) need a judge to read them, "
                f"but the checks ({checks}) have none; add judge or checklist to the checks "
                f"(e.g. -e {self.specs[0].text!r} -e judge), or drop the criteria",
                exit_code=2,
            )

    def override(self, line: Mapping[str, Any], *, on_server: bool = False) -> CommandOptions:
        """These options with a batch line's own values on top.

        Args:
            line: The batch line.
            on_server: The line runs on a server, which reads the files its checks name
                (see `parse_specs`).

        Raises:
            CliError: For a per-line value of the wrong type or range.
        """
        changes = {
            name: read(line[key])
            for key, (name, read) in _line_readers(on_server).items()
            if key in line
        }
        if not changes:  # the same object: a batch's lines share one compiled loop
            return self
        specs = changes.pop(_CHECKS, self.specs)
        updated = replace(self, specs=specs, settings={**self.settings, **changes})
        updated.check()
        return updated

    def run_context(self, models: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """These options as a run's `context` on a server (`RefineContext`).

        The check and the options given that a run's context takes (the others are left
        to the server's assistant).

        Args:
            models: `judge_model` / `max_tokens` given on the command line, for every run.
        """
        context: dict[str, Any] = {
            **({"evaluator": [spec.text for spec in self.specs]} if self.specs else {}),
            **(models or {}),
        }
        for name, value in self.settings.items():
            if name in _IN_CONTEXT and name != "budget":
                context[context_key(name)] = list(value) if isinstance(value, tuple) else value
        budget = budget_dict(self.run_budget())
        if budget:
            context["budget"] = budget
        return context

    def run_budget(self) -> Budget | None:
        """The budget a task runs with: its limits, priced with the `--price` values."""
        return with_prices(self.settings.get("budget"), self.prices)

    def graph_kwargs(self, judge_model: Callable[[], BaseChatModel]) -> dict[str, Any]:
        """Keyword arguments for `create_refine_graph` / `refine` / `arefine`.

        Args:
            judge_model: Returns the LLM judge's model (called only if a judge is used).

        Raises:
            CliError: If a model cannot be built or an evaluator rejects its argument.
        """
        evaluator = build_evaluators(self.specs, judge_model)
        if self.calibration is not None:  # the same checks, their PASS calibrated
            from langgraph_refine.evaluators import llm_judge

            judge = evaluator if evaluator is not None else llm_judge(judge_model())
            evaluator = self.calibration.wrap(
                judge,
                self.specs,
                criteria=list(self.settings.get("criteria") or ()),
                require_calibration=bool(self.settings.get("require_calibration")),
            )
        kwargs: dict[str, Any] = {
            **{name: value for name, value in self.settings.items() if name in _IN_GRAPH},
            "evaluator": evaluator,
            "budget": self.run_budget(),
            "retry_policy": CLI_RETRY_POLICY,
        }
        if kwargs.get("select") == "pairwise":  # the judge model compares, whatever the checks
            kwargs["comparer"] = judge_model()
        if evaluator is None:
            kwargs["judge_model"] = judge_model()
        return kwargs


def _reads_criteria(spec: EvaluatorSpec) -> bool:
    """True if the check asks an LLM judge, which reads the run's criteria."""
    if spec.kind in ("judge", "checklist"):
        return True
    if spec.kind == "panel":
        return any(_reads_criteria(member) for member in spec.argument[1])
    if spec.kind == "cascade":
        return any(_reads_criteria(stage) for stage in spec.argument)
    return False


_CHECKS = "checks"
"""The field a line's `evaluator` sets: its specs are `CommandOptions.specs`."""
_IN_GRAPH = frozenset(declared(GRAPH))
_IN_CONTEXT = frozenset(declared(CONTEXT))


def _line_readers(on_server: bool) -> dict[str, tuple[str, Callable[[Any], Any]]]:
    """Each key a batch line may set: the field it sets, and how its value is read.

    The plain options are read as their flags are (`loop_flags`); the others here.
    """
    special: dict[str, Callable[[Any], Any]] = {
        _CHECKS: lambda value: parse_specs(value, on_server=on_server),
        "memory": parse_memory,
        "budget": parse_budget,
        "output_schema": lambda value: (
            None if value is None else read_schema(value, option=repr(line_key("output_schema")))
        ),
        "edits": lambda value: parse_edits(value, option="'edits'"),
        "models": lambda value: None if value is None else line_models(value),
    }
    plain = {flag.name: flag for flag in loop_flags(LINE)}
    readers: dict[str, tuple[str, Callable[[Any], Any]]] = {}
    for name in declared(LINE):
        key = line_key(name)
        if name in special:
            readers[key] = (name, special[name])
        else:
            readers[key] = (name, functools.partial(plain[name].read, option=repr(key)))
    return readers
