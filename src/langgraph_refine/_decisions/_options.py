"""The loop's options as typed objects: validated once, when the graph is built or a run starts.

`LoopOptions` gathers what the nodes need (stop rules, budget, strategy, prompt bounds).
Some of them can be set per run through the graph's `context_schema` (`RefineContext`);
`LoopOptions.for_run` applies such a context, validating it the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias, get_args

from langchain_core.language_models import BaseChatModel
from langgraph.types import RetryPolicy
from pydantic import BaseModel
from typing_extensions import TypedDict

from langgraph_refine._calls._budget import Budget
from langgraph_refine._calls._models import parse_max_tokens
from langgraph_refine._calls._run_models import check_run_models
from langgraph_refine._calls._specs import (
    EvaluatorSpec,
    check_judge_model,
    code_checks_allowed,
    parse_run_specs,
    parse_specs,
    run_judge_model,
)
from langgraph_refine._decisions._edits import EditsMode, check_edits
from langgraph_refine._decisions._memory import DEFAULT_MEMORY, MemoryPolicy, validate_memory
from langgraph_refine._state import (
    DEFAULT_SELECT_MARGIN,
    DEFAULT_SELECT_TOP,
    ComparerLike,
    PromptForm,
    Select,
    Strategy,
)
from langgraph_refine._stop_rules import StopRules
from langgraph_refine._typed import OutputSchema

HumanReview: TypeAlias = Literal["final", "every_round"]
"""When a human reviews: when the loop would stop, or after every evaluation."""

OnBudgetExhausted: TypeAlias = Literal["stop", "raise"]
"""What a budget stop does: return the best so far, or raise `BudgetExhaustedError`."""

DEFAULT_STRATEGY: Strategy = "explore"
"""The strategy that measured best in `make bench` (benchmarks/RESULTS.md says why)."""

DEFAULT_PROMPT_FORM: PromptForm = "single"
"""The refinement prompt form that measured best in `make bench`."""


def check_choice(option: str, value: object, allowed: Any, *, optional: bool = False) -> Any:
    """Return `value` if it is one of the `Literal` type's values, else raise.

    Args:
        option: The option name, for the message.
        value: What the caller passed.
        allowed: A `Literal[...]` type; its values are the allowed ones.
        optional: Whether None is allowed too.

    Raises:
        ValueError: Naming the option, the value and the allowed values.
    """
    choices = get_args(allowed)
    if (optional and value is None) or value in choices:
        return value
    listed = ", ".join(repr(c) for c in ((None, *choices) if optional else choices))
    raise ValueError(f"{option} must be one of {listed}; got {value!r}")


class RefineOptions(TypedDict, total=False):
    """The keyword options of `refine` / `arefine` (those of `create_refine_graph`).

    Typed so editors complete them and type checkers check them:
    `refine(model, task, evaluator, **options)` with `options: RefineOptions`, or the
    keywords written out. The meaning and defaults of each are `create_refine_graph`'s.
    """

    judge_model: BaseChatModel | str | None
    target_score: float
    max_iterations: int
    patience: int | None
    min_delta: float
    budget: Budget | None
    on_budget_exhausted: OnBudgetExhausted
    memory: MemoryPolicy
    human_review: HumanReview | None
    strategy: Strategy
    max_attempt_chars: int
    prompt_form: PromptForm
    name: str
    candidates: int
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None
    record_key: str | None
    output_schema: type[BaseModel] | Mapping[str, Any] | OutputSchema | None
    select: Select
    select_top: int
    select_margin: float
    comparer: ComparerLike
    confirm_pass: bool
    edits: EditsMode


class RefineContext(TypedDict, total=False):
    """Options that can be set per run: `graph.invoke(input, config, context={...})`.

    Each key overrides the option the graph was built with, for that run only (and so,
    on LangGraph Server, per run or per assistant). Invalid values fail with `ValueError`
    before any model call.

    `budget` is a dict of `Budget`'s fields: `max_calls`, `max_tokens`, `max_seconds`,
    `max_cost` and `prices`.

    Besides the loop's options, a run may set its check and its models' limits:

    - `evaluator`: a check spec or a list of them (combined with equal weights), in the
      CLI's spec language (`contains:a,b`, `regex:...`, `words:MIN-MAX`, `judge`,
      `no_repetition`, `schema:{...}`); it replaces the graph's evaluator for the run.
      Specs that read files or run code (`json-schema:FILE`, `python-tests:FILE`) are
      refused unless the environment sets `LANGGRAPH_REFINE_ALLOW_CODE_CHECKS=1`.
    - `judge_model`: the model of the run's `judge` check (a model string); alone, it
      makes the run's check `judge` on that model. `REFINE_JUDGE_MODELS`, when set,
      lists the models a run may name.
    - `max_tokens`: output tokens per generator call; at most the generator's own
      `max_tokens` (on the served graphs, `REFINE_MAX_TOKENS`).
    - `edits`: `True`, `False` or `"auto"`: refinements ask for SEARCH/REPLACE edits
      (see `create_refine_graph`).
    - `models`: a list of model strings, cheapest first: the run's generator is a ladder
      of these models in place of the graph's generator (one name: that model alone).
      `REFINE_MODELS`, when set, lists the models a run may name (see `_run_models`).
    """

    target_score: float
    max_iterations: int
    patience: int | None
    min_delta: float
    budget: dict[str, Any] | None
    strategy: Strategy
    evaluator: str | list[str]
    judge_model: str
    max_tokens: int
    record_key: str
    output_schema: dict[str, Any] | None
    select: Select
    select_top: int
    select_margin: float
    confirm_pass: bool
    edits: EditsMode
    models: list[str]


CONTEXT_KEYS: frozenset[str] = frozenset(RefineContext.__annotations__)


@dataclass(frozen=True)
class LoopOptions:
    """Everything the loop's nodes decide with, validated once.

    Args:
        rules: The stop rules.
        budget: Limits on calls, tokens, seconds and cost, or None.
        on_budget_exhausted: `"stop"` or `"raise"`.
        strategy: `"chain"`, `"explore"` or `"sample"`.
        memory: Which earlier attempts a refinement prompt shows.
        max_attempt_chars: Each attempt shown in a refinement prompt is cut to this.
        prompt_form: `"messages"` or `"single"` (chat-model generators).
        candidates: Responses sampled per round.
        name: The loop's name.
        checks: The run's check, from its context (None: the graph's evaluator).
        judge_model: The model string of the run's `judge` check, from its context.
        max_tokens: The run's limit on output tokens per generator call, from its context.
        record_key: The key of the strategy record explore keeps in the run's store
            (None: the evaluate node names the generator's model and the evaluator).
        output_schema: The object each attempt must be (a pydantic model class or a
            JSON schema dict, kept as an `OutputSchema`), or None for text.
        select: How the result is chosen when the loop stops: `"score"` (the best-result
            rule) or `"pairwise"` (see `_select`).
        select_top: With `"pairwise"`, the most attempts compared (>= 2).
        select_margin: With `"pairwise"`, the score distance from the best within which
            attempts are compared, in [0, 1].
        confirm_pass: Judge a round that would stop on PASS or `target_score` once more;
            stop only if that judgment agrees.
        edits: Whether refinements ask for SEARCH/REPLACE edits: `True`, `False` or
            `"auto"` (see `_edits`).
        models: The run's own generator models, from its context: a ladder of model
            strings, cheapest first (None: the graph's generator; see `_run_models`).

    Raises:
        ValueError: If an option is outside its allowed range (the message names it).
    """

    rules: StopRules = field(default_factory=StopRules)
    budget: Budget | None = None
    on_budget_exhausted: OnBudgetExhausted = "stop"
    strategy: Strategy = DEFAULT_STRATEGY
    memory: MemoryPolicy = DEFAULT_MEMORY
    max_attempt_chars: int = 8000
    prompt_form: PromptForm = DEFAULT_PROMPT_FORM
    candidates: int = 1
    name: str = "refine"
    checks: tuple[EvaluatorSpec, ...] | None = None
    judge_model: str | None = None
    max_tokens: int | None = None
    record_key: str | None = None
    output_schema: OutputSchema | None = None
    select: Select = "score"
    select_top: int = DEFAULT_SELECT_TOP
    select_margin: float = DEFAULT_SELECT_MARGIN
    confirm_pass: bool = False
    edits: EditsMode = False
    models: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # Frozen, so the coerced schema is set the way dataclasses set fields.
        object.__setattr__(self, "output_schema", OutputSchema.coerce(self.output_schema))
        check_choice("on_budget_exhausted", self.on_budget_exhausted, OnBudgetExhausted)
        check_choice("strategy", self.strategy, Strategy)
        check_choice("prompt_form", self.prompt_form, PromptForm)
        check_choice("select", self.select, Select)
        _check_selection(self.select_top, self.select_margin, self.confirm_pass)
        check_edits(self.edits)
        validate_memory(self.memory)
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise ValueError(f"budget must be a Budget or None, got {type(self.budget).__name__}")
        for option, value, floor in (
            ("max_attempt_chars", self.max_attempt_chars, 1),
            ("candidates", self.candidates, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < floor:
                raise ValueError(f"{option} must be an integer >= {floor}, got {value!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if self.record_key is not None and (
            not isinstance(self.record_key, str) or not self.record_key.strip()
        ):
            raise ValueError(
                f"record_key must be a non-empty string or None, got {self.record_key!r}"
            )

    @classmethod
    def build(cls, options: LoopOptions | None = None, **settings: Any) -> LoopOptions:
        """Options from keyword settings: `LoopOptions` fields or `StopRules` fields.

        Args:
            options: Options to start from (defaults when None).
            **settings: `target_score`, `max_iterations`, `patience`, `min_delta`, or any
                field of `LoopOptions`.

        Raises:
            ValueError: For an unknown setting or an invalid value.
        """
        base = options or cls()
        rule_fields = {k: settings.pop(k) for k in _RULE_FIELDS if k in settings}
        unknown = sorted(set(settings) - _OPTION_FIELDS)
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; allowed: {sorted(_ALL_FIELDS)}")
        if rule_fields:
            settings["rules"] = replace(base.rules, **rule_fields)
        return replace(base, **settings) if settings else base

    def for_run(self, context: object) -> LoopOptions:
        """These options with a run's context applied (see `RefineContext`).

        Args:
            context: None, a mapping, or an object with the context's attributes.

        Raises:
            ValueError: For an unknown key or an invalid value.
        """
        values = _context_values(context)
        if not values:
            return self
        if "budget" in values:
            values["budget"] = Budget.coerce(values["budget"], option="context budget")
        values.update(_run_checks(values))
        return self.build(self, **values)


def _check_selection(top: object, margin: object, confirm_pass: object) -> None:
    """Validate `select_top`, `select_margin` and `confirm_pass`.

    Raises:
        ValueError: Naming the option, the value and the allowed range.
    """
    if not isinstance(top, int) or isinstance(top, bool) or top < 2:
        raise ValueError(f"select_top must be an integer >= 2, got {top!r}")
    if (
        not isinstance(margin, int | float)
        or isinstance(margin, bool)
        or not 0.0 <= margin <= 1.0  # NaN fails this too
    ):
        raise ValueError(f"select_margin must be a number in [0, 1], got {margin!r}")
    if not isinstance(confirm_pass, bool):
        raise ValueError(f"confirm_pass must be True or False, got {confirm_pass!r}")


def _context_values(context: object) -> dict[str, Any]:
    if context is None:
        return {}
    if isinstance(context, Mapping):
        values = dict(context)
    else:
        values = {k: getattr(context, k) for k in CONTEXT_KEYS if hasattr(context, k)}
    unknown = sorted(set(values) - CONTEXT_KEYS)
    if unknown:
        raise ValueError(f"unknown run context key(s) {unknown}; allowed: {sorted(CONTEXT_KEYS)}")
    return values


def _run_checks(values: dict[str, Any]) -> dict[str, Any]:
    """Validate (and take out of `values`) a run's check and models.

    The keys: `evaluator`, `judge_model`, `max_tokens` and `models`.

    Raises:
        ValueError: For a bad or refused spec, an empty judge model, or a bad `max_tokens`
            (each message names the key, the value, and what is allowed).
    """
    checked: dict[str, Any] = {}
    if "max_tokens" in values:
        checked["max_tokens"] = parse_max_tokens(values.pop("max_tokens"), source="max_tokens")
    if "models" in values:
        checked["models"] = check_run_models(values.pop("models"))
    judge = values.pop("judge_model", None)
    if judge is not None:
        if not isinstance(judge, str) or not judge.strip():
            raise ValueError(
                f"judge_model must be a model string ('provider:model' or a model name), "
                f"got {judge!r}"
            )
        checked["judge_model"] = judge.strip()
        check_judge_model(checked["judge_model"])
        run_judge_model(checked["judge_model"], checked.get("max_tokens"))
    specs = values.pop("evaluator", None)
    if specs is None and judge is not None:
        specs = "judge"  # a judge model alone asks for the judge on it
    if specs is not None:
        texts = (specs,) if isinstance(specs, str) else specs
        allow = code_checks_allowed()
        if isinstance(texts, list | tuple) and all(isinstance(s, str) for s in texts):
            checked["checks"] = parse_run_specs(tuple(texts), allow) or None
        else:
            parse_specs(specs, allow_files=allow)  # raises, naming what was wrong
    return checked


_RULE_FIELDS = ("target_score", "max_iterations", "patience", "min_delta")
_OPTION_FIELDS = frozenset(LoopOptions.__dataclass_fields__)
_ALL_FIELDS = _OPTION_FIELDS | set(_RULE_FIELDS)
