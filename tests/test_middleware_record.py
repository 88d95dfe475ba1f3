"""RefineMiddleware's strategies and the strategy record in the agent's store.

A real `create_agent` agent with a scripted model: its answers after feedback either
always score below the answer they refine or always above it. With `strategy="explore"`
and the agent's store, later runs start from what earlier ones learned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.store.memory import InMemoryStore

from langgraph_refine import Attempt, Evaluation, RefineMiddleware
from langgraph_refine._agents._agent_state import Hidden, Turn
from langgraph_refine._agents._transcript import onward
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._prompts import AGENT_REFINE_EARLIER as REFINE_EARLIER_PROMPT
from langgraph_refine._decisions._view import LoopView
from langgraph_refine._records._record import RECORD_NAMESPACE, StrategyRecord, read_records
from tests.fakes import AgentModel, lookup

SCORE = re.compile(r"score=([0-9.]+)")
REQUEST = "Write a note about the tower."
LOOP = {"max_iterations": 3, "patience": None, "target_score": 1.0}


def agent_model(step: float, fresh: float = 0.5) -> AgentModel:
    """Answers `score=<fresh>` when first asked; after feedback, the last answer's score + step."""

    def reply(messages: Sequence[BaseMessage]) -> str:
        answers = [m for m in messages if isinstance(m, AIMessage) and m.text]
        shown = SCORE.findall(messages[-1].text) or (
            SCORE.findall(answers[-1].text) if answers else []
        )
        if isinstance(messages[-1], HumanMessage) and messages[-1].text != REQUEST and shown:
            return f"score={min(0.95, max(0.0, float(shown[-1]) + step)):.2f}"
        return f"score={fresh:.2f}"

    return AgentModel(replies=[reply])


def rate(response: str, state: Any) -> Evaluation:
    """Reads the score the scripted model wrote."""
    found = SCORE.search(response)
    assert found, response
    return Evaluation(score=float(found.group(1)), feedback="make it better")


def run(model: AgentModel, store: Any, **options: Any) -> list[Attempt]:
    middleware = RefineMiddleware(rate, **{**LOOP, **options})
    agent = create_agent(model, tools=[lookup], middleware=[middleware], store=store)
    out = agent.invoke({"messages": [HumanMessage(REQUEST)]})
    return list(middleware.result(out).attempts)


def record(store: InMemoryStore, key: str = "AgentModel|rate") -> StrategyRecord:
    records = read_records(store)
    assert key in records, list(records)
    return records[key]


def test_explore_keeps_the_record_in_the_agents_store() -> None:
    store = InMemoryStore()
    first = run(agent_model(-0.2), store, strategy="explore")
    assert [a.move for a in first][:2] == ["sample", "refine"]  # cold: round 1 refines
    kept = record(store)
    assert kept.moves["refine"].fell >= 1
    assert sum(s.rounds for s in kept.moves.values()) == len(first) - 1
    run(agent_model(-0.2), store, strategy="explore")
    assert sum(s.rounds for s in record(store).moves.values()) == 2 * (len(first) - 1)
    assert len(record(store).runs) == 2


def test_record_key_overrides_the_middlewares_default() -> None:
    store = InMemoryStore()
    run(agent_model(-0.2), store, strategy="explore", record_key="agents-notes")
    assert list(read_records(store)) == ["agents-notes"]


def test_an_agent_whose_refinements_fall_samples_from_round_1_later() -> None:
    store = InMemoryStore()
    for _ in range(4):
        attempts = run(agent_model(-0.2), store, strategy="explore")
    assert attempts[1].parent is None and attempts[1].move not in ("refine", "revise")


def test_an_agent_whose_refinements_help_keeps_refining() -> None:
    store = InMemoryStore()
    for _ in range(4):
        attempts = run(agent_model(+0.1, fresh=0.3), store, strategy="explore")
    assert [a.move for a in attempts[1:]] == ["refine"] * 3
    refine = record(store).moves["refine"]
    assert refine.raised == refine.rounds >= 9 and refine.fell == 0


@pytest.mark.parametrize("strategy", ["chain", "sample"])
def test_only_explore_keeps_a_record(strategy: str) -> None:
    store = InMemoryStore()
    run(agent_model(-0.2), store, strategy=strategy)
    assert store.search(RECORD_NAMESPACE) == []


def test_chain_is_the_default_and_continues_the_conversation() -> None:
    model = agent_model(+0.1, fresh=0.3)
    attempts = run(model, None)
    assert [a.move for a in attempts] == ["sample", "refine", "refine", "refine"]
    assert [a.parent for a in attempts] == [None, 0, 1, 2]
    last_prompt = model.calls[-1]
    assert [m.text for m in last_prompt if isinstance(m, AIMessage)][:3] == [
        "score=0.30",
        "score=0.40",
        "score=0.50",
    ]


def test_a_fresh_sample_does_not_show_the_earlier_answers() -> None:
    model = agent_model(-0.2)
    attempts = run(model, None, strategy="sample")
    assert [a.move for a in attempts] == ["sample"] * 4
    assert all(a.parent is None for a in attempts)
    for prompt in model.calls[1:]:
        # The agent's model sees the request alone, as when it was first asked.
        assert [type(m).__name__ for m in prompt] == ["HumanMessage"]
        assert prompt[0].text == REQUEST


def test_refining_an_earlier_answer_shows_it_with_its_feedback() -> None:
    attempts = [
        Attempt(index=0, response="first", evaluation=Evaluation(score=0.6, feedback="f0")),
        Attempt(index=1, response="second", evaluation=Evaluation(score=0.2, feedback="f1")),
    ]
    state = {"messages": [HumanMessage(REQUEST, id="request")]}
    turns = [
        Turn(anchor="request", kind="ai", text="first", id="a0"),
        Turn(anchor="request", kind="ai", text="second", id="a1"),
    ]
    view = LoopView(task=REQUEST, attempts=tuple(attempts), parent=0, move="refine")
    update = onward(state, view, turns, LoopOptions())
    # The model no longer sees the two answers (the turns so far) nor the run's messages.
    assert update["hidden"] == Hidden(turns=2, upto="request")
    # The earlier answer comes back in one new loop turn; the conversation is untouched.
    assert "messages" not in update
    turn = update["turns"][-1]
    assert (turn.anchor, turn.kind) == ("request", "human")
    assert turn.text == REFINE_EARLIER_PROMPT.format(
        answer="first", score=" (score 0.60)", feedback="f0"
    )


def test_invalid_strategy_or_record_key_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="strategy must be one of"):
        RefineMiddleware(rate, strategy="greedy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="record_key must be a non-empty string"):
        RefineMiddleware(rate, record_key=" ")
