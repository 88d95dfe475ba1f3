"""The loop's options, declared once: validated when the graph is built or a run starts.

`LoopOptions` is the declaration: one field per option (type, default, meaning in its
docstring, validation in `__post_init__`), each saying which surfaces take it (`Declared`):
`create_refine_graph` and `refine` (`RefineOptions`), `RefineMiddleware`
(`AgentOptions`), a run's context (`RefineContext`, `LoopOptions.for_run`) and the
command line's flags. The typed dicts are written out for type checkers; a test
checks every surface against the declaration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import Field, dataclass, field, fields, replace
from functools import cached_property
from typing import Any, Literal, TypeAlias, get_args

from langchain_core.language_models import BaseChatModel
from langgraph.types import RetryPolicy
from pydantic import BaseModel
from typing_extensions import TypedDict

from langgraph_refine._calls._budget import Budget
from langgraph_refine._calls._models import parse_max_tokens
from langgraph_refine._calls._retry import DEFAULT_RETRY_POLICY
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
OnEvaluatorError: TypeAlias = Literal["retry", "skip", "raise"]
"""What a round does when its evaluator cannot judge an attempt (`evaluators.Unjudged`)."""
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


def criteria_list(value: object, *, option: str = "criteria") -> list[str]:
    """Criteria as a list of non-blank strings, from a string, a list of strings or None.

    Raises:
        ValueError: For anything else, naming the option and the value.

    Example:
        >>> criteria_list("Rhymes"), criteria_list(["Short", " "]), criteria_list(None)
        (['Rhymes'], ['Short'], [])
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, Sequence) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    raise ValueError(
        f"{option} must be a string or a list of strings, got {value!r:.100}; "
        'for example "Cite a source" or ["Cite a source", "At most 100 words"]'
    )


class AgentOptions(TypedDict, total=False):
    """The keyword options of `RefineMiddleware`: the `LoopOptions` fields an agent takes.

    The others (`candidates`, `prompt_form`, ...) have no meaning in an agent, and
    `RefineMiddleware` refuses them; `LoopOptions`'s declaration says why for each.
    """

    judge_model: BaseChatModel | str | None
    target_score: float
    max_iterations: int
    patience: int | None
    min_delta: float
    budget: Budget | None
    on_budget_exhausted: OnBudgetExhausted
    criteria: str | Sequence[str]
    on_evaluator_error: OnEvaluatorError
    human_review: HumanReview | None
    strategy: Strategy
    record_key: str | None
    memory: MemoryPolicy
    select: Select
    select_top: int
    select_margin: float
    comparer: ComparerLike
    confirm_pass: bool
    require_calibration: bool
    edits: EditsMode
    stream_drafts: bool
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None


class RefineOptions(AgentOptions, total=False):
    """The keyword options of `create_refine_graph` and `refine` / `arefine`.

    Typed so editors complete them and type checkers check them:
    `refine(model, task, evaluator, **options)` with `options: RefineOptions`, or the
    keywords written out. Each is a field of `LoopOptions`, which gives its meaning and
    default; a test keeps the two in step. Every option an agent takes (`AgentOptions`),
    and the graph's own prompts and candidates:
    """

    max_attempt_chars: int
    prompt_form: PromptForm
    name: str
    candidates: int
    output_schema: type[BaseModel] | Mapping[str, Any] | OutputSchema | None


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
    require_calibration: bool
    criteria: str | list[str]
    on_evaluator_error: OnEvaluatorError
    edits: EditsMode
    models: list[str]


AGENT_DEFAULTS: AgentOptions = {"strategy": "chain", "memory": "all", "stream_drafts": False}
"""`RefineMiddleware`'s own defaults without `options=`: a chat goes on from its last
answer, sees all its answers, and gets the best one once, whole."""


GRAPH = "graph"
"""Surface: `create_refine_graph`'s keywords, and so `refine`/`arefine`'s (`RefineOptions`)."""
AGENT = "agent"
"""Surface: `RefineMiddleware`'s keywords (`AgentOptions`)."""
CONTEXT = "context"
"""Surface: a run's context (`RefineContext`), on a served graph too."""
RUN = "run"
"""Surface: the flags of the command line's `run`."""
BATCH = "batch"
"""Surface: the flags of the command line's `batch`."""
LINE = "line"
"""Surface: a batch line's own keys (what `batch` takes, unless an option says not)."""
SURFACES: tuple[str, ...] = (GRAPH, AGENT, CONTEXT, RUN, BATCH, LINE)

_SURFACE_NAMES = {
    GRAPH: "create_refine_graph (and refine / arefine)",
    AGENT: "RefineMiddleware",
    CONTEXT: "a run's context",
    RUN: "the run command",
    BATCH: "the batch command",
    LINE: "a batch line",
}


@dataclass(frozen=True)
class Declared:
    """Where a loop option is taken, kept beside its field (`field(metadata=...)`).

    Every surface takes every option, unless the option says why not.

    Args:
        flags: The command line's flags that set it (the `run` and `batch` surfaces).
        context_key: Its key in a run's context, when not the field's name.
        not_in: The surfaces that do not take it, each with the reason.
        line_key: Its key in a batch line, when not the field's name.
        kept: It changes how attempts score, when the loop stops or what it returns, so a
            checkpointed thread keeps it: a rerun with another value is refused (see
            `_loop._thread`).
        help: What its flag's help says (the command line adds the choices and default).
        tool: What a tool's caller is told it does, in a host's words (no Python names):
            the served graphs' input schema and `langgraph-refine mcp`'s arguments. Every
            option a run's context takes has one.
        offered: Whether `langgraph-refine mcp` offers it to a host model as an argument
            (False: the server's flag sets it, or it keeps its default), so the tool's
            listing stays short.
    """

    flags: tuple[str, ...] = ()
    context_key: str | None = None
    not_in: Mapping[str, str] = field(default_factory=dict)
    line_key: str | None = None
    kept: bool = False
    help: str = ""
    tool: str = ""
    offered: bool = True


def declare(
    *,
    flags: tuple[str, ...] = (),
    context_key: str | None = None,
    not_in: Mapping[str, str] | None = None,
    line_key: str | None = None,
    kept: bool = False,
    help: str = "",
    tool: str = "",
    offered: bool = True,
) -> dict[str, Declared]:
    """A `LoopOptions` field's metadata: where it is taken (see `Declared`).

    Raises:
        ValueError: For a surface that does not exist (a typo would put the option on it).
    """
    unknown = set(not_in or {}) - set(SURFACES)
    if unknown:
        raise ValueError(f"unknown surface(s) {sorted(unknown)}; surfaces: {SURFACES}")
    not_in = dict(not_in or {})
    return {"option": Declared(flags, context_key, not_in, line_key, kept, help, tool, offered)}


_BUILT = "used when the graph is built, so a run cannot change it"
_CLI_FIXED = "the command line does not expose it"
_GRAPH_RUN = "a run's own setting: the graph and the middleware take a generator and an evaluator"
_WHOLE_BATCH = "set once for the whole batch (its flag)"


def _not_on_cli(reason: str = _CLI_FIXED) -> dict[str, str]:
    """`not_in` for an option neither `run` nor `batch` takes, for `reason`."""
    return {RUN: reason, BATCH: reason}


_NOT_ON_CLI = _not_on_cli()


def _pairwise_only(tool: str) -> dict[str, Any]:
    """A pairwise selection's setting: kept for a run, set by a server, not on the CLI."""
    return declare(offered=False, tool=tool, kept=True, not_in=_NOT_ON_CLI)


def _graph_built(agent_why: str) -> dict[str, str]:
    """Where an option set when the graph is built is refused: a run, an agent, the CLI."""
    return {CONTEXT: _BUILT, AGENT: agent_why, **_NOT_ON_CLI}


@dataclass(frozen=True)
class LoopOptions:
    """The refine loop's options, each declared once: type, default, validation, meaning.

    Build it once and pass it as `options=` to `create_refine_graph`, `refine` /
    `arefine` and `RefineMiddleware`; keywords given beside it override its fields
    (`create_refine_graph(model, options=opts, max_iterations=2)`). Each surface takes
    the options that have a meaning there: the middleware refuses a value set for one
    it does not take (`memory`, `select`, ...), naming the option and why. A run's
    context (`RefineContext`) sets those a run may change, `LoopOptions.for_run`
    applying it with the same checks. The nodes decide with it: `rules` holds the
    stop rules of `target_score`, `max_iterations`, `patience` and `min_delta`.

    Raises:
        ValueError: If an option is outside its allowed range (the message names it).

    Example:
        >>> from langgraph_refine import Budget, LoopOptions
        >>> options = LoopOptions(max_iterations=2, budget=Budget(max_calls=8))
        >>> options.rules.max_iterations
        2
    """

    judge_model: BaseChatModel | str | None = field(
        default=None,
        metadata=declare(
            offered=False,
            tool="The model that judges (default: the answering model).",
            kept=True,
            flags=("--judge-model",),
            not_in={LINE: _WHOLE_BATCH},
        ),
    )
    """The model of the default LLM judge (when `evaluator` is None): a chat model or a
    `"provider:model"` string. By default the generator's model (the ladder's first rung;
    in an agent, the agent's own model). In a run's context, a model string: alone, it
    makes the run's check `judge` on that model (`REFINE_JUDGE_MODELS`, when set, lists
    the models a run may name)."""

    target_score: float = field(
        default=0.9,
        metadata=declare(
            tool="Stop once an answer scores at least this (0 to 1).",
            kept=True,
            flags=("--target-score",),
            help="Stop once an attempt scores at least this (0-1).",
        ),
    )
    """Stop once an attempt scores at least this, in [0, 1]."""

    max_iterations: int = field(
        default=4,
        metadata=declare(
            tool="The most rounds of improvement after the first answer.",
            kept=True,
            flags=("--max-iterations",),
            help="Refinement rounds after the first attempt.",
        ),
    )
    """Refinement rounds after the first generation (>= 0)."""

    patience: int | None = field(
        default=2,
        metadata=declare(
            tool="Stop after this many rounds without a better score (0: never).",
            kept=True,
            flags=("--patience",),
            help="Stop after this many rounds without a better score; 0 disables.",
        ),
    )
    """Stop after this many refinement rounds without raising the best score by more
    than `min_delta` (>= 1); None or 0 disables the rule (kept as None)."""

    min_delta: float = field(
        default=0.0,
        metadata=declare(
            offered=False,
            tool="The least score gain that counts as progress.",
            kept=True,
            flags=("--min-delta",),
            help="The least score gain that counts as progress.",
        ),
    )
    """Improvement of the best score that counts as progress (>= 0)."""

    budget: Budget | None = field(
        default=None,
        metadata=declare(
            tool="Limits for the whole call (each optional).",
            kept=True,
            flags=(
                "--budget-calls",
                "--budget-tokens",
                "--budget-seconds",
                "--max-cost",
                "--price",
            ),
        ),
    )
    """Limits on model calls, tokens, seconds and cost, checked before every call (None:
    no limit). In a run's context, a dict of `Budget`'s fields."""

    on_budget_exhausted: OnBudgetExhausted = field(
        default="stop",
        metadata=declare(
            kept=True,
            flags=("--on-budget-exhausted",),
            not_in={CONTEXT: _BUILT},
            help="When the budget runs out: stop returns the best so far; raise fails the task.",
        ),
    )
    """`"stop"` returns the best so far; `"raise"` raises `BudgetExhaustedError`
    carrying it."""

    criteria: tuple[str, ...] = field(
        default=(),
        metadata=declare(
            tool="What the answer must satisfy: a string or a list of them.",
            kept=True,
            flags=("--criterion",),
            help="What the answer must satisfy, added to every LLM judge's criteria "
            "(repeatable: one criterion each).",
        ),
    )
    """What every LLM judge of the loop checks besides its own criteria (the default judge,
    `llm_judge`, `checklist`): a string or a list of strings. A request adds its own in
    its input (`criteria` beside `task` or `messages`); a run's context may set them."""

    on_evaluator_error: OnEvaluatorError = field(
        default="retry",
        metadata=declare(
            offered=False,
            tool="An answer the judge cannot judge: judge again (retry), leave it (skip), "
            "fail (raise).",
            kept=True,
            flags=("--on-evaluator-error",),
            help="When the judge cannot judge an answer (unreadable replies, a judge model "
            "that keeps failing): retry judges it again, twice at most; skip keeps it "
            "unjudged; raise fails the task. Unjudged answers are never counted as failed.",
        ),
    )
    """When the evaluator cannot judge an attempt (an LLM judge's replies unreadable after
    its re-ask, a judge model's call failing after its retries, a panel none of whose
    members could judge): `"retry"` judges the same answer again (model calls counted
    in the budget) up to 2 more times, then keeps it unjudged; `"skip"` keeps it
    unjudged at once; `"raise"` raises `evaluators.Unjudged` carrying the best result
    so far (`.result`). An unjudged attempt has `score` None and `Attempt.error`; it
    is never counted as failed, nor as a round without improvement."""

    memory: MemoryPolicy = field(
        default=DEFAULT_MEMORY,
        metadata=declare(
            flags=("--memory",),
            not_in={CONTEXT: _BUILT},
        ),
    )
    """Earlier attempts shown to the generator: `"best_and_last"` (default, bounded),
    `"last"`, `"all"`, or an int window of the latest attempts."""

    human_review: HumanReview | None = field(
        default=None,
        metadata=declare(
            flags=("--review",),
            not_in={CONTEXT: _BUILT, BATCH: "a batch runs without a person to answer"},
        ),
    )
    """None, `"final"` (interrupt when the loop would stop) or `"every_round"`
    (interrupt after every evaluation). Needs a checkpointer."""

    strategy: Strategy = field(
        default=DEFAULT_STRATEGY,
        metadata=declare(
            offered=False,
            tool="What rounds improve: the best answers (explore), the last (chain), new ones "
            "(sample).",
            flags=("--strategy",),
            help="How rounds choose what to refine.",
        ),
    )
    """What each round after the first does: `"explore"` (default: refine while it
    helps, else choose between refining an earlier attempt and sampling afresh),
    `"chain"` (always refine the latest) or `"sample"` (best-of-N). `RefineMiddleware`
    without `options=` chains by default."""

    max_attempt_chars: int = field(
        default=8000,
        metadata=declare(
            not_in=_graph_built("the agent keeps its own conversation"),
        ),
    )
    """Each attempt shown in a refinement prompt is cut to this many characters, with a
    note that it was cut."""

    prompt_form: PromptForm = field(
        default=DEFAULT_PROMPT_FORM,
        metadata=declare(
            not_in=_graph_built("the agent writes its own turns"),
        ),
    )
    """How a chat model is asked to refine: `"messages"` (a conversation: task, attempt
    as the model's turn, feedback) or `"single"` (one message)."""

    name: str = field(
        default="refine",
        metadata=declare(
            not_in=_graph_built("the agent's loop is always named 'refine'"),
        ),
    )
    """The loop's name, used in run names, tags and stream events."""

    candidates: int = field(
        default=1,
        metadata=declare(
            not_in=_graph_built("an agent gives one answer a turn"),
        ),
    )
    """Responses sampled per round (>= 1). Each is evaluated and the best becomes the
    round's attempt. Every candidate is a model call (and a judge call with an LLM
    judge)."""

    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = field(
        default=DEFAULT_RETRY_POLICY,
        metadata=declare(
            not_in={
                CONTEXT: _BUILT,
                **_not_on_cli(
                    "the command line sets its own (fewer tries, so a dead server fails fast)"
                ),
            }
        ),
    )
    """Retry policy of the model-calling nodes; by default transient provider errors are
    retried with backoff and other errors fail at once."""

    record_key: str | None = field(
        default=None,
        metadata=declare(
            offered=False,
            tool="Where the server keeps what it learns (default: per model and check).",
            not_in=_NOT_ON_CLI,
        ),
    )
    """The key of the strategy record `strategy="explore"` keeps when the loop runs with
    a store (`compile(store=...)`). By default it names the generator's model and the
    evaluator's kind, e.g. `"openai:gpt-4o-mini|llm_judge"`; runs with the same key pool
    what they learn."""

    output_schema: OutputSchema | None = field(
        default=None,
        metadata=declare(
            tool="A JSON Schema: answer with a JSON object of that shape instead of text.",
            kept=True,
            flags=("--schema",),
            not_in={AGENT: "an agent answers in messages"},
            line_key="schema",
        ),
    )
    """Refine an object instead of text: a pydantic model class or a JSON schema dict
    (kept as an `OutputSchema`). A chat model is asked for it through the provider's
    structured output; each attempt's `response` is the object as JSON text and its
    `output` the object as plain JSON; a reply that is not a valid object is evaluated
    FAIL (score 0, the validation errors as feedback) without calling the evaluator. The
    graph also writes `output` for its caller."""

    select: Select = field(
        default="score",
        metadata=declare(
            offered=False,
            tool="How the result is chosen: best score, or pairwise (the judge compares the best).",
            kept=True,
            flags=("--select",),
            help="How the result is chosen when the loop stops (pairwise: the judge model "
            "compares the best attempts in pairs, both orders; each comparison is a model "
            "call).",
        ),
    )
    """How the result is chosen when the loop stops: `"score"` (the best evaluated
    attempt) or `"pairwise"`: the attempts within `select_margin` of the best score, at
    most `select_top`, are compared in pairs, each pair in both orders (orders that
    disagree make a tie); the most wins is the result (then the higher score, then the
    earlier attempt). Comparisons are model calls counted against the budget; when the
    budget left cannot pay for all of them, the choice is by score.
    `RefineResult.metadata["selection"]` lists them."""

    select_top: int = field(
        default=DEFAULT_SELECT_TOP,
        metadata=_pairwise_only("With pairwise: the most answers compared."),
    )
    """The most attempts compared with `select="pairwise"` (>= 2)."""

    select_margin: float = field(
        default=DEFAULT_SELECT_MARGIN,
        metadata=_pairwise_only("With pairwise: compare answers this close to the best score."),
    )
    """Score distance from the best within which attempts are compared, in [0, 1]."""

    comparer: ComparerLike = field(
        default=None,
        metadata=declare(
            not_in={
                CONTEXT: _BUILT,
                **_not_on_cli("the judge model compares"),
            }
        ),
    )
    """Who compares with `select="pairwise"`: a chat model or model string (asked with
    the library's pairwise prompt) or a callable `(task, first, second) -> "first" |
    "second" | "tie"`; by default `judge_model`, else the LLM judge's model, else the
    generator (a chat model)."""

    confirm_pass: bool = field(
        default=False,
        metadata=declare(
            offered=False,
            tool="Judge a stopping answer twice; stop only if both agree.",
            kept=True,
            flags=("--confirm-pass",),
            help="Judge a round that would stop on PASS or the target score once more; stop "
            "only if the second judgment agrees (one more judge call).",
        ),
    )
    """When a round would stop on a PASS verdict or on `target_score`, judge the same
    response once more (one more evaluator call, counted in the budget); stop only if
    that judgment agrees, else go on with its feedback."""

    require_calibration: bool = field(
        default=False,
        metadata=declare(
            offered=False,
            kept=True,
            tool="Stop on a pass only if the judge is calibrated against people's verdicts.",
            flags=("--require-calibration",),
            help="Stop on a PASS or the target score only when the judge is calibrated "
            "(--calibration FILE); an uncalibrated PASS is not trusted and the run goes on "
            "to its other limits.",
        ),
    )
    """Trust only a calibrated PASS (an `evaluators.calibrate` judge's): a PASS verdict or
    a score at `target_score` from an uncalibrated evaluator (or under a calibrated
    judge's threshold) does not stop the loop, which ends at its other limits with the
    best answer; `RefineResult.metadata["untrusted_pass"]` lists the attempts whose stop
    was refused."""

    edits: EditsMode = field(
        default=False,
        metadata=declare(
            offered=False,
            tool="Improve by edits (true), rewrites (false), or edits for long answers (auto).",
            flags=("--edits",),
        ),
    )
    """`True`: every refinement (reviewer revisions included) asks a chat-model or graph
    generator for SEARCH/REPLACE blocks against the refined attempt, and the new
    attempt's `response` is the edited text (`Attempt.edits` counts the blocks). Blocks
    that do not all apply change nothing: the attempt keeps its parent's text and is
    evaluated FAIL (score 0, feedback naming each block) without calling the evaluator.
    A reply without blocks is a rewrite; fresh samples are written whole. `"auto"`:
    edits only for attempts longer than `EDITS_AUTO_MIN_CHARS` (2000) characters. With
    `output_schema`, the edits apply to the object's JSON text, pretty-printed."""

    stream_drafts: bool = field(
        default=True,
        metadata=declare(
            not_in={
                CONTEXT: _BUILT,
                **_not_on_cli("the command line shows rounds, not tokens"),
            }
        ),
    )
    """Whether attempts stream as they are generated (`stream_mode="messages"`), each
    chunk's metadata naming its attempt (`refine_attempt`), so a UI can replace a draft
    by the next. False: no token of any attempt streams; the result reaches a chat once
    (the graph's `messages` answer, the agent's last message). `RefineMiddleware`
    without `options=` defaults to False."""

    checks: tuple[EvaluatorSpec, ...] | None = field(
        default=None,
        metadata=declare(
            tool="Checks instead of the judge: words:50-120, contains:a,b, regex:P, judge.",
            flags=("--evaluator",),
            context_key="evaluator",
            line_key="evaluator",
            not_in={GRAPH: _GRAPH_RUN, AGENT: _GRAPH_RUN},
        ),
    )
    """A run's check, from its context's `evaluator` (check specs in the command line's
    language); None: the graph's evaluator."""

    max_tokens: int | None = field(
        default=None,
        metadata=declare(
            tool="Output tokens per model request (at most the server's cap).",
            flags=("--max-tokens",),
            not_in={
                GRAPH: "the generator's own setting",
                AGENT: "the agent's model's own setting",
                LINE: _WHOLE_BATCH,
            },
        ),
    )
    """Output tokens per generator call for a run, at most the generator's own
    `max_tokens` (on the served graphs, `REFINE_MAX_TOKENS`)."""

    models: tuple[str, ...] | None = field(
        default=None,
        metadata=declare(
            offered=False,
            tool="Models that write the answers, cheapest first (default: the server's).",
            flags=("--model",),
            not_in={GRAPH: _GRAPH_RUN, AGENT: "the agent's own model answers"},
            line_key="model",
        ),
    )
    """A run's own generator: model strings, cheapest first (a ladder in place of the
    graph's generator; one name: that model alone). `REFINE_MODELS`, when set, lists the
    models a run may name."""

    def __post_init__(self) -> None:
        # Frozen, so the coerced schema is set the way dataclasses set fields.
        object.__setattr__(self, "output_schema", OutputSchema.coerce(self.output_schema))
        object.__setattr__(self, "criteria", tuple(criteria_list(self.criteria)))
        # The stop rules check their own fields; kept for the nodes (see `rules`).
        self.__dict__["rules"] = self._stop_rules()
        object.__setattr__(self, "patience", self.rules.patience)  # 0 is kept as None
        check_choice("on_budget_exhausted", self.on_budget_exhausted, OnBudgetExhausted)
        check_choice("on_evaluator_error", self.on_evaluator_error, OnEvaluatorError)
        check_choice("human_review", self.human_review, HumanReview, optional=True)
        check_choice("strategy", self.strategy, Strategy)
        check_choice("prompt_form", self.prompt_form, PromptForm)
        check_choice("select", self.select, Select)
        _check_selection(self.select_top, self.select_margin, self.confirm_pass)
        check_edits(self.edits)
        if not isinstance(self.stream_drafts, bool):
            raise ValueError(f"stream_drafts must be True or False, got {self.stream_drafts!r}")
        validate_memory(self.memory)
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise ValueError(f"budget must be a Budget or None, got {type(self.budget).__name__}")
        for name, value, floor in (
            ("max_attempt_chars", self.max_attempt_chars, 1),
            ("candidates", self.candidates, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < floor:
                raise ValueError(f"{name} must be an integer >= {floor}, got {value!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if self.record_key is not None and (
            not isinstance(self.record_key, str) or not self.record_key.strip()
        ):
            raise ValueError(
                f"record_key must be a non-empty string or None, got {self.record_key!r}"
            )

    @cached_property
    def rules(self) -> StopRules:
        """The stop rules of `target_score`, `max_iterations`, `patience` and `min_delta`."""
        return self._stop_rules()  # set by __post_init__; this runs only if that was bypassed

    def _stop_rules(self) -> StopRules:
        # Each of StopRules' parameters is an option of the same name.
        return StopRules(**{f.name: getattr(self, f.name) for f in fields(StopRules)})

    @classmethod
    def build(
        cls, options: LoopOptions | None = None, *, surface: str | None = None, **settings: Any
    ) -> LoopOptions:
        """`options` (defaults when None) with keyword `settings` on top.

        Args:
            options: Options to start from.
            surface: Who asks (`GRAPH`, `AGENT`, ...): then a setting that surface does
                not take, or a value `options` sets for one, is refused.
            **settings: Fields of `LoopOptions`.

        Raises:
            ValueError: For an unknown setting, one the surface does not take, or an
                invalid value (the message names it).
        """
        if options is not None and not isinstance(options, LoopOptions):
            raise ValueError(
                f"options must be a LoopOptions, got {type(options).__name__}: build it with "
                "LoopOptions(...), or pass the options as keywords"
            )
        base = options or cls()
        allowed = set(declared(surface)) if surface is not None else _OPTION_FIELDS
        unknown = sorted(set(settings) - allowed)
        if unknown:
            raise ValueError(_refused(unknown, surface, allowed))
        if surface is not None and options is not None:
            _check_taken(options, surface)
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


def kept_options() -> tuple[str, ...]:
    """The options a checkpointed thread keeps (declared `kept`), in declaration order."""
    return tuple(f.name for f in fields(LoopOptions) if _declared(f).kept)


def declared(surface: str) -> tuple[str, ...]:
    """The options `surface` takes (their field names), in declaration order.

    Raises:
        ValueError: For an unknown surface.
    """
    if surface not in SURFACES:
        raise ValueError(f"unknown surface {surface!r}; surfaces: {SURFACES}")
    taken = declared(BATCH) if surface == LINE else None  # a line takes what batch takes ...
    return tuple(
        f.name
        for f in fields(LoopOptions)
        if surface not in _declared(f).not_in and (taken is None or f.name in taken)
    )


def declaration(name: str) -> Declared:
    """Where the option `name` is taken (its flags, context key, and the surfaces that do not)."""
    return _declared(LoopOptions.__dataclass_fields__[name])


def context_key(name: str) -> str:
    """The key of the option `name` in a run's context."""
    return declaration(name).context_key or name


def line_key(name: str) -> str:
    """The key of the option `name` in a batch line."""
    return declaration(name).line_key or name


def _declared(f: Field[Any]) -> Declared:
    declared_: Declared = f.metadata["option"]
    return declared_


def _refused(names: list[str], surface: str | None, allowed: AbstractSet[str]) -> str:
    if surface is None or not set(names) <= _OPTION_FIELDS:
        return f"unknown option(s) {names}; allowed: {sorted(allowed)}"
    why = ", ".join(f"{n} ({declaration(n).not_in[surface]})" for n in names)
    return f"{_SURFACE_NAMES[surface]} does not take {why}"


def _check_taken(options: LoopOptions, surface: str) -> None:
    """Refuse an options object that sets an option `surface` does not take."""
    taken = set(declared(surface))
    set_ = [
        f.name
        for f in fields(LoopOptions)
        if f.name not in taken and getattr(options, f.name) != getattr(DEFAULTS, f.name)
    ]
    if set_:
        raise ValueError(
            _refused(set_, surface, taken)
            + ": leave it at its default in the options you pass here"
        )


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


_OPTION_FIELDS = frozenset(LoopOptions.__dataclass_fields__)

DEFAULTS = LoopOptions()
"""Every option at its default (the command line's flags take theirs from here)."""

CONTEXT_KEYS: frozenset[str] = frozenset(context_key(name) for name in declared(CONTEXT))
"""The keys a run's context may set."""


def with_input_options(context: object, given: Mapping[str, Any] | None) -> object:
    """A run's context with the options its input gave (`given`, keyed as in a context).

    Options may come in a run's input (a served graph takes them beside `task`, where an
    MCP host can set them) as well as in its context; both are then checked together by
    `LoopOptions.for_run`, so they mean the same and fail the same.

    Args:
        context: The run's context (None, a mapping or an object with its attributes).
        given: The input's options; None or empty: `context` as it is.

    Raises:
        ValueError: For a key that is not a run-context key, or an option the context and
            the input both set to different values (naming it and both values).
    """
    if not given:
        return context
    values = _context_values(context)
    clashes = sorted(k for k in given if k in values and values[k] != given[k])
    if clashes:
        both = "; ".join(
            f"{k}: {values[k]!r} in the context, {given[k]!r} in the input" for k in clashes
        )
        raise ValueError(
            f"option(s) set in both the run's context and its input, differently ({both}): "
            "set each in one place"
        )
    return {**values, **_context_values(dict(given))}
