"""A loop inside a loop spends from the outermost budget.

The outer loop's generator (a plain callable, an async one, or a `create_agent` agent
whose tool refines) runs an inner `refine`. The inner loop's calls count in the outer
`usage`, the outer budget stops the inner loop (which returns its best so far to the
outer generator), an inner budget can only be tighter, and a budget stop logs no error
line from LangChain's callback manager.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from langgraph_refine import Budget, RefineResult, UnknownPriceError, arefine, refine
from tests.fakes import AgentModel, ScriptedChatModel, scores

ERROR_LINE = "callback"  # LangChain's "Error in BudgetMeter.on_chat_model_start callback: ..."
INNER = {"max_iterations": 3, "patience": None}  # 4 generations when nothing stops it early
OUTER = {"max_iterations": 4, "patience": None}


def no_callback_errors(caplog: pytest.LogCaptureFixture) -> None:
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [line for line in lines if ERROR_LINE in line], lines


class Inner:
    """The outer generator: each call runs an inner `refine` and answers with its value."""

    def __init__(self, generator: Any, evaluator: Any = None, **options: Any) -> None:
        self.generator = generator
        self.evaluator = evaluator or scores(0.2)  # never passes: the inner loop runs on
        self.options = {**INNER, **options}
        self.results: list[RefineResult] = []

    def __call__(self, state: Any) -> str:
        result = refine(self.generator, "inner task", self.evaluator, **self.options)
        self.results.append(result)
        return f"outer {len(state['attempts'])}: {result.value}"

    async def acall(self, state: Any) -> str:
        result = await arefine(self.generator, "inner task", self.evaluator, **self.options)
        self.results.append(result)
        return f"outer {len(state['attempts'])}: {result.value}"


def counting() -> Any:
    """A plain-callable inner generator that counts its invocations."""
    made: list[int] = []

    def write(state: Any) -> str:
        made.append(len(state["attempts"]))
        return f"inner {len(state['attempts'])}"

    write.made = made  # type: ignore[attr-defined]
    return write


def stops_inner_and_outer(outer: RefineResult, inner: Inner) -> None:
    """Outer max_calls=6 over inner loops of up to 4 calls: 4, then 2 stopped by the budget."""
    assert outer.stop_reason == "budget_exhausted"
    assert outer.usage.calls == 6
    assert len(outer.attempts) == 2
    assert [len(r.attempts) for r in inner.results] == [4, 2]
    assert [r.stop_reason for r in inner.results] == ["max_iterations", "budget_exhausted"]
    assert [r.usage.calls for r in inner.results] == [4, 2]
    # The inner loop stopped by the outer budget handed its best so far to the outer one.
    assert outer.attempts[1].response == f"outer 1: {inner.results[1].value}"
    assert outer.attempts[0].usage.calls == 4 and outer.attempts[1].usage.calls == 2


def test_plain_callables_inside_a_loop_spend_the_outer_budget() -> None:
    write = counting()
    inner = Inner(write)
    outer = refine(inner, "outer task", scores(0.1), budget=Budget(max_calls=6), **OUTER)
    stops_inner_and_outer(outer, inner)
    assert len(write.made) == 6  # not one invocation past the outer limit


async def test_async_loops_inside_a_loop_spend_the_outer_budget() -> None:
    write = counting()
    inner = Inner(write)
    outer = await arefine(
        inner.acall, "outer task", scores(0.1), budget=Budget(max_calls=6), **OUTER
    )
    stops_inner_and_outer(outer, inner)
    assert len(write.made) == 6


def test_an_inner_budget_can_only_be_tighter() -> None:
    inner = Inner(counting(), budget=Budget(max_calls=100))  # looser: the outer one wins
    outer = refine(inner, "outer task", scores(0.1), budget=Budget(max_calls=6), **OUTER)
    stops_inner_and_outer(outer, inner)
    tight = Inner(counting(), budget=Budget(max_calls=2))  # tighter: it stops each inner run
    outer = refine(tight, "outer task", scores(0.1), budget=Budget(max_calls=5), **OUTER)
    assert [len(r.attempts) for r in tight.results] == [2, 2, 1]
    assert [r.stop_reason for r in tight.results] == ["budget_exhausted"] * 3
    assert outer.usage.calls == 5 and outer.stop_reason == "budget_exhausted"


def test_an_unlimited_outer_loop_still_counts_the_inner_calls() -> None:
    inner = Inner(counting())
    outer = refine(inner, "outer task", scores(0.1), max_iterations=1, patience=None)
    assert outer.usage.calls == 8  # two inner loops of four calls
    assert [r.usage.calls for r in inner.results] == [4, 4]


def test_chat_models_inside_a_loop_stop_without_an_error_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedChatModel(replies=["draft"])
    grader = ScriptedChatModel(replies=["0.2"])

    def grade(response: str, state: Any) -> float:
        grader.invoke(f"Grade: {response}")  # refused at its start once the outer budget is spent
        return 0.2

    inner = Inner(model, grade)
    with caplog.at_level(logging.DEBUG):
        outer = refine(inner, "outer task", scores(0.1), budget=Budget(max_calls=5), **OUTER)
    # Inner loop: generate, grade, generate, grade, generate; the third grade is refused.
    assert len(model.calls) == 3 and len(grader.calls) == 2
    [result] = inner.results
    assert result.stop_reason == "budget_exhausted"
    assert [a.evaluation is not None for a in result.attempts] == [True, True, False]
    assert outer.usage.calls == 5
    assert outer.usage.total_tokens == result.usage.total_tokens > 0  # the inner tokens too
    assert outer.stop_reason == "budget_exhausted"
    no_callback_errors(caplog)


def test_a_budget_stop_at_a_model_start_logs_no_error_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    grader = ScriptedChatModel(replies=["0.3"])

    def grade(response: str, state: Any) -> float:
        grader.invoke("grade")
        return 0.2

    with caplog.at_level(logging.DEBUG):
        result = refine(lambda s: "draft", "t", grade, budget=Budget(max_calls=3), patience=None)
    assert result.stop_reason == "budget_exhausted" and len(grader.calls) == 1
    no_callback_errors(caplog)


def test_an_unknown_price_raises_without_an_error_line(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel(replies=["draft"])
    with caplog.at_level(logging.DEBUG), pytest.raises(UnknownPriceError):
        refine(model, "t", scores(0.2), budget=Budget(max_cost=1.0))
    assert model.calls == []  # refused before it was sent
    no_callback_errors(caplog)
    inner = Inner(ScriptedChatModel(replies=["draft"]))  # the outer budget prices inner calls
    with caplog.at_level(logging.DEBUG), pytest.raises(UnknownPriceError):
        refine(inner, "outer task", scores(0.1), budget=Budget(max_cost=1.0), **OUTER)
    no_callback_errors(caplog)


def polish_call(topic: str, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "polish", "args": {"topic": topic}, "id": call_id}])


def test_a_loop_in_an_agents_tool_inside_a_loop(caplog: pytest.LogCaptureFixture) -> None:
    write = counting()
    results: list[RefineResult] = []

    @tool
    def polish(topic: str) -> str:
        """Polish a note about a topic."""
        result = refine(write, f"Polish {topic}.", scores(0.2), **INNER)
        results.append(result)
        return result.value

    model = AgentModel(replies=[polish_call("a", "c1"), "answer 0", polish_call("b", "c2"), "x"])
    agent = create_agent(model, tools=[polish])
    with caplog.at_level(logging.DEBUG):
        outer = refine(agent, "Write a note.", scores(0.1), budget=Budget(max_calls=8), **OUTER)
    # Generation 0: agent call 1, the tool's loop (4 calls), agent call 6. Generation 1:
    # agent call 7, the tool's loop (call 8, then stopped by the outer budget), and the
    # agent's next call refused at its start.
    assert [len(r.attempts) for r in results] == [4, 1]
    assert [r.stop_reason for r in results] == ["max_iterations", "budget_exhausted"]
    assert len(model.calls) == 3
    assert outer.usage.calls == 8
    assert outer.stop_reason == "budget_exhausted"
    assert [a.response for a in outer.attempts] == ["answer 0"]
    no_callback_errors(caplog)


def test_an_agent_refining_with_the_middleware_inside_a_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from langgraph_refine import RefineMiddleware

    model = AgentModel(replies=["a", "b", "c", "d"])
    middleware = RefineMiddleware(scores(0.2), max_iterations=3, patience=None)
    agent = create_agent(model, tools=[], middleware=[middleware])
    with caplog.at_level(logging.DEBUG):
        outer = refine(agent, "Write a note.", scores(0.1), budget=Budget(max_calls=3), **OUTER)
    # The agent's loop answers a, b, c; its fourth call is refused by the outer budget, and
    # it ends with its best answer so far, which becomes the outer loop's attempt 0.
    assert len(model.calls) == 3
    assert outer.usage.calls == 3
    assert outer.stop_reason == "budget_exhausted"
    assert [a.response for a in outer.attempts] == ["a"]
    no_callback_errors(caplog)


async def test_an_async_refusal_inside_an_agent_logs_no_error_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = AgentModel(replies=[polish_call("a", "c1"), "answer 0", polish_call("b", "c2"), "x"])

    @tool
    async def polish(topic: str) -> str:
        """Polish a note about a topic."""
        return (await arefine(counting(), f"Polish {topic}.", scores(0.2), **INNER)).value

    agent = create_agent(model, tools=[polish])
    with caplog.at_level(logging.DEBUG):
        outer = await arefine(
            agent, "Write a note.", scores(0.1), budget=Budget(max_calls=8), **OUTER
        )
    assert len(model.calls) == 3  # the agent's fourth call is refused at its start
    assert outer.usage.calls == 8 and outer.stop_reason == "budget_exhausted"
    no_callback_errors(caplog)
