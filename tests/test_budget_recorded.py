"""The budget on a real model (SmolLM2 on llama.cpp, recorded in cassettes/test_budget_recorded).

Every request the cassette holds is a model call the loop made: `usage.calls` must equal
their number, the tokens must be the ones llama.cpp reported, and the cost must be those
tokens at the given price. `max_cost` stops the loop before the call that would start
past it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from langgraph_refine import Budget, refine
from tests import recording

TASK = "Write a haiku about rain."
PRICE = {"input": 0.02, "output": 0.05}
"""A made-up price for SmolLM2 in USD per million tokens (the price data has none)."""


def recorded_usage(cassette: Any) -> list[tuple[int, int]]:
    """(prompt, completion) tokens of every response the cassette holds, in order."""
    usages = []
    for response in cassette.responses:
        usage = json.loads(response["body"]["string"])["usage"]
        usages.append((usage["prompt_tokens"], usage["completion_tokens"]))
    return usages


def grader(model: Any) -> Any:
    """An evaluator that asks the model for a rating (a model call of its own), then scores
    low, so the loop runs its rounds whatever the small model answers."""

    def grade(response: str, state: Any) -> float:
        model.invoke(f"Rate this haiku from 1 to 10: {response}")
        return 0.1

    return grade


def priced(usages: list[tuple[int, int]]) -> float:
    return sum(p * PRICE["input"] + c * PRICE["output"] for p, c in usages) / 1_000_000


@pytest.mark.vcr
def test_real_calls_are_counted_and_priced(record_mode: str, vcr: Any) -> None:
    model = recording.recorded_model(record_mode, temperature=0.0, max_tokens=60)
    budget = Budget(prices={"smollm2": PRICE})
    result = refine(model, TASK, grader(model), max_iterations=1, patience=None, budget=budget)
    usages = recorded_usage(vcr)
    assert result.usage.calls == len(usages) == 4  # two rounds: generate and grade each
    assert result.usage.input_tokens == sum(p for p, _ in usages)
    assert result.usage.output_tokens == sum(c for _, c in usages)
    assert result.usage.cost == pytest.approx(priced(usages))


@pytest.mark.vcr
def test_max_cost_stops_a_real_loop_before_the_call_past_it(record_mode: str, vcr: Any) -> None:
    model = recording.recorded_model(record_mode, temperature=0.0, max_tokens=60)
    max_cost = 0.00001  # a few calls' worth at the made-up price
    budget = Budget(max_cost=max_cost, prices={"smollm2": PRICE})
    result = refine(model, TASK, grader(model), max_iterations=4, patience=None, budget=budget)
    usages = recorded_usage(vcr)
    assert result.stop_reason == "budget_exhausted"
    assert result.usage.calls == len(usages)
    assert priced(usages[:-1]) < max_cost <= priced(usages)  # the last call started below it
    assert result.usage.cost == pytest.approx(priced(usages))
