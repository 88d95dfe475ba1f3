"""What a finished loop returns, and the best-result rule that picks its value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import StateSnapshot
from pydantic import BaseModel, ConfigDict, Field

from langgraph_refine._state import (
    CONVERGED_REASONS,
    Attempt,
    Evaluation,
    RefineState,
    StopReason,
    Usage,
    Verdict,
    revive_state,
)
from langgraph_refine._stop_rules import is_calibrated, stop_reason_of

if TYPE_CHECKING:
    from langgraph_refine._typed import OutputSchema

REVIEWED_REASONS = frozenset({"approved", "edited"})
"""Stops whose value is the reviewer's choice rather than the best attempt."""

RESULT_KEYS = [
    "task",
    "attempts",
    "response",
    "pending",
    "stop_reason",
    "usage",
    "selection",
    "loop_id",
]
"""The state keys `RefineResult.from_state` reads. Without a checkpointer there is no
state to read back, so runs ask `invoke`/`stream` for these channels (`output_keys=`)."""


Rank = tuple[bool, int, float]
"""An attempt's rank (`attempt_rank`): compared as a tuple, higher is better."""

UNRANKED: Rank = (False, -1, -1.0)
"""The rank of an attempt without an evaluation: below every judged one."""


def attempt_rank(attempt: Attempt) -> Rank:
    """How an attempt ranks: a PASS first, then how far it got, then its score.

    How far it got is `Evaluation.reach` (the stage of a staged check that decided it):
    an answer a later stage scored outranks any answer an earlier stage stopped,
    whatever the two scores, and no stage's score is changed to say so. Unjudged last.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> judged = Attempt(index=0, response="a",
        ...                  evaluation=Evaluation(score=0.4, details={"stage": 1, "stages": 2}))
        >>> stopped = Attempt(index=1, response="b",
        ...                   evaluation=Evaluation(score=0.42, details={"stage": 0, "stages": 2}))
        >>> attempt_rank(judged) > attempt_rank(stopped)
        True
    """
    evaluation = attempt.evaluation
    if evaluation is None:
        return UNRANKED
    return (evaluation.verdict == "PASS", evaluation.reach, evaluation.score)


def rank_value(attempt: Attempt) -> float:
    """The attempt's PASS and score as one number: a PASS is 1.0, else the score.

    What the search strategy's statistics average (a move's reward, a state's band);
    which attempt is best is always `attempt_rank`'s decision.
    """
    passed, _, score = attempt_rank(attempt)
    return 1.0 if passed else max(score, 0.0)


def best_feedback(attempts: Sequence[Attempt]) -> str:
    """The feedback on the best attempt so far (what a guided sample is told), or ""."""
    best = best_attempt(attempts)
    return best.evaluation.feedback if best is not None and best.evaluation else ""


def best_attempt(attempts: Sequence[Attempt]) -> Attempt | None:
    """Pick the best evaluated attempt.

    A `"PASS"` verdict outranks any other; then the answer that got further through a
    staged check (`Evaluation.reach`: a `cascade`'s judge over its cheap stages); then
    the higher score; ties go to the earlier attempt, so a later regression (or an equal
    score) never replaces the best (`attempt_rank`).

    Args:
        attempts: Attempts in the order they were generated.

    Returns:
        The best evaluated attempt, or None if none has been evaluated.
    """
    best: Attempt | None = None
    best_rank = UNRANKED  # the best's rank, kept (not recomputed per comparison)
    for attempt in attempts:
        if attempt.evaluation is None:
            continue
        rank = attempt_rank(attempt)
        if best is None or rank > best_rank:
            best, best_rank = attempt, rank
    return best


class RefineResult(BaseModel):
    """The outcome of one refinement loop.

    Attributes:
        value: The best response (or the human-approved / edited one).
        score: The score of the attempt `value` comes from: the best attempt's, or the
            approved or edited one's (an edit is evaluated as an attempt of its own; None
            if nothing was evaluated, or the budget ran out before the edit's evaluation).
        verdict: That attempt's verdict, if its evaluator gave one.
        feedback: That attempt's feedback.
        stop_reason: Why the loop stopped; None for a state that has not stopped (a
            paused review, a custom topology that never decided).
        iterations: Refinement rounds run (number of attempts - 1).
        converged: True when `stop_reason` is passed, target_reached or approved.
        score_history: One score per evaluated attempt, in order.
        attempts: Every attempt, in order.
        usage: Model calls, tokens and seconds spent.
        best_index: The index of the attempt `value` comes from: the best attempt, or the
            approved or edited one (None when there is no such attempt).
        output: With `output_schema`, the best attempt's object: an instance of the
            pydantic model, or the dict for a JSON schema (None when no attempt was a
            valid object, and without `output_schema`). Read from a state without the
            schema (`from_state(state)`), it is the plain JSON value.
        metadata: `iterations`, `converged`, `score_history` and `stop_reason` as plain
            values, for logging and serialisation; with `select="pairwise"`, also
            `selection`: the candidates compared, each comparison (`pair`, both
            `verdicts`, `outcome`: the winner's index or `"tie"`), the `chosen` index,
            the `method` that chose (`"score"` when the budget could not pay) and a `note`.

    `repr()` and `print()` show a short summary: the value's start and length, score,
    verdict, stop reason, iterations, best index and usage; the attempts are in
    `attempts`.
    """

    model_config = ConfigDict(frozen=True)

    value: str
    score: float | None
    verdict: Verdict | None
    feedback: str
    stop_reason: StopReason | None
    iterations: int
    converged: bool
    score_history: list[float]
    attempts: list[Attempt]
    usage: Usage
    best_index: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    output: Any = None

    @classmethod
    def from_node(
        cls, graph: Pregel[Any, Any], config: RunnableConfig, node: str = "refine"
    ) -> RefineResult:
        """The result of the latest run of a refine loop used as node `node` of `graph`.

        The loop's state lives in the parent's checkpointer, under the node's own
        namespace; this finds the latest run of the node on the thread (finished, or
        paused for a review) and reads it back, attempts included.

        Args:
            graph: The compiled parent graph (with its checkpointer).
            config: The parent's run config (its `thread_id`).
            node: The name the loop was added under (`builder.add_node(node, loop)`).

        Raises:
            LookupError: If the node never ran on this thread.

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph.graph import START, StateGraph
            >>> from typing_extensions import TypedDict
            >>> from langgraph_refine import create_refine_graph
            >>> class Report(TypedDict):
            ...     task: str
            ...     response: str
            >>> loop = create_refine_graph(lambda s: "draft", lambda r, s: 1.0).compile()
            >>> parent = StateGraph(Report).add_node("refine", loop).add_edge(START, "refine")
            >>> parent = parent.compile(checkpointer=InMemorySaver())
            >>> config = {"configurable": {"thread_id": "1"}}
            >>> parent.invoke({"task": "Write."}, config)["response"]
            'draft'
            >>> RefineResult.from_node(parent, config).score_history
            [1.0]
        """
        for snapshot in graph.get_state_history(config):
            for task in snapshot.tasks:
                if task.name == node and isinstance(task.state, dict):
                    schema = loop_schema(dict(graph.get_subgraphs()).get(node))
                    return cls.from_state(graph.get_state(task.state), output_schema=schema)
        raise LookupError(_no_run(node, config))

    @classmethod
    async def afrom_node(
        cls, graph: Pregel[Any, Any], config: RunnableConfig, node: str = "refine"
    ) -> RefineResult:
        """Async twin of `from_node` (for async checkpointers)."""
        async for snapshot in graph.aget_state_history(config):
            for task in snapshot.tasks:
                if task.name == node and isinstance(task.state, dict):
                    schema = loop_schema(dict(graph.get_subgraphs()).get(node))
                    values = await graph.aget_state(task.state)
                    return cls.from_state(values, output_schema=schema)
        raise LookupError(_no_run(node, config))

    def __repr__(self) -> str:
        return (
            f"RefineResult(value={_preview(self.value)}, score={_number(self.score)}, "
            f"verdict={self.verdict!r}, stop_reason={self.stop_reason!r}, "
            f"iterations={self.iterations}, best_index={self.best_index}, "
            f"usage={_usage_summary(self.usage)})"
        )

    def __str__(self) -> str:
        return repr(self)

    @classmethod
    def from_state(
        cls,
        state: RefineState | dict[str, Any] | StateSnapshot,
        *,
        output_schema: OutputSchema | None = None,
    ) -> RefineResult:
        """Build the result from a loop's state (final or, for budget errors, current).

        Raises:
            ValueError: If `state` has loop keys but no `attempts`: a checkpoint's raw
                values (the attempts are stored as per-step writes; read the thread with
                `graph.get_state(config)`) or a graph's output.

        Args:
            state: The state's values, or a thread's `StateSnapshot`
                (`graph.get_state(config)`): a snapshot of a paused thread (a pending
                review) gives `stop_reason=None`, since the loop has not stopped yet.
            output_schema: The loop's `output_schema` (as an `OutputSchema`), to give
                `output` as the caller's type; without it `output` is plain JSON.
        """
        paused = False
        if isinstance(state, StateSnapshot):
            paused = bool(state.next)
            state = state.values
        if "attempts" not in state and {"task", "response", "stop_reason"} & state.keys():
            # A checkpoint's raw values: `attempts` is stored as per-step writes, not as a
            # value, so reading it here would give an empty history.
            raise ValueError(
                "this state holds no 'attempts' (a checkpoint's raw channel values, or a "
                "graph's output): pass graph.get_state(config) or its .values instead, or "
                "RefineResult.from_node(parent, config) for a loop that ran as a node"
            )
        state = revive_state(state)  # type: ignore[assignment]
        attempts = list(state.get("attempts") or [])
        pending = state.get("pending")
        usage = state.get("usage") or Usage()
        if pending is not None and all(a.index != pending.index for a in attempts):
            # Generated but not evaluated: its generation is not in the total yet.
            attempts.append(pending)
            usage = usage + pending.usage
        selection = state.get("selection")
        # A pairwise selection's choice is the result (see `_select`); else the best-result rule.
        best = _selected(attempts, selection) or best_attempt(attempts)
        stop_reason = None if paused else stop_reason_of(state)
        value = state.get("response")
        chosen = best
        if stop_reason in REVIEWED_REASONS and value is not None:
            # The reviewer's choice: the attempt that holds the text (an edit is an attempt
            # of its own). Its evaluation is the result's, or none if it never had one.
            chosen = next((a for a in reversed(attempts) if a.response == value), None)
        else:
            # Every other stop returns the best evaluated attempt (the contract's rule).
            value = (
                best.response if best is not None else (attempts[-1].response if attempts else "")
            )
        output = _output(attempts, best, value, stop_reason, output_schema)
        evaluation = chosen.evaluation if chosen is not None else None
        score_history = [a.evaluation.score for a in attempts if a.evaluation is not None]
        iterations = max(len(attempts) - 1, 0)
        converged = stop_reason in CONVERGED_REASONS
        metadata: dict[str, Any] = {
            "iterations": iterations,
            "converged": converged,
            "score_history": score_history,
            "stop_reason": stop_reason,
        }
        if selection:
            metadata["selection"] = selection
        metadata.update(calibration_notes(attempts, evaluation))
        return cls(
            value=value,
            score=evaluation.score if evaluation else None,
            verdict=evaluation.verdict if evaluation else None,
            feedback=evaluation.feedback if evaluation else "",
            stop_reason=stop_reason,
            iterations=iterations,
            converged=converged,
            score_history=score_history,
            attempts=attempts,
            usage=usage,
            best_index=chosen.index if chosen is not None else None,
            output=output_schema.typed(output) if output_schema is not None else output,
            metadata=metadata,
        )


def calibration_notes(attempts: Sequence[Attempt], chosen: Evaluation | None) -> dict[str, Any]:
    """What a result says about its judge's calibration (nothing for an uncalibrated run).

    `calibration`: the calibrated judge's summary (`n`, `kappa`, `alpha`, `threshold`,
    `bound`, `met`), from the result's evaluation or else the latest calibrated one.
    `untrusted_pass`: with `require_calibration`, the attempts whose PASS (or target
    score) did not stop the loop because it was not calibrated.
    """
    notes: dict[str, Any] = {}
    judged = [a.evaluation for a in attempts if a.evaluation is not None]
    calibrated = [
        e for e in ([chosen] if chosen is not None else []) + judged[::-1] if is_calibrated(e)
    ]
    if calibrated:
        notes["calibration"] = dict(calibrated[0].details["calibration"])
    refused = [
        {"attempt": a.index, "stop": a.evaluation.details["untrusted_stop"]}
        for a in attempts
        if a.evaluation is not None and a.evaluation.details.get("untrusted_stop")
    ]
    if refused:
        notes["untrusted_pass"] = refused
    return notes


def _selected(attempts: Sequence[Attempt], selection: Any) -> Attempt | None:
    """The attempt a pairwise selection chose, if the state holds one."""
    chosen = selection.get("chosen") if isinstance(selection, dict) else None
    return next((a for a in attempts if a.index == chosen and a.evaluation is not None), None)


def _output(
    attempts: Sequence[Attempt],
    best: Attempt | None,
    value: str,
    stop_reason: str | None,
    schema: OutputSchema | None,
) -> Any:
    """The plain object of the result's value: the best attempt's, or the reviewed one's."""
    if stop_reason not in ("approved", "edited"):
        return best.output if best is not None else None
    # A reviewer approved an attempt, or wrote the response: the object of that text.
    reviewed = next((a for a in reversed(attempts) if a.response == value), None)
    if reviewed is not None and reviewed.output is not None:
        return reviewed.output
    return schema.read(value).output if schema is not None else None


PREVIEW_CHARS = 60
"""How much of `value` a result's repr shows."""


def _preview(text: str) -> str:
    if len(text) <= PREVIEW_CHARS:
        return repr(text)
    return f"{text[:PREVIEW_CHARS].rstrip()!r}... ({len(text)} chars)"


def _number(value: float | None) -> str:
    return "None" if value is None else f"{value:.3g}"


def _usage_summary(usage: Usage) -> str:
    parts = [f"{usage.calls} calls", f"{usage.total_tokens} tokens", f"{usage.seconds:.1f} s"]
    if usage.cost is None:
        parts.append("cost unknown")
    elif usage.cost:
        parts.append(f"${usage.cost:.4g}")
    return repr(", ".join(parts))


def loop_schema(loop: Any) -> OutputSchema | None:
    """The `output_schema` a compiled refine loop was built with, so its result is typed.

    Read from the loop itself (its finalize step holds the loop's options), so the
    schema is coerced once, by the options, and every reader of a result shares it.
    None when `loop` is no graph built by `create_refine_graph`, or is untyped.
    """
    spec = getattr(getattr(loop, "builder", None), "nodes", {}).get("finalize")
    runnable = getattr(spec, "runnable", None)
    finalize = getattr(runnable, "step", runnable)  # as added, or inside `Inline`
    schema = getattr(getattr(finalize, "options", None), "output_schema", None)
    return schema if hasattr(schema, "typed") else None


def _no_run(node: str, config: RunnableConfig) -> str:
    thread = (config.get("configurable") or {}).get("thread_id")
    return (
        f"no run of node {node!r} on thread {thread!r}: pass the name the refine loop was "
        "added under (builder.add_node(name, loop)) and a thread it ran on"
    )
