"""The refine graph runs the steps its runs need and no more.

A plain run is its rounds (a generate and an evaluate step each), as a hand-written
generate -> evaluate loop is: the first generate step prepares the run and the evaluate
step that stops the loop ends it. A `prepare` step runs only on a thread holding an
unfinished run, a `finalize` step only when the end needs one (a review, a pairwise
selection's comparisons, a budget error). Each LangGraph step is paid by every run,
so a step too many fails here.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine import Budget, BudgetExhaustedError, create_refine_graph
from tests.fakes import scores

ROUND = ["generate", "evaluate"]
THREE_ROUNDS = {"max_iterations": 2, "patience": None, "target_score": 1.0}


class Drafts:
    """A generator writing `draft 0`, `draft 1`, ...; it fails on the calls in `fail_on`."""

    def __init__(self, *, fail_on: tuple[int, ...] = ()) -> None:
        self.calls = 0
        self.fail_on = fail_on

    def __call__(self, state: Any) -> str:
        self.calls += 1
        if self.calls in self.fail_on:
            raise RuntimeError("the provider is down")
        return f"draft {self.calls - 1}"


NODES = {"prepare", "generate", "evaluate", "review", "finalize", "__interrupt__"}


def steps(graph: Any, payload: Any, config: Any = None, **kwargs: Any) -> list[str]:
    """The graph's steps in one invocation, in order (one node per step in this loop).

    A review's pause shows as `__interrupt__`; the durable tasks inside a step (a
    pairwise selection's comparisons) are not steps.
    """
    chunks = graph.stream(payload, config, stream_mode="updates", **kwargs)
    return [name for chunk in chunks for name in chunk if name in NODES]


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def test_a_plain_run_is_its_rounds() -> None:
    def loop() -> Any:
        return create_refine_graph(Drafts(), scores(0.5, 0.7, 0.6), **THREE_ROUNDS).compile()

    assert steps(loop(), {"task": "Write."}) == ROUND * 3
    assert loop().invoke({"task": "Write."})["response"] == "draft 1"  # the best


def test_an_async_run_is_its_rounds_and_sends_one_stop_event() -> None:
    async def generate(state: Any) -> str:
        return "a draft"

    graph = create_refine_graph(generate, scores(0.4, 0.9), target_score=0.8).compile()

    async def run() -> tuple[list[str], list[str]]:
        names, events = [], []
        modes = ["updates", "custom"]
        async for mode, chunk in graph.astream({"task": "Write."}, stream_mode=modes):
            if mode == "updates":
                names.extend(chunk)
            else:
                events.append(chunk["type"])
        return names, events

    names, events = asyncio.run(run())
    assert names == ROUND * 2
    assert events == ["round", "round", "stop"]


def test_a_task_from_messages_is_answered_in_the_last_step() -> None:
    graph = create_refine_graph(Drafts(), scores(0.9), target_score=0.8).compile()
    payload = {"messages": [HumanMessage("Write a haiku.")]}
    assert steps(graph, payload) == ROUND
    assert graph.invoke(payload)["messages"][-1].text == "draft 1"


def test_the_next_run_on_a_thread_starts_afresh_without_a_step_more() -> None:
    generate = Drafts()
    graph = create_refine_graph(generate, scores(0.5), **THREE_ROUNDS)
    graph = graph.compile(checkpointer=InMemorySaver())
    config = thread()
    assert steps(graph, {"task": "First."}, config) == ROUND * 3
    first_id = graph.get_state(config).values["loop_id"]
    assert steps(graph, {"task": "Second."}, config) == ROUND * 3
    values = graph.get_state(config).values
    assert values["task"] == "Second."
    assert [a.response for a in values["attempts"]] == ["draft 3", "draft 4", "draft 5"]
    assert values["loop_id"] != first_id
    assert values["usage"].calls == 3


def test_a_thread_left_with_an_unfinished_run_is_prepared_by_a_step_of_its_own() -> None:
    generate = Drafts(fail_on=(2,))
    graph = create_refine_graph(generate, scores(0.5), **THREE_ROUNDS)
    graph = graph.compile(checkpointer=InMemorySaver())
    config = thread()
    with pytest.raises(RuntimeError, match="the provider is down"):
        graph.invoke({"task": "First."}, config)
    assert steps(graph, {"task": "Second."}, config) == ["prepare", *ROUND * 3]
    values = graph.get_state(config).values
    assert (values["task"], len(values["attempts"])) == ("Second.", 3)


def test_invalid_input_fails_in_the_first_step_before_any_model_call() -> None:
    generate = Drafts()
    graph = create_refine_graph(generate, scores(0.5)).compile()
    with pytest.raises(ValueError, match="task must be a non-empty string, got '  '"):
        graph.invoke({"task": "  "})
    with pytest.raises(ValueError, match="target_score"):
        graph.invoke({"task": "Write."}, context={"target_score": 7})
    with pytest.raises(ValueError, match="needs a comparer"):
        graph.invoke({"task": "Write."}, context={"select": "pairwise"})
    reviewed = create_refine_graph(generate, scores(0.5), human_review="final").compile()
    with pytest.raises(ValueError, match="human_review needs a checkpointer"):
        reviewed.invoke({"task": "Write."})
    assert generate.calls == 0


def test_a_reviewed_run_ends_in_the_review_and_finalize_steps() -> None:
    graph = create_refine_graph(Drafts(), scores(0.9), target_score=0.8, human_review="final")
    graph = graph.compile(checkpointer=InMemorySaver())
    config = thread()
    assert steps(graph, {"task": "Write."}, config) == [*ROUND, "__interrupt__"]
    assert steps(graph, Command(resume={"action": "approve"}), config) == ["review", "finalize"]
    assert graph.get_state(config).values["stop_reason"] == "approved"


def test_a_pairwise_run_compares_in_a_finalize_step() -> None:
    asked: list[tuple[str, str]] = []

    def compare(task: str, first: str, second: str) -> str:
        asked.append((first, second))
        return "first"

    graph = create_refine_graph(
        Drafts(), scores(0.5), select="pairwise", comparer=compare, **THREE_ROUNDS
    ).compile()
    assert steps(graph, {"task": "Write."}) == [*ROUND * 3, "finalize"]
    assert asked


def test_a_budget_error_is_raised_by_a_finalize_step_after_the_round_is_saved() -> None:
    generate = Drafts()
    graph = create_refine_graph(
        generate, scores(0.5), budget=Budget(max_calls=1), on_budget_exhausted="raise"
    ).compile(checkpointer=InMemorySaver())
    config = thread()
    with pytest.raises(BudgetExhaustedError):
        graph.invoke({"task": "Write."}, config)
    snapshot = graph.get_state(config)
    assert snapshot.next == ("finalize",)
    with pytest.raises(BudgetExhaustedError):  # a resume raises again, paying nothing
        graph.invoke(None, config)
    assert generate.calls == 1
