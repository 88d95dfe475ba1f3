"""The typed shapes of what a loop hands out: its stream events and its review payload.

`stream_mode="custom"` yields a `RoundEvent` per evaluated attempt and a `StopEvent` at the
end (from the graph and from `RefineMiddleware` alike); a human review pauses with a
`ReviewPayload` as the interrupt's value; `RefineMiddleware(progress_ui=...)` shows a
`ProgressCard` in a chat (a LangGraph generative-UI message). They are plain dicts at run
time (JSON-ready, as LangGraph Server sends them); these types let editors and type
checkers read them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired

from typing_extensions import TypedDict

from langgraph_refine._state import Attempt, MoveKind, StopReason, Verdict
from langgraph_refine._typed import plain

if TYPE_CHECKING:
    from langgraph_refine._result import RefineResult


class RoundEvent(TypedDict):
    """One evaluated attempt (`stream_mode="custom"`).

    Attributes:
        type: Always `"round"`.
        name: The loop's name (tells loops apart in a parent graph).
        iteration: The attempt's index (0 is the first generation).
        parent: The attempt it refined; None for a fresh sample.
        move: The kind of move that produced it (`"sample"`, `"refine"`, ...).
        score: Its score, in [0, 1]; None when the evaluator could not judge it.
        verdict: Its verdict, if the evaluator gave one.
        feedback: The evaluator's feedback ("" when unjudged).
        error: Why it is unjudged (`Attempt.error`); None when judged.
        best_score: The best score so far, this attempt included.
        response: The attempt's text.
        output: With `output_schema`, its object as plain JSON.
        reasoning: Reasoning the model emitted beside the answer, if any.
        edits: The edit blocks applied to make it (0: they did not apply); None when
            written whole (see `create_refine_graph(edits=...)`).
        model: The model that wrote it (`Attempt.model`); None for a reviewer's edit.
        rung: With a ladder of models, the index of the rung that wrote it; else None.
        stopped_at: With a cascade, the stage that stopped it (absent otherwise).
    """

    type: Literal["round"]
    name: str
    iteration: int
    parent: int | None
    move: MoveKind | None
    score: float | None
    verdict: Verdict | None
    feedback: str
    error: str | None
    best_score: float | None
    response: str
    output: Any
    reasoning: str | None
    edits: int | None
    model: str | None
    rung: int | None
    stopped_at: NotRequired[str]


class StopEvent(TypedDict):
    """The loop's end (`stream_mode="custom"`).

    Attributes:
        type: Always `"stop"`.
        name: The loop's name.
        stop_reason: Why it stopped.
        score: The result's score (see `RefineResult.score`).
        iterations: Refinement rounds run.
        response: The result's value.
        output: With `output_schema`, the result's object as plain JSON.
        calibration: With a calibrated judge, its summary (`n`, `kappa`, `alpha`,
            `threshold`, `bound`, `met`; see `evaluators.calibrate`).
        untrusted_pass: With `require_calibration`, the attempts whose uncalibrated
            PASS (or target score) did not stop the loop.
    """

    type: Literal["stop"]
    name: str
    stop_reason: StopReason | None
    score: float | None
    iterations: int
    response: str
    output: Any
    calibration: NotRequired[dict[str, Any]]
    untrusted_pass: NotRequired[list[dict[str, Any]]]


class ReviewActionRequest(TypedDict):
    """The reviewed answer as a LangChain human-in-the-loop action (`ActionRequest`).

    Attributes:
        name: The loop's name.
        args: `{"response": ...}`: the answer under review, the one thing a reviewer
            may edit.
        description: The attempt, its score, verdict and feedback, and what each
            decision does, in plain words.
    """

    name: str
    args: dict[str, Any]
    description: str


class ReviewDecisions(TypedDict):
    """The decisions a chat client may send (LangChain's `ReviewConfig`).

    Attributes:
        action_name: The action's name (the loop's).
        allowed_decisions: `["approve", "edit", "reject"]`.
    """

    action_name: str
    allowed_decisions: list[str]


class ReviewPayload(TypedDict):
    """What a human review shows (the interrupt's value); answer with `Command(resume=...)`.

    Attributes:
        type: Always `"review"`.
        name: The loop's name.
        mode: `"final"` or `"every_round"`.
        task: The task.
        response: The reviewed response (the best one in `"final"` mode, the latest in
            `"every_round"` mode).
        score: Its score.
        verdict: Its verdict.
        feedback: Its feedback.
        iteration: The latest attempt's index.
        attempt: The reviewed attempt's index: the best, the latest (every round), or
            after a reviewer's request the revision (see `_reviewed.reviewed`).
        best_attempt: The best attempt's index, shown beside the reviewed one.
        best_score: The best score so far.
        stop_reason: Why the loop would stop (None mid-loop in `"every_round"` mode).
        actions: The answers accepted here (`"approve"`, `"edit"`, ...).
        action_requests: The same review as a LangChain human-in-the-loop request
            (`HumanInTheLoopMiddleware`'s `HITLRequest`), which chat clients render: one
            action, the reviewed answer in its `args`.
        review_configs: Its decisions: answer with `{"decisions": [{"type": ...}]}`.
        error: Only after a malformed answer: what was wrong with it.
    """

    type: Literal["review"]
    name: str
    mode: Literal["final", "every_round"]
    task: str
    response: str
    score: float | None
    verdict: Verdict | None
    feedback: str
    iteration: int
    attempt: int | None
    best_attempt: int | None
    best_score: float | None
    stop_reason: StopReason | None
    actions: list[str]
    action_requests: list[ReviewActionRequest]
    review_configs: list[ReviewDecisions]
    error: NotRequired[str]


class ProgressRound(TypedDict):
    """One evaluated answer on the progress card.

    Attributes:
        round: The answer's round, counted from 1 (the attempt's index + 1).
        score: Its score; None when the evaluator could not judge it.
        verdict: Its verdict, if the evaluator gave one.
        next: What the loop did next, in words (`"refining"`, `"passed"`, ...).
        line: The round in one line: `"round 2: score 0.6, refining"`.
    """

    round: int
    score: float | None
    verdict: Verdict | None
    next: str
    line: str


class ProgressCard(TypedDict):
    """The props of the progress card `RefineMiddleware(progress_ui=...)` shows in a chat.

    One card per run of the loop, updated in place after each round and at the end (a
    LangGraph UI message, the same id each time, in the agent's `ui` state key). Its
    words are written here, so a component can show `lines` as they are.

    Attributes:
        status: `"running"` while the loop goes on, `"done"` once it has ended.
        title: The card's heading: `"Refining the answer…"`, `"Awaiting your review"`,
            and at the end what the answer shown is: its stop in words when it was
            accepted (`"Passed"`, `"Edited by the reviewer"`), `"Best of 3 answers: no
            rounds left"` when none was, `"Stopped: ..."` when the loop failed.
        judging: While an answer is being judged, its round (counted from 1), else None.
        rounds: Every evaluated answer so far, in order.
        lines: Each round's `line`, in order.
        summary: The latest line while running (`"round 2: judging…"` while an answer is
            being judged); at the end, the rounds run (the answers the model wrote) and
            the answer the chat shows (`"done after 2 rounds: best score 0.95 (round 2),
            passed"`, `"done after 2 rounds: the reviewer's edit, score 0.4, edited by
            the reviewer"`).
        score: The score of the answer the chat shows at the end (the best so far while
            running); None when it was not judged.
        best_score: The best score among the judged answers.
        stop_reason: Why the loop stopped (None while it runs).
    """

    status: Literal["running", "done"]
    title: str
    judging: int | None
    rounds: list[ProgressRound]
    lines: list[str]
    summary: str
    score: float | None
    best_score: float | None
    stop_reason: StopReason | None


__all__ = [
    "ProgressCard",
    "ProgressRound",
    "ReviewActionRequest",
    "ReviewDecisions",
    "ReviewPayload",
    "RoundEvent",
    "StopEvent",
]


def round_event(name: str, attempt: Attempt, best: Attempt | None) -> RoundEvent:
    """The custom stream event of one evaluated attempt (graph and middleware alike)."""
    evaluation = attempt.evaluation
    event: RoundEvent = {
        "type": "round",
        "name": name,
        "iteration": attempt.index,
        "parent": attempt.parent,
        "move": attempt.move,
        "score": evaluation.score if evaluation is not None else None,
        "verdict": evaluation.verdict if evaluation is not None else None,
        "feedback": evaluation.feedback if evaluation is not None else "",
        "error": attempt.error,
        "best_score": best.score if best is not None else None,
        "response": attempt.response,
        "output": attempt.output,
        "reasoning": attempt.reasoning,
        "edits": attempt.edits,
        "model": attempt.model,
        "rung": attempt.rung,
    }
    stopped_at = evaluation.details.get("stopped_at") if evaluation is not None else None
    if isinstance(stopped_at, str):
        event["stopped_at"] = stopped_at
    return event


def stop_event(name: str, result: RefineResult) -> StopEvent:
    """The custom stream event of the loop's end (with its judge's calibration, if any)."""
    event: StopEvent = {
        "type": "stop",
        "name": name,
        "stop_reason": result.stop_reason,
        "score": result.score,
        "iterations": result.iterations,
        "response": result.value,
        "output": plain(result.output),
    }
    if "calibration" in result.metadata:
        event["calibration"] = result.metadata["calibration"]
    if "untrusted_pass" in result.metadata:
        event["untrusted_pass"] = result.metadata["untrusted_pass"]
    return event
