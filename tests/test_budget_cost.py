"""A budget in money: `Budget(max_cost=..., prices=...)` and `usage.cost`.

Costs are checked against `genai-prices`' own numbers for a real model name
(`gpt-4o-mini` at OpenAI), reported by a scripted model through the same LangSmith
params (`ls_provider`, `ls_model_name`) real LangChain models report, and over the real
OpenAI client against a scripted server. Cases ported from pydantic-ai's
`UsageLimits(cost_limit)`: the limit is checked before each request, an unpriced model
is refused, not counted as free.
"""

from __future__ import annotations

import doctest
import math
from typing import Any

import genai_prices
import pytest
from langchain_core.language_models import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import (
    Budget,
    RefineError,
    RefineResult,
    UnknownPriceError,
    Usage,
    arefine,
    create_refine_graph,
    refine,
)
from langgraph_refine._calls import _budget, _prices
from tests.fakes import ScriptedChatModel
from tests.fault_server import FaultServer

TASK = "Write a haiku about money."


class PricedModel(ScriptedChatModel):
    """A scripted model that reports a real model name and provider, as ChatOpenAI does."""

    model: str = "gpt-4o-mini"
    provider: str = "openai"
    input_tokens: int = 1200
    output_tokens: int = 300
    cached_tokens: int = 0

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return LangSmithParams(
            ls_provider=self.provider, ls_model_name=self.model, ls_model_type="chat"
        )

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        reply = super()._next(messages)
        if self.cached_tokens:
            usage = dict(reply.usage_metadata or {})
            usage["input_token_details"] = {"cache_read": self.cached_tokens}
            reply = reply.model_copy(update={"usage_metadata": usage})
        return reply


def genai_cost(input_tokens: int, output_tokens: int, cached: int = 0) -> float:
    usage = genai_prices.Usage(
        input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cached
    )
    price = genai_prices.calc_price(usage, "gpt-4o-mini", provider_id="openai")
    return float(price.total_price)


# -- Budget's new fields -----------------------------------------------------------------


@pytest.mark.parametrize("value", [True, float("nan"), -0.01, "1", float("-inf")])
def test_max_cost_rejects_what_is_no_amount(value: Any) -> None:
    with pytest.raises(ValueError, match=r"Budget\.max_cost must be a number >= 0"):
        Budget(max_cost=value)


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        ({"m": {"input": 1.0}}, "needs 'input' and 'output'"),
        ({"m": {"input": 1.0, "output": 2.0, "cached": 0.5}}, "needs 'input' and 'output'"),
        ({"m": {"input": -1.0, "output": 2.0}}, r"\['input'\] must be a number >= 0"),
        ({"m": {"input": True, "output": 2.0}}, r"\['input'\] must be a number >= 0"),
        ({"m": {"input": float("nan"), "output": 2.0}}, "must be a number >= 0"),
        ({"m": 0.5}, "must be a mapping like"),
        ({"": {"input": 1, "output": 1}}, "must be a mapping like"),
        (["m"], "must map model names to prices"),
    ],
)
def test_prices_are_checked(prices: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Budget(max_cost=1.0, prices=prices)


def test_coerce_takes_max_cost_and_prices_from_a_dict() -> None:
    budget = Budget.coerce(
        {"max_cost": 0.5, "prices": {"local": {"input": 0, "output": 0.25}}}, option="context"
    )
    assert budget is not None
    assert budget.max_cost == 0.5
    assert budget.prices == {"local": _prices.Price(input=0.0, output=0.25)}
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['max_dollars'\]"):
        Budget.coerce({"max_dollars": 1})


def test_max_cost_reached_names_the_limit() -> None:
    assert "max_cost=0.01 reached" in (Budget(max_cost=0.01).exceeded(Usage(cost=0.01)) or "")
    assert Budget(max_cost=0.01).exceeded(Usage(cost=0.009)) is None


def test_unknown_cost_poisons_the_sum() -> None:
    assert (Usage(cost=0.5) + Usage(cost=0.25)).cost == 0.75
    assert (Usage(cost=0.5) + Usage(cost=None)).cost is None
    assert (Usage(cost=None) + Usage()).cost is None


def test_docstring_examples_run() -> None:
    for module in (_budget, _prices):
        failures, _ = doctest.testmod(module)
        assert failures == 0, module.__name__


# -- pricing -----------------------------------------------------------------------------


def test_cost_matches_genai_prices_to_the_cent() -> None:
    model = PricedModel(input_tokens=120_000, output_tokens=30_000)
    result = refine(model, TASK, lambda r, s: 0.1, max_iterations=2, patience=None)
    assert result.usage.calls == 3
    expected = 3 * genai_cost(120_000, 30_000)
    assert result.usage.cost == pytest.approx(expected, rel=1e-9)
    assert round(result.usage.cost, 2) == round(expected, 2)
    assert sum(a.usage.cost or 0 for a in result.attempts) == pytest.approx(expected)


def test_cached_input_tokens_are_priced_as_cached() -> None:
    model = PricedModel(input_tokens=100_000, output_tokens=1_000, cached_tokens=80_000)
    result = refine(model, TASK, lambda r, s: 1.0)
    assert result.usage.cost == pytest.approx(genai_cost(100_000, 1_000, cached=80_000))
    assert result.usage.cost < genai_cost(100_000, 1_000)  # cached input is cheaper


def test_judge_calls_are_priced_too() -> None:
    reply = '{"feedback": "ok", "verdict": "NEEDS_IMPROVEMENT", "score": 0.4}'
    model = PricedModel(replies=["draft", reply], input_tokens=1000, output_tokens=100)
    judge = PricedModel(replies=[reply], input_tokens=2000, output_tokens=50)
    result = refine(model, TASK, judge, max_iterations=0)
    expected = genai_cost(1000, 100) + genai_cost(2000, 50)
    assert result.usage.calls == 2
    assert result.usage.cost == pytest.approx(expected)


def test_max_cost_stops_before_the_call_that_would_start_past_it() -> None:
    model = PricedModel(input_tokens=100_000, output_tokens=10_000)
    per_call = genai_cost(100_000, 10_000)
    result = refine(
        model, TASK, lambda r, s: 0.1, budget=Budget(max_cost=2.5 * per_call), patience=None
    )
    # 0, 1 and 2 calls' cost are below 2.5 calls' worth; after 3 no call starts.
    assert len(model.calls) == 3 == result.usage.calls
    assert result.stop_reason == "budget_exhausted"
    assert result.usage.cost == pytest.approx(3 * per_call)


def test_max_cost_zero_sends_nothing() -> None:
    model = PricedModel()
    result = refine(model, TASK, lambda r, s: 0.1, budget=Budget(max_cost=0))
    assert model.calls == []
    assert result.stop_reason == "budget_exhausted"


def test_an_unpriced_model_is_refused_before_anything_is_sent() -> None:
    model = PricedModel(model="my-local-model", provider="openai")
    with pytest.raises(UnknownPriceError) as info:
        refine(model, TASK, lambda r, s: 0.1, budget=Budget(max_cost=1.0))
    assert model.calls == []
    message = str(info.value)
    assert "'my-local-model'" in message
    assert "prices=" in message and '"my-local-model": {"input"' in message
    assert isinstance(info.value, RefineError)


def test_a_model_that_reports_no_name_is_refused_under_max_cost() -> None:
    model = ScriptedChatModel()  # provider "scripted", no model name
    with pytest.raises(UnknownPriceError, match="reports no model name") as info:
        refine(model, TASK, lambda r, s: 0.1, budget=Budget(max_cost=1.0))
    assert "`model` or `model_name` field" in str(info.value)
    assert model.calls == []


def test_an_unpriced_judge_is_refused_before_its_call() -> None:
    model = PricedModel()
    judge = PricedModel(model="judge-9000", replies=["{}"])
    with pytest.raises(UnknownPriceError, match=r"'judge-9000'.*evaluator"):
        refine(model, TASK, judge, budget=Budget(max_cost=1.0))
    assert len(model.calls) == 1 and judge.calls == []


def test_without_max_cost_an_unknown_price_leaves_cost_unknown() -> None:
    model = PricedModel(model="my-local-model")
    result = refine(model, TASK, lambda r, s: 1.0)
    assert result.usage.cost is None
    assert result.usage.total_tokens == 1500  # tokens are still counted


def test_given_prices_add_a_model() -> None:
    model = PricedModel(model="my-local-model", input_tokens=2_000_000, output_tokens=1_000_000)
    prices = {"my-local-model": {"input": 0.5, "output": 2.0}}
    result = refine(model, TASK, lambda r, s: 1.0, budget=Budget(max_cost=100, prices=prices))
    assert result.usage.cost == pytest.approx(2 * 0.5 + 1 * 2.0)


def test_given_prices_override_the_data_and_price_cached_input() -> None:
    model = PricedModel(input_tokens=1_000_000, output_tokens=0, cached_tokens=500_000)
    prices = {"gpt-4o-mini": {"input": 1.0, "output": 4.0, "cache_read": 0.1}}
    result = refine(model, TASK, lambda r, s: 1.0, budget=Budget(prices=prices))
    assert result.usage.cost == pytest.approx(0.5 * 1.0 + 0.5 * 0.1)


def test_a_plain_callable_is_priced_from_the_reply_it_returns() -> None:
    def generate(state: Any) -> AIMessage:
        return AIMessage(
            "draft",
            usage_metadata={"input_tokens": 1000, "output_tokens": 200, "total_tokens": 1200},
            response_metadata={"model_name": "gpt-4o-mini", "model_provider": "openai"},
        )

    result = refine(generate, TASK, lambda r, s: 1.0, budget=Budget(max_cost=1.0))
    assert result.usage.calls == 1
    assert result.usage.cost == pytest.approx(genai_cost(1000, 200))


def test_a_plain_callable_whose_cost_is_unknown_fails_under_max_cost() -> None:
    calls: list[int] = []

    def generate(state: Any) -> str:
        calls.append(1)
        return "draft"

    with pytest.raises(UnknownPriceError, match="generator made a model call"):
        refine(generate, TASK, lambda r, s: 1.0, budget=Budget(max_cost=1.0))
    assert calls == [1]  # it could not be priced before it ran; it is not run again


def test_per_run_context_sets_max_cost() -> None:
    model = PricedModel(input_tokens=100_000, output_tokens=10_000)
    per_call = genai_cost(100_000, 10_000)
    graph = create_refine_graph(model, lambda r, s: 0.1, patience=None).compile(
        checkpointer=InMemorySaver()
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    graph.invoke({"task": TASK}, config, context={"budget": {"max_cost": 1.5 * per_call}})
    result = RefineResult.from_state(graph.get_state(config).values)
    assert len(model.calls) == 2
    assert result.stop_reason == "budget_exhausted"
    assert result.usage.cost == pytest.approx(2 * per_call)
    with pytest.raises(ValueError, match="max_cost"):
        graph.invoke({"task": TASK}, config, context={"budget": {"max_cost": -1}})


async def test_async_loop_is_priced_and_capped() -> None:
    model = PricedModel(input_tokens=100_000, output_tokens=10_000)
    per_call = genai_cost(100_000, 10_000)
    result = await arefine(
        model, TASK, lambda r, s: 0.1, budget=Budget(max_cost=1.5 * per_call), patience=None
    )
    assert len(model.calls) == 2 == result.usage.calls
    assert result.usage.cost == pytest.approx(2 * per_call)


def test_real_openai_client_is_priced_by_its_model_name() -> None:
    with FaultServer().serve() as server:
        model = ChatOpenAI(
            base_url=server.base_url, api_key="test-key", model="gpt-4o-mini", max_retries=0
        )
        result = refine(model, TASK, None, max_iterations=1, patience=None)
        sent = len(server.received)
    assert sent == 4 == result.usage.calls
    # The scripted server reports 10 prompt and 5 completion tokens per call.
    assert result.usage.cost == pytest.approx(4 * genai_cost(10, 5))
    assert not math.isnan(result.usage.cost)


def test_the_agent_middleware_prices_and_refuses_like_the_graph() -> None:
    from langchain.agents import create_agent

    from langgraph_refine import RefineMiddleware

    model = PricedModel(input_tokens=100_000, output_tokens=10_000)
    per_call = genai_cost(100_000, 10_000)
    middleware = RefineMiddleware(
        lambda r, s: 0.1, patience=None, budget=Budget(max_cost=1.5 * per_call)
    )
    out = create_agent(model, tools=[], middleware=[middleware]).invoke(
        {"messages": [("user", TASK)]}
    )
    result = middleware.result(out)
    assert len(model.calls) == 2 == result.usage.calls
    assert result.usage.cost == pytest.approx(2 * per_call)
    assert result.stop_reason == "budget_exhausted"

    unpriced = PricedModel(model="my-local-model")
    refusing = RefineMiddleware(lambda r, s: 0.1, budget=Budget(max_cost=1.0))
    with pytest.raises(UnknownPriceError, match="'my-local-model'"):
        create_agent(unpriced, tools=[], middleware=[refusing]).invoke(
            {"messages": [("user", TASK)]}
        )
    assert unpriced.calls == []  # refused before anything was sent
