"""The words of the progress card a chat shows while the loop runs (`progress_ui`).

One line per answer written (`"round 2: score 0.6, refining"`), what comes next, a title
that says what the answer shown is (never "refined" when nothing passed) and, at the end,
the outcome of the answer the chat shows (a reviewer's edit included). The words are
written here and shown as they are; which card a chat gets, and when, is the agent's
(`_agents/_progress.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from langgraph_refine._events import ProgressCard, ProgressRound
from langgraph_refine._result import best_attempt
from langgraph_refine._state import Attempt, MoveKind, StopReason

MOVE_WORDS: dict[MoveKind, str] = {
    "refine": "refining",
    "sample": "answering afresh",
    "guided": "answering afresh",
    "revise": "revising as the reviewer asked",
    "edit": "taking the reviewer's edit",
}
"""What the loop does next, by the next answer's move."""

STOP_WORDS: dict[StopReason, str] = {
    "passed": "passed",
    "target_reached": "target score reached",
    "max_iterations": "no rounds left",
    "plateau": "no longer improving",
    "budget_exhausted": "budget spent",
    "approved": "approved",
    "edited": "edited by the reviewer",
    "rejected": "rejected by the reviewer",
    "model_error": "stopped: the model call failed",
    "unjudged": "stopped: the evaluator could not judge two answers in a row",
    "interrupted": "interrupted",
}
"""Why the loop stopped, in words."""


ANSWER_STOPS: frozenset[StopReason] = frozenset({"passed", "target_reached", "approved", "edited"})
"""Stops whose answer was accepted (by the rules or a person): the card's title says so.

Every other stop ends with the best answer that was written (`"Best of 3 answers"`), or
says that it stopped (`"Stopped: the model call failed"`)."""

RUNNING_TITLE = "Refining the answer…"
REVIEW_TITLE = "Awaiting your review"


def progress_card(
    attempts: Sequence[Attempt],
    stop_reason: StopReason | None,
    upcoming: MoveKind | None = None,
    *,
    reviewing: bool = False,
    done: bool = False,
    judging: bool = False,
    answer: int | None = None,
) -> ProgressCard:
    """The card's props: a line per evaluated answer, and what comes next.

    Rounds count the answers the model wrote; a reviewer's edit is shown as the
    reviewer's, never counted as a round.

    Args:
        attempts: The loop's attempts so far, in order.
        stop_reason: Why the loop stops (None while it goes on).
        upcoming: The next answer's move while the loop goes on.
        reviewing: A person reviews before the loop goes on or ends.
        done: The loop has ended.
        judging: The next answer (round `len(attempts) + 1`) is written and being judged.
        answer: The index of the attempt the chat shows at the end
            (`RefineResult.best_index`: the best, or the approved or edited one);
            None: the reviewer's edit after an `"edited"` stop, else the best attempt.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.4))
        >>> progress_card([first], None, "refine")["lines"]
        ['round 1: score 0.4, refining']
        >>> progress_card([first], None, "refine", judging=True)["summary"]
        'round 2: judging…'
        >>> progress_card([first], "max_iterations", done=True)["title"]
        'Best of 1 answer: no rounds left'
    """
    rounds = [
        _round(attempt, _then(attempts, position, stop_reason, upcoming, reviewing and not done))
        for position, attempt in enumerate(attempts)
    ]
    lines = [item["line"] for item in rounds]
    best = best_attempt(attempts)
    shown = _shown(attempts, answer, best, stop_reason)
    if done:
        summary = _outcome(attempts, shown, best, stop_reason)
    elif judging:
        summary = f"{_name(upcoming, len(attempts) + 1)}: judging…"
    else:
        summary = lines[-1] if lines else "writing the first answer"
    return {
        "status": "done" if done else "running",
        "title": _title(attempts, best, stop_reason, done=done, reviewing=reviewing),
        "judging": len(attempts) + 1 if judging and not done else None,
        "rounds": rounds,
        "lines": lines,
        "summary": summary,
        "score": shown.score if shown is not None else None,
        "best_score": best.score if best is not None else None,
        "stop_reason": stop_reason,
    }


def _then(
    attempts: Sequence[Attempt],
    position: int,
    stop: StopReason | None,
    upcoming: MoveKind | None,
    reviewing: bool,
) -> str:
    """What the loop did after the answer at `position`, in words."""
    last = position + 1 == len(attempts)
    if not last:
        then = MOVE_WORDS[attempts[position + 1].move or "refine"]
    elif stop is not None:
        then = STOP_WORDS[stop]
    else:
        then = MOVE_WORDS[upcoming] if upcoming is not None else "deciding"
    return then + ", awaiting review" if reviewing and last else then


def _round(attempt: Attempt, then: str) -> ProgressRound:
    score = attempt.score
    judged = "not judged" if score is None else f"score {_score(score)}"
    verdict = attempt.evaluation.verdict if attempt.evaluation is not None else None
    return {
        "round": attempt.index + 1,
        "score": score,
        "verdict": verdict,
        "next": then,
        "line": f"{_name(attempt.move, attempt.index + 1)}: {judged}, {then}",
    }


def _name(move: MoveKind | None, round_: int) -> str:
    return "the reviewer's edit" if move == "edit" else f"round {round_}"


def _written(attempts: Sequence[Attempt]) -> int:
    """The answers the model wrote (a reviewer's edit is none of them)."""
    return sum(1 for attempt in attempts if attempt.move != "edit")


def _shown(
    attempts: Sequence[Attempt], answer: int | None, best: Attempt | None, stop: StopReason | None
) -> Attempt | None:
    """The attempt the chat shows: the one at index `answer`, else the best.

    Unnamed, an edit that ended the loop is the answer (an edit always ends it).
    """
    if answer is None and stop == "edited":
        answer = next((a.index for a in reversed(attempts) if a.move == "edit"), None)
    if answer is None:
        return best
    return next((a for a in attempts if a.index == answer), best)


def _outcome(
    attempts: Sequence[Attempt],
    shown: Attempt | None,
    best: Attempt | None,
    stop: StopReason | None,
) -> str:
    """The card's last line: how many answers were written, and the one the chat shows."""
    why = STOP_WORDS[stop] if stop is not None else "stopped"
    count = _written(attempts)
    rounds = f"{count} round" + ("" if count == 1 else "s")
    if shown is None:
        return f"done after {rounds}: no answer was judged, {why}"
    if shown is best and shown.score is not None and shown.move != "edit":
        best_round = shown.index + 1
        return f"done after {rounds}: best score {_score(shown.score)} (round {best_round}), {why}"
    judged = "not judged" if shown.score is None else f"score {_score(shown.score)}"
    return f"done after {rounds}: {_name(shown.move, shown.index + 1)}, {judged}, {why}"


def _title(
    attempts: Sequence[Attempt],
    best: Attempt | None,
    stop: StopReason | None,
    *,
    done: bool,
    reviewing: bool,
) -> str:
    """The card's heading: what is happening, or what the answer shown is."""
    if not done:
        return REVIEW_TITLE if reviewing else RUNNING_TITLE
    why = STOP_WORDS[stop] if stop is not None else "stopped"
    if stop in ANSWER_STOPS or why.startswith("stopped"):
        return why[0].upper() + why[1:]
    if best is None:
        return f"Stopped: {why}"
    count = _written(attempts)
    return f"Best of {count} answer{'' if count == 1 else 's'}: {why}"


def _score(score: float) -> str:
    return str(round(score, 2))
