"""The loop's state: the pydantic models stored in it, the state schemas and their reducers."""

from __future__ import annotations

import functools
import importlib.metadata
import math
import os
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Self, TypeAlias, TypeVar

from langchain_core.messages import AnyMessage
from langgraph.channels import BinaryOperatorAggregate
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    field_validator,
    model_validator,
)
from typing_extensions import TypedDict

Verdict: TypeAlias = Literal["PASS", "NEEDS_IMPROVEMENT", "FAIL"]
"""The three verdicts an evaluator may give."""

StopReason: TypeAlias = Literal[
    "passed",
    "target_reached",
    "max_iterations",
    "plateau",
    "budget_exhausted",
    "approved",
    "edited",
    "rejected",
    "model_error",
    "unjudged",
    "interrupted",
]
"""Why a loop stopped. `model_error`: in an agent, a model call failed and a middleware
around `RefineMiddleware` answered with a message instead (`ModelRetryMiddleware` with
`on_failure="continue"`); the loop ends with its best answer. `unjudged`: two attempts in
a row were left unjudged (the evaluator could not judge them: unreadable replies, a
persistent transport failure); the loop ends with its best judged attempt, else the last.
`interrupted`: the run was stopped from outside before it ended (Ctrl-C or SIGTERM on the
command line), which reports its best result so far with this reason."""

Strategy: TypeAlias = Literal["chain", "explore", "sample"]
"""How each round after the first chooses what to generate (see `_strategy`)."""

MoveKind: TypeAlias = Literal["sample", "refine", "revise", "guided", "edit"]
"""The kind of move that produced an attempt (`Attempt.move`, see `_strategy`):
`"sample"` a fresh answer to the task alone (attempt 0 included), `"refine"` a
refinement of an earlier attempt chosen by the strategy, `"revise"` a refinement a
human reviewer asked for, `"guided"` a fresh answer told what earlier feedback asked
for (without the earlier attempt), `"edit"` a reviewer's own text (evaluated like any
attempt, and never counted in the strategy record)."""

PanelRule: TypeAlias = Literal["mean", "majority", "min"]
"""How a panel of evaluators decides (`evaluators.panel`): the mean score (combine's verdict
rule), a majority of verdicts, or the strictest member (lowest score, worst verdict)."""

PromptForm: TypeAlias = Literal["messages", "single"]
"""How a refinement round is put to a chat model: a multi-turn conversation
(`"messages"`) or one user message (`"single"`)."""

CONVERGED_REASONS: frozenset[str] = frozenset({"passed", "target_reached", "approved"})

Select: TypeAlias = Literal["score", "pairwise"]
"""How the result is chosen when the loop stops: the best score, or pairwise comparison."""

Preference: TypeAlias = Literal["first", "second", "tie"]
"""A comparer's answer: the first response is better, the second, or neither."""

DEFAULT_SELECT_TOP = 3
"""Attempts compared at most (chosen by `make bench BENCH=selection`)."""

DEFAULT_SELECT_MARGIN = 0.3
"""Score distance from the best within which attempts are compared (chosen by the bench)."""

ComparerLike: TypeAlias = Any
"""A chat model, a model string, or a callable `(task, first, second) -> "first" | "second" |
"tie"`."""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def whole_text(text: str) -> str:
    """`text` as a plain string that can be written as UTF-8: lone surrogates become U+FFFD.

    A provider's JSON may hold an escaped lone surrogate (an escaped `ud800`, say): valid JSON,
    but text no checkpoint, file or validator takes. Nothing else is changed.

    Example:
        >>> whole_text("a" + chr(0xD800) + "b") == "a" + chr(0xFFFD) + "b"
        True
    """
    text = str(text)  # a str subclass (a message's text accessor) becomes a plain str
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


class Evaluation(BaseModel):
    """An evaluator's judgement of one response.

    Attributes:
        score: Quality in [0, 1]; higher is better.
        feedback: What to change, addressed to the generator.
        verdict: Optional categorical verdict; `"PASS"` stops the loop.
        details: Evaluator-specific extras (per-part scores, raw judge reply, ...).
    """

    model_config = ConfigDict(frozen=True)

    score: float
    feedback: str = ""
    verdict: Verdict | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("feedback")
    @classmethod
    def _whole_feedback(cls, value: str) -> str:
        return whole_text(value)  # a judge's reply is provider text too

    @field_validator("score")
    @classmethod
    def _score_in_unit_interval(cls, value: float) -> float:
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise ValueError(
                f"score must be a number in [0, 1], got {value!r}; "
                "normalise your evaluator's scale (e.g. divide a 0-10 score by 10)"
            )
        return float(value)

    @property
    def reach(self) -> int:
        """How far the response got through staged checks: the stage that decided it.

        An `evaluators.cascade` evaluation's `details["stage"]` (0 for one its first
        stage stopped, the last stage's index for one the last stage judged); 0 for an
        evaluator of one stage. The best-attempt rule ranks by it before the score, so
        an answer a later stage scored outranks any an earlier stage stopped.

        Example:
            >>> Evaluation(score=0.4, details={"stage": 1, "stages": 2}).reach
            1
            >>> Evaluation(score=0.4).reach
            0
        """
        stage = self.details.get("stage")
        if "stages" not in self.details or not isinstance(stage, int) or isinstance(stage, bool):
            return 0
        return stage


@dataclass(frozen=True)
class NoJudgment:
    """A response the evaluator could not judge, and why (see `Unjudged`).

    What `judge_once` gives in place of an `Evaluation` when `unjudged_reason` says the
    error means "no judgment", not "a bug"; the loop keeps the attempt unjudged.
    """

    reason: str
    cause: BaseException | None = None


Judgment: TypeAlias = "Evaluation | NoJudgment"
"""One response's judgment, or why none was made."""


class Usage(BaseModel):
    """Model calls and tokens spent, and seconds spent in model-calling nodes.

    Attributes:
        calls: Model calls made (generator invocations and LLM-judge calls).
        input_tokens: Prompt tokens reported by the models' usage metadata.
        output_tokens: Completion tokens reported by the models' usage metadata.
        total_tokens: Sum of input and output tokens.
        seconds: Wall time spent inside the generate and evaluate steps.
        cost: US dollars spent, priced per call from its tokens and the model's price;
            None once a call's price is unknown (see `Budget(prices=...)`).
        cache_hits: Replies a model cache answered (LangChain's `BaseCache`): no call
            was made, so they add no calls, tokens or cost, and no budget counts them.
    """

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    seconds: float = 0.0
    cost: float | None = 0.0
    cache_hits: int = 0

    def __add__(self, other: Usage) -> Usage:
        # An unknown cost stays unknown: a total that left it out would read as complete.
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Usage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            seconds=self.seconds + other.seconds,
            cost=cost,
            cache_hits=self.cache_hits + other.cache_hits,
        )


class Candidate(BaseModel):
    """One of several responses sampled in the same round (`candidates > 1`).

    Attributes:
        response: The sampled text.
        evaluation: Its evaluation, or None if the budget ran out first.
        output: With `output_schema`, the validated object as plain JSON (None if invalid).
        reasoning: Reasoning the model gave beside its answer, if any.
        edits: The edit blocks applied to make it; None when written whole.
    """

    model_config = ConfigDict(frozen=True)

    response: str
    evaluation: Evaluation | None = None
    output: JsonValue = None
    reasoning: str | None = None
    edits: int | None = None


class Attempt(BaseModel):
    """One generated response and, once evaluated, its evaluation.

    Attributes:
        index: Position in the loop, counting from 0 (0 is the first generation).
        response: The generated text; with `output_schema`, the object as JSON text (or
            the raw reply, when it was not a valid object).
        evaluation: The evaluation, or None if the loop stopped before evaluating it.
        instruction: Reviewer feedback this attempt was asked to address, if any.
        parent: The index of the attempt this one refined; None for a fresh sample
            (attempt 0 included).
        move: The kind of move that produced it: `"sample"`, `"refine"`, `"revise"`,
            `"guided"` or `"edit"` (see `MoveKind`). Left out (as in checkpoints written
            before the field existed), it is read from `parent`: `"sample"` without one,
            else `"refine"`.
        usage: Model usage spent producing and evaluating this attempt.
        candidates: With `candidates > 1`, every response sampled in this round; the
            attempt's own `response` and `evaluation` are the best of them.
        output: With `output_schema`, the validated object as a plain JSON value (dicts,
            lists, strings, numbers), so checkpoints stay serialisable without pickle;
            None when the reply was not a valid object (or without `output_schema`).
        reasoning: Reasoning the model gave beside its answer (`<think>` blocks, a
            provider's `reasoning_content`, reasoning content blocks), kept apart: never
            part of `response`, never shown to evaluators or in refinement prompts.
        model: The generator that wrote it, as LangChain reports its model
            (`provider:model`), else the class or function name; with a ladder of
            models, the rung's. None for a reviewer's edit (and attempts stored before
            the field existed).
        rung: With a ladder of models (`generator=[cheap, ..., strong]`), the index of
            the rung that wrote it; None without a ladder.
        edits: With `edits=`, the number of SEARCH/REPLACE blocks applied to the parent's
            text to make `response` (the whole edited text); 0 when the reply's blocks
            did not all apply (`response` is then the parent's text, evaluated FAIL);
            None for an attempt written whole.
        error: Why the attempt is unjudged, when its evaluator could not judge it (an
            LLM judge's replies unreadable, its model's call failing after the retries):
            `evaluation` is then None. Never shown to the generator; None otherwise.
    """

    model_config = ConfigDict(frozen=True)

    index: int
    response: str
    evaluation: Evaluation | None = None
    instruction: str | None = None
    parent: int | None = None
    move: MoveKind | None = None
    usage: Usage = Field(default_factory=Usage)
    candidates: list[Candidate] = Field(default_factory=list)
    output: JsonValue = None
    reasoning: str | None = None
    model: str | None = None
    rung: int | None = None
    edits: int | None = None
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _move_from_parent(cls, data: Any) -> Any:
        # Attempts stored before `move` existed (and ones built without it) read as the
        # move their parent link implies.
        if isinstance(data, Mapping) and data.get("move") is None:
            return {**data, "move": "sample" if data.get("parent") is None else "refine"}
        return data

    @property
    def score(self) -> float | None:
        """The evaluation's score, or None if not evaluated."""
        return self.evaluation.score if self.evaluation is not None else None


def _as_attempt(value: Any) -> Attempt:
    # Updates sent as JSON, and writes replayed by some savers (LangGraph Server's own
    # serializer), arrive as plain dicts; a node's own writes come back as their models.
    known = _known(value, Attempt)
    return known if known is not None else Attempt.model_validate(value)


def merge_attempts(left: list[Attempt] | None, right: Attempt | Sequence[Attempt]) -> list[Attempt]:
    """Reducer for `attempts`: append new attempts, replacing any with the same index.

    Replacing by index keeps the history free of duplicates when a step is replayed
    after a crash or a retry.
    """
    merged = list(left or [])
    if merged and not (isinstance(merged[0], Attempt) and isinstance(merged[-1], Attempt)):
        merged = [_as_attempt(a) for a in merged]  # revived from a saver as dicts
    # Nodes write attempts as plain data (see `plain_writes`); the channel holds models.
    new = [_as_attempt(a) for a in ([right] if isinstance(right, Attempt | Mapping) else right)]
    # The common case, once per round: one attempt after the last one.
    if len(new) == 1 and (not merged or new[0].index > merged[-1].index):
        merged.append(new[0])
        return merged
    positions = {attempt.index: i for i, attempt in enumerate(merged)}
    for attempt in new:
        if attempt.index in positions:
            merged[positions[attempt.index]] = attempt
        else:
            positions[attempt.index] = len(merged)
            merged.append(attempt)
    return merged


def merge_attempt_batches(
    left: list[Attempt] | None, writes: Sequence[Attempt | Sequence[Attempt]]
) -> list[Attempt]:
    """Batch form of `merge_attempts`: apply several writes to `attempts` in order.

    A fold of `merge_attempts`, so applying two batches one after the other gives the
    same list as applying them together (what a delta channel's replay relies on).
    """
    new = [
        a for write in writes for a in ([write] if isinstance(write, Attempt | Mapping) else write)
    ]
    return merge_attempts(left, new)


def _attempts_channel() -> Any:
    """The channel annotation of `attempts`: a delta channel when LangGraph can undo it.

    With a plain reducer every checkpoint re-serialises the whole history, so stored
    bytes grow with the square of the rounds. LangGraph's `DeltaChannel` (beta) stores
    only each step's new attempts and rebuilds the list from them, keeping storage per
    round flat. With `LANGGRAPH_REFINE_DELTA_CHANNEL=0`, or on a LangGraph older than
    `ATTEMPTS_CHANNEL_MIN_LANGGRAPH`, the plain reducer is used; both designs hold the
    same values, and each reads a thread the other wrote (see docs/checkpointing.md).
    """
    if os.environ.get("LANGGRAPH_REFINE_DELTA_CHANNEL", "1").strip().lower() in _OFF:
        return merge_attempts
    # A delta-written thread keeps `attempts` only as per-step writes, with no value in
    # its latest checkpoint. LangGraph before 1.2.16 replays those writes only into a
    # field that is still a DeltaChannel: read with the plain reducer (the switch
    # flipped), the history loads as [] and the loop silently starts over. From 1.2.16
    # either design reads either shape, so only there is the delta design safe to write.
    try:
        found = importlib.metadata.version("langgraph")
    except importlib.metadata.PackageNotFoundError:  # unknown version: the safe design
        return merge_attempts
    if _release(found) < _release(ATTEMPTS_CHANNEL_MIN_LANGGRAPH):
        return merge_attempts
    try:
        from langgraph.channels import DeltaChannel
    except ImportError:  # LangGraph without DeltaChannel: the plain reducer
        return merge_attempts
    try:
        return DeltaChannel(merge_attempt_batches)
    except TypeError:  # a DeltaChannel with another signature: the plain reducer
        return merge_attempts


def _release(version: str) -> tuple[int, ...]:
    # "1.2.16", "1.2.16rc1", "1.3.0.dev2" -> (1, 2, 16), (1, 2, 16), (1, 3, 0)
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


_OFF = frozenset({"0", "false", "no", "off"})
ATTEMPTS_CHANNEL_MIN_LANGGRAPH = "1.2.16"
"""The first LangGraph that reads a delta-written `attempts` back with the plain reducer."""
ATTEMPTS_CHANNEL: Any = _attempts_channel()
"""The `attempts` channel annotation chosen at import (a `DeltaChannel` or `merge_attempts`)."""
ATTEMPTS_CHANNEL_DESIGN = "delta" if ATTEMPTS_CHANNEL is not merge_attempts else "reducer"
"""`"delta"` when `attempts` is a `DeltaChannel`, `"reducer"` for the plain reducer."""


class PlainDataChannel(BinaryOperatorAggregate[Any]):
    """A reducer channel that holds the state's models in memory and plain data on disk.

    LangGraph's checkpoint serializer stores a pydantic model with its class name and
    revives it by name on load, which it logs as "Deserializing unregistered type" (and
    will block in a future release) unless the saver's allowlist names the class. A
    user's own saver cannot be given that list in LangGraph's default (non-strict) mode,
    so the loop's models never reach the serializer: this channel checkpoints its value
    as plain data and turns it back into models on load, and nodes write plain data
    (`plain_writes`). The conversion follows the annotated type, so every field of the
    models, present and future, goes through it.

    Args:
        typ: The value's type (`Usage`, `list[Attempt]`, `Attempt | None`).
        operator: The reducer; it receives models or plain data and returns models.
    """

    __slots__ = ()

    def update(self, values: Sequence[Any]) -> bool:
        """Apply the writes with the reducer; the value is revived as models."""
        changed = super().update(values)
        if changed and self.is_available():
            self.value = _revive(self.typ, self.value)
        return changed

    def checkpoint(self) -> Any:
        """The value as plain data (dicts, lists, strings, numbers)."""
        if not self.is_available():
            return super().checkpoint()
        return _adapter(self.typ).dump_python(self.value)

    def from_checkpoint(self, checkpoint: Any) -> Self:
        """A channel holding the checkpointed value, revived as models."""
        channel = super().from_checkpoint(checkpoint)
        if channel.is_available():
            channel.value = _adapter(self.typ).validate_python(channel.value)
        return channel


@functools.cache
def _adapter(typ: Any) -> TypeAdapter[Any]:
    return TypeAdapter(typ)


def _revive(typ: Any, value: Any) -> Any:
    """A channel's value as `typ`'s models: models (or a node's dumps of them) kept as they are.

    Validation would rebuild each model from its dict; a model, or a dict a node just
    dumped from one (`dumped`), is taken as it is. Anything else is validated.
    """
    shape = _shape(typ)
    if shape is not None:
        model, many = shape
        if not many:
            known = _known(value, model)
            if known is not None:
                return known
        elif isinstance(value, list):
            items = [_known(item, model) for item in value]
            if all(item is not None for item in items):
                return items
    return _adapter(typ).validate_python(value)


@functools.cache
def _shape(typ: Any) -> tuple[type[BaseModel], bool] | None:
    """`(Model, False)` for `Model` or `Model | None`, `(Model, True)` for `list[Model]`."""
    if isinstance(typ, type) and issubclass(typ, BaseModel):
        return typ, False
    args = typing.get_args(typ)
    if typing.get_origin(typ) is list and len(args) == 1:
        inner = _shape(args[0])
        return (inner[0], True) if inner is not None and not inner[1] else None
    models = [a for a in args if a is not type(None)]
    if len(models) == 1 and len(args) == 2 and isinstance(models[0], type):
        return _shape(models[0])
    return None


class Dump(dict[str, Any]):
    """A model's dump that keeps the model it was made from (`model`).

    To every serializer it is a plain dict (msgpack and JSON write it as a map, and read
    it back as a plain dict), so a node's writes and the checkpoints stay plain data. A
    channel handed this very object in the process that made it takes `model` instead
    of validating the dict again (`_known`); a replayed write, a checkpoint or a
    caller's dict is a plain dict again and is validated.
    """

    __slots__ = ("model",)

    model: BaseModel

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled or deep-copied, a dump leaves as the plain dict (never with its model).
        return (dict, (dict(self),))


def dumped(model: BaseModel) -> Dump:
    """`model.model_dump()` as a `Dump`, so that the channel receiving it takes the model back.

    A node's writes must be plain data (they are checkpointed as written), and a channel
    turns them back into models: validating a dict the node just dumped would rebuild the
    very model it came from. The dump carries its model, so nothing outside it is kept.
    """
    data = Dump(model.model_dump())
    data.model = model
    return data


M = TypeVar("M", bound=BaseModel)


def _known(value: Any, model: type[M]) -> M | None:
    """`value` as a `model` without validation: itself, or the model its `Dump` carries."""
    if type(value) is Dump:  # checked first: a node's own write is the common case
        value = value.model
    return value if isinstance(value, model) else None


STATE_MODEL_KEYS = ("attempts", "pending", "usage")
"""The state keys whose values are the loop's models."""


def plain_writes(update: dict[str, Any]) -> dict[str, Any]:
    """A node's state update with the loop's models as plain data.

    A node's writes are checkpointed as they are, before any channel sees them, so nodes
    write plain data and the channels (`PlainDataChannel`, the `attempts` reducers)
    turn it back into models.
    """
    return {
        key: v if v is None or key not in STATE_MODEL_KEYS else to_plain(v)
        for key, v in update.items()
    }


def to_plain(value: Any) -> Any:
    """A model, or a list or `Overwrite` of models, as plain data; anything else unchanged."""
    if isinstance(value, BaseModel):
        return dumped(value)
    if isinstance(value, Overwrite):
        return Overwrite(to_plain(value.value))
    if isinstance(value, list | tuple):
        return [dumped(item) if isinstance(item, BaseModel) else to_plain(item) for item in value]
    return value


def keep_latest(left: Any, right: Any) -> Any:
    """Reducer of `pending`: the latest write wins."""
    return right


def add_usage(left: Usage | None, right: Usage) -> Usage:
    """Reducer for `usage`: nodes write what they spent; the channel holds the total."""
    return _as_usage(left) + _as_usage(right)


def _as_usage(value: Any) -> Usage:
    if value is None:
        return Usage()
    known = _known(value, Usage)
    return known if known is not None else Usage.model_validate(value)


def revive_state(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The state with `attempts`, `pending` and `usage` as models, whatever the saver returned.

    A saver whose serializer does not revive pydantic models (LangGraph Server's, or
    strict msgpack without the graph's allowlist) hands the nodes plain dicts.
    """
    fixes: dict[str, Any] = {}
    attempts = state.get("attempts")
    # A saver revives all or none, and the reducer converts every element it merges:
    # the two ends tell (checking every element would cost a pass per step).
    if attempts and not (isinstance(attempts[0], Attempt) and isinstance(attempts[-1], Attempt)):
        fixes["attempts"] = [_as_attempt(a) for a in attempts]
    pending = state.get("pending")
    if pending is not None and not isinstance(pending, Attempt):
        fixes["pending"] = _as_attempt(pending)
    usage = state.get("usage")
    if usage is not None and not isinstance(usage, Usage):
        fixes["usage"] = _as_usage(usage)
    return {**state, **fixes} if fixes else state


# The delta channel stores only the writes (plain data) and holds models; the plain
# reducer's value is checkpointed whole, so it goes through `PlainDataChannel`.
_ATTEMPTS_ANNOTATION: Any = (
    PlainDataChannel(list[Attempt], merge_attempts)
    if ATTEMPTS_CHANNEL is merge_attempts
    else ATTEMPTS_CHANNEL
)


class RefineInput(TypedDict):
    """What the loop reads from its caller: a `task`, or `messages` ending in a human message."""

    task: NotRequired[str]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    criteria: NotRequired[str | list[str] | None]


class RefineOutput(TypedDict):
    """What the loop writes back to its caller (and to a parent graph)."""

    response: str
    output: NotRequired[JsonValue]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]


class RefineState(TypedDict):
    """The loop's full state.

    Attributes:
        task: What the generator is asked to do.
        attempts: Every generated attempt, in order, with its evaluation.
        response: The best (or human-approved) response, set when the loop stops.
        output: With `output_schema`, the best response's object as plain JSON, set
            when the loop stops.
        messages: Conversation of a `MessagesState` parent; the task is taken from
            its last human message when no `task` is given.
        pending: The attempt generated but not yet evaluated.
        stop_reason: Why the loop stops; set by the step that decides it.
        reviewer_feedback: Feedback from a human `"revise"` action for the next generation.
        refine_from: The attempt the next round refines; None for a fresh sample.
        next_move: The kind of move the next round makes (the strategy's choice); a
            state without it reads the move from `refine_from`.
        rung: With a ladder of models, the rung that writes the next attempt (see
            `_ladder`); None or missing: the first.
        usage: Model calls, tokens and seconds spent so far.
        from_messages: True when the task came from `messages` (the answer goes back there).
        loop_id: Identifies this run of the loop (set by `prepare`); its key in the
            strategy record, so a resumed run updates its own counts.
        selection: With `select="pairwise"`, the record of the final choice (the
            comparisons made and the chosen attempt's index), set when the loop stops.
        criteria: What this request must satisfy (a string or a list of strings), added
            to the criteria of every LLM judge of the run.

    A state schema may add the keys of `ServedKeys` (the served graphs' does): the loop
    then writes them too. Each key is a channel LangGraph reads at every step, so the
    library's own state keeps only what its nodes need.
    """

    task: str
    attempts: Annotated[list[Attempt], _ATTEMPTS_ANNOTATION]
    response: NotRequired[str]
    output: NotRequired[JsonValue]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    pending: NotRequired[Annotated[Attempt | None, PlainDataChannel(Attempt | None, keep_latest)]]
    stop_reason: NotRequired[StopReason | None]
    reviewer_feedback: NotRequired[str | None]
    refine_from: NotRequired[int | None]
    next_move: NotRequired[MoveKind | None]
    rung: NotRequired[int | None]
    usage: NotRequired[Annotated[Usage, PlainDataChannel(Usage, add_usage)]]
    from_messages: NotRequired[bool]
    loop_id: NotRequired[str | None]
    criteria: NotRequired[str | list[str] | None]
    selection: NotRequired[dict[str, Any] | None]


StateT = TypeVar("StateT", bound=RefineState)
"""A node's state type: `RefineState` or a user's extension of it."""


class ServedKeys(TypedDict):
    """State keys the loop writes when its state schema has them (the served graphs' does).

    Attributes:
        score: The result's score (None when it was not judged), set when the loop stops.
        verdict: The result's verdict, if its evaluator gave one, set when the loop stops.
        input_options: Options this run's input gave, keyed as in a run's context (a state
            whose schema has run-context keys beside `task`); `prepare` sets it for every
            run, and the nodes apply it like the run's context.
        ended_in: The run that decided the loop's end (the evaluate step that stopped
            it, or the review that answered last); another run reaching the end answers
            again (`_end.regenerates`: a chat's Refresh).
    """

    score: NotRequired[float | None]
    verdict: NotRequired[Verdict | None]
    input_options: NotRequired[dict[str, Any] | None]
    ended_in: NotRequired[str | None]
