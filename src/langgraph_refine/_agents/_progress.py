"""The loop's progress as a chat renders it: one generative-UI card, updated each round.

A chat client renders an agent's messages and LangGraph's generative-UI messages (a
`{"type": "ui", "name": component, "props": ...}` pushed with `push_ui_message`, kept in
the state key `ui` by `ui_message_reducer`); LangChain's agent-chat-ui shows each one
under the AI message its `metadata.message_id` names, with the component the server
bundles from its `langgraph.json` `"ui"` entry. It drops the loop's `custom` round
events, so without this the user watches loading dots while the loop runs.

With `RefineMiddleware(progress_ui=name)` each run of the loop shows one card
(`ProgressCard`: one line per round, `"round 2: score 0.6, refining"`), pushed when an
answer is written and is being judged (`"round 2: judging…"`), after each round and at
the end, under the same id, so it is updated in place:

- while the loop runs, no answer is in the conversation yet, so the card is hosted by an
  empty AI message of the loop's (id `refine-progress-<loop id>`, `_transcript.is_host`):
  it joins the conversation with the first answer, the model and the judge are never
  shown it (`_transcript`), and it leaves when the loop ends;
- at the end the card moves to the answer's message, which is then the conversation's
  only AI text of the run.

The card's words are written here (the component shows them as they are); `ProgressUI`
says which card to show and where (`Card`), `AgentLoop` writes the host's placement
with its updates, and only the middleware's hooks push the cards.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, RemoveMessage

from langgraph_refine._agents._agent_state import LoopState
from langgraph_refine._agents._transcript import LOOP_SOURCE
from langgraph_refine._decisions._round import Outcome
from langgraph_refine._events import ProgressCard, ProgressRound
from langgraph_refine._result import RefineResult, best_attempt
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


class Card(NamedTuple):
    """A progress card to show, for the middleware's hooks to push (`_middleware.show`).

    Attributes:
        id: The card's id (the same for a run's every update: it is replaced in place).
        props: What it shows; None takes the card away.
        message: The message it sits under (None: where it was).
        placed: The state update that places the message hosting it (empty if placed).
    """

    id: str
    props: ProgressCard | None
    message: AIMessage | None = None
    placed: dict[str, Any] = {}


@dataclass(frozen=True)
class ProgressUI:
    """The loop's progress as a generative-UI card named `component`: the cards to show.

    Frozen configuration: what a run shows is read from its state; nothing is pushed
    here (the middleware's hooks show the cards).

    Attributes:
        component: The UI component's name, as the `langgraph.json` `"ui"` file exports it.
    """

    component: str

    def after_round(
        self, state: Mapping[str, Any], record: LoopState, outcome: Outcome, reviewing: bool
    ) -> Card:
        """The card after a round (placing its host, the first time).

        Args:
            state: The agent's state after the model's answer.
            record: The loop's record.
            outcome: The round's outcome (its attempts, stop reason and next move).
            reviewing: A person answers before the loop goes on or ends.
        """
        upcoming = outcome.choice.move if outcome.choice is not None else None
        card = progress_card(outcome.attempts, outcome.stop_reason, upcoming, reviewing=reviewing)
        return self._hosted(state, record, card)

    def judging(
        self,
        state: Mapping[str, Any],
        record: LoopState,
        attempts: Sequence[Attempt],
        upcoming: MoveKind | None,
    ) -> Card:
        """The card while the answer just written is judged (placing its host, the first time).

        The answer's model step ends before its judging starts (a step of its own), so the
        chat sees "round N: judging…" for as long as the judge takes.

        Args:
            state: The agent's state before the answer's model step.
            record: The loop's record.
            attempts: The loop's attempts so far (the answer is the next).
            upcoming: The answer's move (how it was asked for).
        """
        return self._hosted(state, record, progress_card(attempts, None, upcoming, judging=True))

    def _hosted(self, state: Mapping[str, Any], record: LoopState, card: ProgressCard) -> Card:
        # While the loop runs the card sits under an empty AI message of its own.
        host = AIMessage(
            "",
            id=record.card_id,
            name=LOOP_SOURCE,
            additional_kwargs={"lc_source": LOOP_SOURCE},
        )
        placed = any(message.id == host.id for message in state.get("messages") or [])
        return Card(record.card_id, card, host, {} if placed else {"messages": [host]})

    def at_end(
        self,
        state: Mapping[str, Any],
        record: LoopState,
        result: RefineResult,
        messages: list[Any],
        rewritten: bool,
    ) -> tuple[list[Any], Card]:
        """The end's messages and the card under the answer (the last), its host gone.

        Args:
            state: The agent's state.
            record: The loop's record.
            result: The loop's result.
            messages: The end's messages, the answer last (none without an answer).
            rewritten: The messages rewrite the conversation (`keep_evaluation_turns`),
                which leaves the host out already.

        Returns:
            The messages to write (the answer gets an id of its own if it has none, for
            the card to name, and the host is removed) and the card.
        """
        answer = messages[-1] if result.value and isinstance(messages[-1], AIMessage) else None
        if answer is not None and answer.id is None:
            answer = answer.model_copy(update={"id": str(uuid.uuid4())})
            messages = [*messages[:-1], answer]
        card = Card(
            record.card_id,
            progress_card(result.attempts, result.stop_reason, done=True, answer=result.best_index),
            answer,
        )
        hosted = record.card_id
        if rewritten or not any(m.id == hosted for m in state.get("messages") or []):
            return messages, card
        return [RemoveMessage(id=hosted), *messages], card

    def withdrawn(self, state: Mapping[str, Any], record: LoopState) -> Card | None:
        """The run's card taken away (its loop starts again), or None when it has none."""
        if any(card.get("id") == record.card_id for card in state.get("ui") or []):
            return Card(record.card_id, None)
        return None
