"""A chat's Refresh of a loop's answer: a new run from before the answer runs the loop again.

A chat regenerates an answer by running the thread again, without input, from the state
before the answer first appeared (agent-chat-ui's Refresh: `useStream`'s
`getMessagesMetadata(message).firstSeenState.parent_checkpoint`, over the last 10
states). For a loop's answer that state is after the loop ended. A new run continuing
from it answers again (every call paid, the old run's tool calls gone); a resume of the
same run, or one without a run id (a script after a crash), finishes the loop as it was
and pays nothing; a review's resume (a new run) is answered, never regenerated.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine import RefineMiddleware
from tests.fakes import AgentModel, call_tool, lookup, scores

REQUEST = "Tell me about the Eiffel Tower."
HISTORY_LIMIT = 10
"""The states agent-chat-ui reads (`useStream`'s `fetchStateHistory: true`)."""


def regenerate_from(agent: Any, config: dict[str, Any], message_id: str) -> dict[str, Any]:
    """The config a chat regenerates `message_id` from: the parent of its first state."""
    history = list(agent.get_state_history(config, limit=HISTORY_LIMIT))
    holding = [s for s in history if message_id in [m.id for m in s.values.get("messages", [])]]
    parent: dict[str, Any] = holding[-1].parent_config
    return parent


def run(config: dict[str, Any], run_id: str | None) -> dict[str, Any]:
    return {**config, "run_id": uuid.UUID(run_id)} if run_id else config


class Chat:
    """An agent whose model looks up, then answers; the judge passes every second answer."""

    def __init__(self, **options: Any) -> None:
        replies = [call_tool("eiffel", "c1"), "first", "second", call_tool("paris", "c2"), "third"]
        self.model = AgentModel(replies=[*replies, "fourth"])
        self.judge = scores(0.4, 0.95, 0.4, 0.95)
        self.middleware = RefineMiddleware(
            self.judge, max_iterations=2, target_score=0.9, patience=None, **options
        )
        self.agent = create_agent(
            self.model, tools=[lookup], middleware=[self.middleware], checkpointer=InMemorySaver()
        )
        self.config: dict[str, Any] = {"configurable": {"thread_id": str(uuid.uuid4())}}

    def ask(self, run_id: str | None = None) -> dict[str, Any]:
        request = {"messages": [HumanMessage(REQUEST)]}
        return self.agent.invoke(request, run(self.config, run_id))  # type: ignore[no-any-return]

    def refresh(self, run_id: str | None, answer_id: str) -> dict[str, Any]:
        fork = regenerate_from(self.agent, self.config, answer_id)
        return self.agent.invoke(None, run(fork, run_id))  # type: ignore[no-any-return]

    async def arefresh(self, run_id: str | None, answer_id: str) -> dict[str, Any]:
        fork = regenerate_from(self.agent, self.config, answer_id)
        return await self.agent.ainvoke(None, run(fork, run_id))  # type: ignore[no-any-return]


def transcript(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m.type, m.text or str([c["args"] for c in m.tool_calls])) for m in state["messages"]]


R1, R2 = str(uuid.uuid4()), str(uuid.uuid4())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_new_run_from_before_the_answer_runs_the_loop_again(mode: str) -> None:
    chat = Chat()
    first = chat.ask(R1)
    answer = first["messages"][-1]
    assert answer.text == "second"
    calls = len(chat.model.calls)
    if mode == "sync":
        again = chat.refresh(R2, answer.id)
    else:
        again = asyncio.run(chat.arefresh(R2, answer.id))
    # A new loop: the model looked up again and answered twice, both answers judged.
    assert len(chat.model.calls) - calls == 3
    assert chat.judge.calls[2:] == ["third", "fourth"]  # type: ignore[attr-defined]
    # The earlier run's tool call and result went with its loop; the new answer is last.
    assert transcript(again) == [
        ("human", REQUEST),
        ("ai", "[{'topic': 'paris'}]"),
        ("tool", "paris: built in 1889, in Paris"),
        ("ai", "fourth"),
    ]
    assert answer.id not in [m.id for m in again["messages"]]
    result = chat.middleware.result(again)
    assert (result.value, result.stop_reason, len(result.attempts)) == (
        "fourth",
        "target_reached",
        2,
    )


@pytest.mark.parametrize("run_id", [R1, None], ids=["same run", "no run id"])
def test_a_resume_of_the_ended_run_finishes_it_and_pays_nothing(run_id: str | None) -> None:
    # LangGraph Server retries a crashed run without a run id (from its second attempt),
    # as a script resumes; the same run id is a resume too.
    chat = Chat()
    first = chat.ask(R1)
    answer = first["messages"][-1]
    calls, judged = len(chat.model.calls), len(chat.judge.calls)  # type: ignore[attr-defined]
    again = chat.refresh(run_id, answer.id)
    assert (len(chat.model.calls), len(chat.judge.calls)) == (calls, judged)  # type: ignore[attr-defined]
    assert transcript(again) == transcript(first)
    assert chat.middleware.result(again).value == "second"


def test_a_refresh_of_an_answer_a_model_step_chose_runs_the_loop_again() -> None:
    # With select="pairwise" the end's comparisons are made in a model step, which
    # writes the answer: a Refresh forks from before that step.
    compared: list[str] = []

    def prefer_first(task: str, first: str, second: str) -> str:
        compared.append(first)
        return "first"

    chat = Chat(select="pairwise", select_margin=1.0, comparer=prefer_first)
    first = chat.ask(R1)
    answer = first["messages"][-1]
    assert compared, "the end compared the answers in a model step"
    calls = len(chat.model.calls)
    again = chat.refresh(R2, answer.id)
    assert len(chat.model.calls) - calls == 3
    assert again["messages"][-1].text in ("third", "fourth")
    assert answer.id not in [m.id for m in again["messages"]]


def test_a_review_answered_in_a_new_run_is_the_reviews_answer_not_a_refresh() -> None:
    chat = Chat(human_review="final")
    paused = chat.ask(R1)
    assert paused["__interrupt__"], "the loop asks its reviewer"
    calls = len(chat.model.calls)
    done = chat.agent.invoke(Command(resume={"action": "approve"}), run(chat.config, R2))
    assert len(chat.model.calls) == calls
    result = chat.middleware.result(done)
    assert (result.value, result.stop_reason) == ("second", "approved")
    assert done["messages"][-1].text == "second"


def test_a_refresh_with_a_progress_card_leaves_one_card_under_the_new_answer() -> None:
    chat = Chat(progress_ui="refine_progress")
    first = chat.ask(R1)
    (old_card,) = first["ui"]
    again = chat.refresh(R2, first["messages"][-1].id)
    (card,) = again["ui"]
    assert card["id"] != old_card["id"]
    assert card["metadata"]["message_id"] == again["messages"][-1].id
    assert card["props"]["status"] == "done"
    assert [m.type for m in again["messages"]].count("ai") == 2  # the tool call and the answer


def test_a_refresh_of_a_reviewed_answer_asks_the_reviewer_again() -> None:
    chat = Chat(human_review="final")
    chat.ask(R1)
    done = chat.agent.invoke(Command(resume={"action": "approve"}), run(chat.config, R2))
    calls = len(chat.model.calls)
    again = chat.refresh(str(uuid.uuid4()), done["messages"][-1].id)
    (asked,) = again["__interrupt__"]
    assert asked.value["response"] == "second"  # the reviewed answer, shown again
    assert len(chat.model.calls) == calls


def test_a_regenerated_answer_can_be_regenerated_again() -> None:
    chat = Chat()
    chat.model.replies.extend([call_tool("tower", "c3"), "fifth"])  # judged 0.95: one round
    first = chat.ask(R1)
    second = chat.refresh(R2, first["messages"][-1].id)
    third = chat.refresh(str(uuid.uuid4()), second["messages"][-1].id)
    assert [m.text for m in third["messages"]][-1] == "fifth"
    assert len({first["messages"][-1].id, second["messages"][-1].id, third["messages"][-1].id}) == 3
    assert [m.type for m in third["messages"]] == ["human", "ai", "tool", "ai"]


def test_with_streamed_drafts_a_refresh_runs_the_loop_again_too() -> None:
    # The answer keeps the id its draft streamed with; it still first appears at the end.
    chat = Chat(stream_drafts=True)
    first = chat.ask(R1)
    calls = len(chat.model.calls)
    again = chat.refresh(R2, first["messages"][-1].id)
    assert len(chat.model.calls) - calls == 3
    assert again["messages"][-1].text == "fourth"
