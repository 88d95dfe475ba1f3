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
  empty AI message of the loop's (id `refine-progress-<loop id>`, `_agent_state.is_host`):
  it joins the conversation with the first answer, the model and the judge are never
  shown it (`_transcript`), and it leaves when the loop ends;
- at the end the card moves to the answer's message, which is then the conversation's
  only AI text of the run.

The card's words are `_decisions/_card.py`'s (the component shows them as they are);
`ProgressUI` says which card to show and where (`Card`), `AgentLoop` writes the host's
placement with its updates, and only the middleware's hooks push the cards.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, RemoveMessage

from langgraph_refine._agents._agent_state import LoopState
from langgraph_refine._agents._transcript import LOOP_SOURCE
from langgraph_refine._decisions._card import progress_card
from langgraph_refine._decisions._round import Outcome
from langgraph_refine._events import ProgressCard
from langgraph_refine._result import RefineResult
from langgraph_refine._state import Attempt, MoveKind


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
