"""The loop's progress card in a chat: `RefineMiddleware(progress_ui=...)`, in process.

A chat (LangChain's agent-chat-ui) renders LangGraph generative-UI messages under the AI
message their metadata names. The middleware pushes one card per run after each round
and at the end (same id: updated in place), hosts it under an empty AI message while the
loop runs (never shown to the model or the judge), and moves it under the answer at the
end. Served through `langgraph dev` in `tests/test_chat_server.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any, get_args

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import Attempt, Evaluation, RefineMiddleware
from langgraph_refine._agents._agent_state import JudgingAnswer
from langgraph_refine._decisions._card import MOVE_WORDS, STOP_WORDS, progress_card
from langgraph_refine._state import MoveKind, StopReason
from tests.fakes import AgentModel, call_tool, lookup

CARD = "refine_progress"
ROUND_1 = "round 1: score 0.4, refining"
ROUND_2 = "round 2: score 0.95, target score reached"


def recording(*values: float) -> Any:
    """A callable evaluator scoring in order, keeping the ids of the messages it was given."""
    seen: list[list[str]] = []

    def evaluate(response: str, state: Any) -> float:
        seen.append([m.id for m in state["messages"]])
        return values[min(len(seen) - 1, len(values) - 1)]

    evaluate.seen = seen  # type: ignore[attr-defined]
    return evaluate


def agent_with_card(**settings: Any) -> tuple[Any, AgentModel, Any]:
    """An agent that looks something up, answers, looks again and answers better."""
    model = AgentModel(
        replies=[
            call_tool("eiffel", "c1"),
            AIMessage("first answer"),
            call_tool("paris", "c2"),
            AIMessage("second answer"),
        ]
    )
    evaluator = recording(0.4, 0.95)
    refine = RefineMiddleware(
        evaluator, max_iterations=3, target_score=0.9, progress_ui=CARD, **settings
    )
    agent = create_agent(model, tools=[lookup], middleware=[refine], checkpointer=InMemorySaver())
    return agent, model, evaluator


def run(agent: Any, thread: str = "t") -> tuple[list[dict[str, Any]], list[Any], dict[str, Any]]:
    """The UI messages pushed, every values update's messages, and the final state."""
    config: Any = {"configurable": {"thread_id": thread}}
    pushed: list[dict[str, Any]] = []
    updates: list[Any] = []
    request = {"messages": [HumanMessage("Tell me about the Eiffel Tower.")]}
    for mode, data in agent.stream(request, config, stream_mode=["custom", "values"]):
        if mode == "custom" and data.get("type") == "ui":
            pushed.append(data)
        elif mode == "values":
            updates.append(data["messages"])
    return pushed, updates, agent.get_state(config).values


def test_each_round_updates_one_card_that_ends_under_the_answer() -> None:
    agent, _, _ = agent_with_card()
    pushed, _, state = run(agent)
    assert [card["props"]["lines"] for card in pushed] == [
        [],
        [ROUND_1],
        [ROUND_1],
        [ROUND_1, ROUND_2],
        [ROUND_1, ROUND_2],
    ]
    assert [card["props"]["summary"] for card in pushed][:4] == [
        "round 1: judging…",
        ROUND_1,
        "round 2: judging…",
        ROUND_2,
    ]
    assert [card["props"]["judging"] for card in pushed] == [1, None, 2, None, None]
    statuses = [card["props"]["status"] for card in pushed]
    assert statuses == ["running", "running", "running", "running", "done"]
    assert {(card["id"], card["name"]) for card in pushed} == {(pushed[0]["id"], CARD)}
    (card,) = state["ui"]
    assert card["props"] == pushed[-1]["props"]
    assert card["props"]["summary"] == (
        "done after 2 rounds: best score 0.95 (round 2), target score reached"
    )
    answer = state["messages"][-1]
    assert card["metadata"]["message_id"] == answer.id
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert [m.text for m in state["messages"] if m.type == "ai" and m.text] == ["second answer"]


def test_while_the_loop_runs_the_card_has_an_empty_ai_message_to_sit_under() -> None:
    agent, _, _ = agent_with_card()
    pushed, updates, _ = run(agent)
    host = pushed[0]["metadata"]["message_id"]
    assert pushed[1]["metadata"]["message_id"] == host
    hosting = [messages for messages in updates if host in [m.id for m in messages]]
    assert hosting, "the card's message is in the conversation while the loop runs"
    for messages in hosting:
        (message,) = [m for m in messages if m.id == host]
        assert isinstance(message, AIMessage)
        assert (message.text, message.tool_calls) == ("", [])
    # The second round's tool turn follows it: the card sits where the first round ended.
    assert [m.type for m in hosting[-1]] == ["human", "ai", "tool", "ai", "ai", "tool"]
    assert host not in [m.id for m in updates[-1]]


def test_the_model_and_the_judge_never_see_the_cards_message() -> None:
    agent, model, evaluator = agent_with_card()
    pushed, _, _ = run(agent)
    host = pushed[0]["metadata"]["message_id"]
    sent = [[m.id for m in call] for call in model._calls]
    assert len(sent) == 4 and not [ids for ids in sent if host in ids]
    assert len(evaluator.seen) == 2 and not [ids for ids in evaluator.seen if host in ids]
    # What the model was sent on its third call: the first answer, the feedback, no gap.
    assert [m.type for m in model._calls[2]] == ["human", "ai", "tool", "ai", "human"]


def test_the_card_says_judging_from_the_answers_step_until_its_verdict() -> None:
    # The answer's model step ends before its judging step starts: the checkpoint
    # between them (what a chat holds while the judge runs) shows the round judged.
    agent, _, _ = agent_with_card()
    run(agent)
    config: Any = {"configurable": {"thread_id": "t"}}
    waiting: dict[int, dict[str, Any]] = {}  # by the answers judged before it
    for snapshot in reversed(list(agent.get_state_history(config))):
        values = snapshot.values
        record = values.get("refine_state")
        if record is not None and isinstance(record.job, JudgingAnswer):
            waiting.setdefault(len(values["refine_attempts"]), values)
    assert list(waiting) == [0, 1]
    for number, values in enumerate(waiting.values(), start=1):
        (card,) = values["ui"]
        props = card["props"]
        assert (props["status"], props["judging"]) == ("running", number)
        assert props["summary"] == f"round {number}: judging…"
        host = card["metadata"]["message_id"]
        assert host in [m.id for m in values["messages"]], "the card has its message"
    assert waiting[1]["ui"][0]["props"]["lines"] == [ROUND_1]


def test_the_async_agent_shows_the_same_card() -> None:
    agent, _, _ = agent_with_card()

    async def main() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        config: Any = {"configurable": {"thread_id": "a"}}
        pushed: list[dict[str, Any]] = []
        request = {"messages": [HumanMessage("Tell me about the Eiffel Tower.")]}
        async for data in agent.astream(request, config, stream_mode="custom"):
            if data.get("type") == "ui":
                pushed.append(data)
        return pushed, (await agent.aget_state(config)).values

    pushed, state = asyncio.run(main())
    assert [card["props"]["lines"] for card in pushed][-1] == [ROUND_1, ROUND_2]
    assert [card["props"]["judging"] for card in pushed] == [1, None, 2, None, None]
    assert state["ui"][0]["metadata"]["message_id"] == state["messages"][-1].id


def test_with_every_turn_kept_the_card_ends_under_the_answer() -> None:
    agent, _, _ = agent_with_card(keep_evaluation_turns=True)
    pushed, _, state = run(agent)
    (card,) = state["ui"]
    last = state["messages"][-1]
    assert (last.text, card["metadata"]["message_id"]) == ("second answer", last.id)
    assert last.id is not None
    assert pushed[0]["metadata"]["message_id"] not in [m.id for m in state["messages"]]


def test_a_follow_up_run_gets_a_card_of_its_own() -> None:
    agent, _, _ = agent_with_card()
    first, _, _ = run(agent)
    second, _, state = run(agent)
    assert first[0]["id"] != second[0]["id"]
    assert [card["id"] for card in state["ui"]] == [first[0]["id"], second[0]["id"]]


def test_a_run_that_failed_leaves_no_card_message_behind_in_the_next() -> None:
    class Failing(AgentModel):
        def _next(self, messages: list[Any]) -> AIMessage:
            if len(self._calls) == 1:  # the second answer
                self._calls.append(list(messages))
                raise RuntimeError("provider down")
            return super()._next(messages)

    model = Failing(replies=[AIMessage("first answer"), AIMessage("x"), AIMessage("again")])
    refine = RefineMiddleware(recording(0.4, 0.95), target_score=0.9, progress_ui=CARD)
    agent = create_agent(model, tools=[], middleware=[refine], checkpointer=InMemorySaver())
    with pytest.raises(RuntimeError, match="provider down"):
        run(agent)
    config: Any = {"configurable": {"thread_id": "t"}}
    left = agent.get_state(config).values["messages"]
    assert [m.type for m in left] == ["human", "ai"], "the failed run's card message is left"
    _, _, state = run(agent)
    assert [(m.type, m.text) for m in state["messages"]] == [
        ("human", "Tell me about the Eiffel Tower."),
        ("human", "Tell me about the Eiffel Tower."),
        ("ai", "again"),
    ]
    assert model._calls[-1][-1].text == "Tell me about the Eiffel Tower."


def test_without_progress_ui_nothing_is_pushed_and_the_state_has_no_ui() -> None:
    model = AgentModel(replies=[AIMessage("first answer"), AIMessage("second answer")])
    refine = RefineMiddleware(recording(0.4, 0.95), target_score=0.9)
    agent = create_agent(model, tools=[], middleware=[refine], checkpointer=InMemorySaver())
    pushed, updates, state = run(agent)
    assert pushed == [] and "ui" not in state
    assert all(m.text for messages in updates for m in messages if m.type == "ai")


@pytest.mark.parametrize("value", ["", "   ", 3, ["refine_progress"]])
def test_a_progress_ui_that_is_not_a_name_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match=r"progress_ui must be the name of a UI component.*got"):
        RefineMiddleware(progress_ui=value)


def attempt(index: int, score: float | None, move: MoveKind = "refine") -> Attempt:
    evaluation = None if score is None else Evaluation(score=score, verdict="FAIL")
    return Attempt(index=index, response=f"answer {index}", evaluation=evaluation, move=move)


def test_the_cards_words_name_each_round_its_score_and_what_followed() -> None:
    attempts = [attempt(0, 0.2, "sample"), attempt(1, None, "sample"), attempt(2, 0.6)]
    running = progress_card(attempts, None, "refine")
    assert running["lines"] == [
        "round 1: score 0.2, answering afresh",
        "round 2: not judged, refining",
        "round 3: score 0.6, refining",
    ]
    assert (running["summary"], running["best_score"]) == ("round 3: score 0.6, refining", 0.6)
    assert [r["verdict"] for r in running["rounds"]] == ["FAIL", None, "FAIL"]
    done = progress_card([*attempts, attempt(3, 0.9, "edit")], "edited", done=True)
    assert done["lines"][-2:] == [
        "round 3: score 0.6, taking the reviewer's edit",
        "the reviewer's edit: score 0.9, edited by the reviewer",
    ]
    assert done["summary"] == (
        "done after 3 rounds: the reviewer's edit, score 0.9, edited by the reviewer"
    )
    judging = progress_card(attempts, None, "refine", judging=True)
    assert (judging["lines"], judging["judging"]) == (running["lines"], 4)
    assert judging["summary"] == "round 4: judging…"
    assert running["judging"] is None
    paused = progress_card(attempts, "max_iterations", reviewing=True)
    assert paused["lines"][-1] == "round 3: score 0.6, no rounds left, awaiting review"
    unjudged = progress_card([attempt(0, None)], "budget_exhausted", done=True)
    assert unjudged["summary"] == "done after 1 round: no answer was judged, budget spent"


def test_every_move_and_stop_reason_has_its_words() -> None:
    assert set(MOVE_WORDS) == set(get_args(MoveKind))
    assert set(STOP_WORDS) == set(get_args(StopReason))
