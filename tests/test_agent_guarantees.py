"""The agent path holds the graph's guarantees: one executor, one end, one "best".

Each case runs the same script on the graph (`refine` / `arefine`) and on an agent
(`create_agent` + `RefineMiddleware`, `invoke` / `ainvoke`), and checks the same
outcome: an error after paid work carries `.result`; a transient error is retried under
the retry policy (a wrapped one too); the time budget cuts a hung call; a failed call
that a middleware turns into a reply is never an attempt; a resumed run never asks the
model for an answer it already gave.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelFallbackMiddleware, ModelRetryMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import RetryPolicy

from langgraph_refine import Attempt, Budget, Evaluation, RefineMiddleware, arefine, refine
from langgraph_refine._calls._retry import is_transient
from langgraph_refine._loop._select import select_candidates
from langgraph_refine.evaluators import Unjudged, llm_judge
from tests.fakes import AgentModel, ScriptedChatModel, judge_reply, scores

TASK = "Write one line about the sea."
FAST = RetryPolicy(
    initial_interval=0.01, backoff_factor=1.0, max_attempts=3, jitter=False, retry_on=is_transient
)
PATHS = ["graph", "agent"]
MODES = ["sync", "async"]


def run(path: str, mode: str, model: Any, evaluator: Any, **options: Any) -> Any:
    """The loop's `RefineResult` on `path` (graph or agent), run `mode` (sync or async)."""
    options = {"retry_policy": FAST, **options}
    if path == "graph":
        if mode == "sync":
            return refine(model, TASK, evaluator, **options)
        return asyncio.run(arefine(model, TASK, evaluator, **options))
    middleware = RefineMiddleware(evaluator, **options)
    agent = create_agent(model, tools=[], middleware=[middleware])
    request = {"messages": [HumanMessage(TASK)]}
    state = agent.invoke(request) if mode == "sync" else asyncio.run(agent.ainvoke(request))
    return middleware.result(state)


def model_for(path: str, replies: list[Any]) -> ScriptedChatModel:
    return AgentModel(replies=replies) if path == "agent" else ScriptedChatModel(replies=replies)


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- an error after paid work carries `.result` ------------------------------------------


def test_a_provider_error_on_a_refinement_carries_the_result(path: str, mode: str) -> None:
    model = model_for(path, ["draft one", PermissionError("HTTP 401 from the provider")])
    with pytest.raises(PermissionError) as info:
        run(path, mode, model, scores(0.5), max_iterations=3)
    result = info.value.result  # type: ignore[attr-defined]
    assert result.value == "draft one"
    assert result.usage.calls == 2  # the paid draft and the failed call
    assert len(model.calls) == 2  # not retried: a 401 is no transient error


def test_a_judge_error_under_raise_carries_the_pending_answer(path: str, mode: str) -> None:
    def broken(response: str, state: Any) -> float:
        raise Unjudged("the judge could not read the answer")

    model = model_for(path, ["draft one"])
    with pytest.raises(Unjudged) as info:
        run(path, mode, model, broken, on_evaluator_error="raise")
    result = info.value.result  # type: ignore[attr-defined]
    assert [a.response for a in result.attempts] == ["draft one"]


def test_a_bug_in_the_judge_raises_carrying_the_answers_so_far(path: str, mode: str) -> None:
    def buggy(response: str, state: Any) -> float:
        if response == "draft two":
            raise KeyError("score")  # the user's own bug: raised, never unjudged
        return 0.5

    model = model_for(path, ["draft one", "draft two"])
    with pytest.raises(KeyError) as info:
        run(path, mode, model, buggy, max_iterations=2)
    result = info.value.result  # type: ignore[attr-defined]
    assert [a.response for a in result.attempts] == ["draft one", "draft two"]
    assert result.value == "draft one"
    assert "evaluator failed on attempt 1" in " ".join(info.value.__notes__)


# -- transient errors are retried under the policy, wrapped ones too ----------------------


def wrapped_drop() -> Exception:
    """A dropped connection as a client library raises it: wrapped, the cause behind it."""
    try:
        raise ConnectionResetError("connection reset by peer")
    except ConnectionResetError as cause:
        error = RuntimeError("the client failed to read the reply")
        error.__cause__ = cause
        return error


def test_a_dropped_connection_on_a_refinement_is_retried(path: str, mode: str) -> None:
    model = model_for(path, ["draft one", wrapped_drop(), "draft two"])
    result = run(path, mode, model, scores(0.5, 1.0), max_iterations=2)
    assert result.value == "draft two"
    assert result.stop_reason == "target_reached"
    assert len(model.calls) == 3


def test_a_dropped_judge_connection_is_retried_before_it_is_unjudged(path: str, mode: str) -> None:
    judge = ScriptedChatModel(
        replies=[
            ExceptionGroup("pool", [ConnectionError("judge unreachable")]),
            judge_reply(0.9, "PASS"),
        ]
    )
    model = model_for(path, ["draft one"])
    result = run(path, mode, model, llm_judge(judge), on_evaluator_error="skip")
    assert result.score == 0.9 and result.stop_reason == "passed"
    assert len(judge.calls) == 2


# -- the time budget cuts a hung call -----------------------------------------------------


class Hanging(AgentModel):
    """Answers at once, except the calls listed in `hang_on`, which take `seconds`."""

    hang_on: list[int] = [1]
    seconds: float = 5.0

    def _next(self, messages: list[Any]) -> AIMessage:
        if len(self._calls) in self.hang_on:
            time.sleep(self.seconds)
        return super()._next(messages)

    async def _agenerate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        if len(self._calls) in self.hang_on:
            await asyncio.sleep(self.seconds)
        return self._generate(messages)


def test_max_seconds_cuts_a_hung_model_call(path: str, mode: str) -> None:
    model = Hanging(replies=["draft one", "draft two"], hang_on=[1], seconds=4.0)
    started = time.monotonic()
    result = run(path, mode, model, scores(0.5), max_iterations=3, budget=Budget(max_seconds=1.0))
    assert time.monotonic() - started < 3.0
    assert result.stop_reason == "budget_exhausted"
    assert result.value == "draft one"


# -- a failure a middleware turns into a reply is never an attempt -------------------------


def failing_then(replies: list[Any]) -> AgentModel:
    return AgentModel(replies=replies)


@pytest.mark.parametrize("order", ["retry-inside", "retry-outside"])
def test_a_retry_middleware_s_error_reply_is_never_an_attempt(order: str, mode: str) -> None:
    model = failing_then(["draft one", PermissionError("provider down"), PermissionError("down")])
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0.0, jitter=False)
    refine_mw = RefineMiddleware(scores(0.5), max_iterations=3, retry_policy=FAST)
    middleware = [refine_mw, retry] if order == "retry-inside" else [retry, refine_mw]
    agent = create_agent(model, tools=[], middleware=middleware)
    request = {"messages": [HumanMessage(TASK)]}
    state = agent.invoke(request) if mode == "sync" else asyncio.run(agent.ainvoke(request))
    result = refine_mw.result(state)
    assert [a.response for a in result.attempts] == ["draft one"]
    assert result.value == "draft one" and result.stop_reason == "model_error"
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and last.text == "draft one"
    assert not any(
        "failed" in str(m.content) for m in state["messages"] if isinstance(m, AIMessage)
    )


def test_a_retry_middleware_that_raises_keeps_the_result() -> None:
    model = failing_then(["draft one", PermissionError("provider down")])
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0.0, jitter=False, on_failure="error")
    refine_mw = RefineMiddleware(scores(0.5), max_iterations=3, retry_policy=FAST)
    agent = create_agent(model, tools=[], middleware=[retry, refine_mw])
    with pytest.raises(PermissionError) as info:
        agent.invoke({"messages": [HumanMessage(TASK)]})
    assert info.value.result.value == "draft one"  # type: ignore[attr-defined]


def test_a_fallback_model_s_answer_is_an_attempt() -> None:
    primary = failing_then(["draft one", PermissionError("primary down")])
    fallback = AgentModel(replies=["fallback draft"])
    refine_mw = RefineMiddleware(scores(0.5, 0.9), max_iterations=2, retry_policy=FAST)
    agent = create_agent(
        primary, tools=[], middleware=[refine_mw, ModelFallbackMiddleware(fallback)]
    )
    state = agent.invoke({"messages": [HumanMessage(TASK)]})
    result = refine_mw.result(state)
    assert [a.response for a in result.attempts] == ["draft one", "fallback draft"]
    assert state["messages"][-1].text == "fallback draft"


# -- a resumed agent never asks the model again for an answer it gave ---------------------


class Crash(BaseException):
    """Stands for a kill: nothing of the step it leaves is written."""


def test_a_crash_while_judging_resumes_without_a_new_answer(mode: str) -> None:
    crashed: list[str] = []

    def judge_crashing_once(response: str, state: Any) -> float:
        if not crashed:
            crashed.append(response)
            raise Crash
        return 1.0

    model = AgentModel(replies=["draft one", "draft two"])
    refine_mw = RefineMiddleware(judge_crashing_once, max_iterations=2)
    agent = create_agent(model, tools=[], middleware=[refine_mw], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    request = {"messages": [HumanMessage(TASK)]}
    with pytest.raises(Crash):
        agent.invoke(request, config) if mode == "sync" else asyncio.run(
            agent.ainvoke(request, config)
        )
    state = (
        agent.invoke(None, config) if mode == "sync" else asyncio.run(agent.ainvoke(None, config))
    )
    assert len(model.calls) == 1  # the answer was judged again, never asked again
    assert refine_mw.result(state).value == "draft one"


# -- one definition of the best attempt ---------------------------------------------------


def test_pairwise_candidates_follow_the_best_attempt_rule() -> None:
    attempts = [
        Attempt(index=0, response="a", evaluation=Evaluation(score=0.95)),
        Attempt(index=1, response="b", evaluation=Evaluation(score=0.7, verdict="PASS")),
    ]
    assert [a.index for a in select_candidates(attempts, top=3, margin=1.0)] == [1]


def test_a_pairwise_run_that_stopped_on_a_pass_returns_a_passing_answer(path: str) -> None:
    def evaluate(response: str, state: Any) -> Evaluation:
        if response == "draft one":
            return Evaluation(score=0.95, verdict="NEEDS_IMPROVEMENT", feedback="more")
        return Evaluation(score=0.7, verdict="PASS")

    comparer = ScriptedChatModel(replies=["A"])
    model = model_for(path, ["draft one", "draft two"])
    result = run(
        path,
        "sync",
        model,
        evaluate,
        max_iterations=3,
        select="pairwise",
        comparer=comparer,
        target_score=1.0,
    )
    assert result.stop_reason == "passed"
    assert result.value == "draft two" and result.verdict == "PASS"


# -- a pause inside an agent used as the judge --------------------------------------------


def approving_judge_agent() -> Any:
    """A judge agent whose tool needs a person's approval (LangChain's HITL middleware)."""
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    from tests.fakes import call_tool, lookup

    model = AgentModel(replies=[call_tool("the sea", "c1"), judge_reply(0.95, "PASS")])
    return create_agent(
        model, tools=[lookup], middleware=[HumanInTheLoopMiddleware(interrupt_on={"lookup": True})]
    )


def test_a_pause_inside_the_judge_resumes_without_a_new_answer(path: str) -> None:
    from langgraph.types import Command

    from langgraph_refine import create_refine_graph

    model = model_for(path, ["draft one", "draft two"])
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": f"judge-pause-{path}"}}
    if path == "graph":
        graph: Any = create_refine_graph(model, approving_judge_agent(), max_iterations=2)
        runner = graph.compile(checkpointer=saver)
        first: Any = {"task": TASK}
    else:
        refine_mw = RefineMiddleware(approving_judge_agent(), max_iterations=2)
        runner = create_agent(model, tools=[], middleware=[refine_mw], checkpointer=saver)
        first = {"messages": [HumanMessage(TASK)]}
    paused = runner.invoke(first, config)
    assert paused.get("__interrupt__"), "the judge's tool call waits for approval"
    state = runner.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert not state.get("__interrupt__")
    assert len(model.calls) == 1  # the answer judged is the first one, never a new one
    if path == "graph":
        values = runner.get_state(config).values
        assert values["response"] == "draft one" and values["stop_reason"] == "passed"
    else:
        result = refine_mw.result(state)
        assert result.value == "draft one" and result.stop_reason == "passed"
        assert state["messages"][-1].text == "draft one"


# -- provider text is kept whole ------------------------------------------------------------

LONE = chr(0xD800)  # valid in JSON ("\ud800"), not writable as UTF-8


def test_a_lone_surrogate_in_a_reply_becomes_a_replacement_character(path: str, mode: str) -> None:
    judge_says = json.dumps({"verdict": "PASS", "score": 0.95, "feedback": f"fine{LONE}"})
    judge = ScriptedChatModel(replies=[judge_says])
    model = model_for(path, [f"sea{LONE}foam"])
    result = run(path, mode, model, llm_judge(judge))
    assert result.value == "sea\ufffdfoam"
    assert result.feedback == "fine\ufffd"
    result.model_dump_json()  # writable as UTF-8 (a checkpoint, a file, a JSON reply)


class RateLimited(Exception):
    """HTTP 429 whose server asks to wait `seconds` (`Retry-After`)."""

    status_code = 429

    def __init__(self, seconds: float) -> None:
        super().__init__("Error code: 429")
        self.response = type("Response", (), {"headers": {"retry-after": str(seconds)}})()


def test_a_retry_after_longer_than_the_time_left_ends_the_run_at_once(path: str, mode: str) -> None:
    slow_policy = RetryPolicy(max_attempts=3, jitter=False, retry_on=is_transient)
    model = model_for(path, ["draft one", RateLimited(30.0), "draft two"])
    started = time.monotonic()
    result = run(
        path,
        mode,
        model,
        scores(0.5),
        max_iterations=3,
        retry_policy=slow_policy,
        budget=Budget(max_seconds=2.0),
    )
    assert time.monotonic() - started < 1.5  # the 10 s wait (policy cap) was never slept
    assert result.stop_reason == "budget_exhausted" and result.value == "draft one"
    assert len(model.calls) == 2


# -- in LangChain's Deep Agents --------------------------------------------------------------


def test_a_deep_agent_holds_the_same_guarantees() -> None:
    from deepagents import create_deep_agent

    model = AgentModel(replies=["draft one", wrapped_drop(), "draft two"])
    refine_mw = RefineMiddleware(scores(0.5, 1.0), max_iterations=2, retry_policy=FAST)
    agent = create_deep_agent(model=model, middleware=[refine_mw])
    state = agent.invoke({"messages": [HumanMessage(TASK)]})
    result = refine_mw.result(state)
    assert result.value == "draft two" and result.stop_reason == "target_reached"
    assert state["messages"][-1].text == "draft two"  # the best answer is the last message

    failing = AgentModel(replies=["draft one", PermissionError("HTTP 401")])
    refine_mw = RefineMiddleware(scores(0.5), max_iterations=2, retry_policy=FAST)
    agent = create_deep_agent(model=failing, middleware=[refine_mw])
    with pytest.raises(PermissionError) as info:
        agent.invoke({"messages": [HumanMessage(TASK)]})
    assert info.value.result.value == "draft one"  # type: ignore[attr-defined]
