"""`reward_model`: linear mapping, clamping, sync and async reward functions, bad input."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from langgraph_refine import arefine, refine
from langgraph_refine.evaluators import reward_model

STATE = {"task": "Say hi"}


@pytest.mark.parametrize(
    ("reward", "expected", "clamped"),
    [
        (-5, 0.0, False),  # low
        (0, 0.5, False),
        (2.5, 0.75, False),
        (5, 1.0, False),  # high
        (7, 1.0, True),  # above: clamped
        (-9, 0.0, True),  # below: clamped
    ],
)
def test_linear_mapping_and_clamping(reward: float, expected: float, clamped: bool) -> None:
    result = reward_model(lambda task, response: reward, low=-5, high=5).evaluate("r", STATE)
    assert result.score == pytest.approx(expected)
    assert result.details == {"reward": reward, "low": -5.0, "high": 5.0, "clamped": clamped}
    assert f"gave {reward:g} on a scale from -5 to 5" in result.feedback


def test_default_range_is_zero_to_one() -> None:
    assert reward_model(lambda t, r: 0.3).evaluate("r", STATE).score == pytest.approx(0.3)


def test_receives_task_and_response() -> None:
    seen: list[tuple[str, str]] = []

    def fn(task: str, response: str) -> float:
        seen.append((task, response))
        return 1.0

    reward_model(fn).evaluate("the response", STATE)
    assert seen == [("Say hi", "the response")]


def test_named_after_the_function_and_calls_no_model() -> None:
    def helpfulness(task: str, response: str) -> float:
        return 0.0

    ev = reward_model(helpfulness)
    assert ev.name == "helpfulness"
    assert ev.calls_model is False


async def test_async_reward_function() -> None:
    async def remote(task: str, response: str) -> float:
        await asyncio.sleep(0)
        return 80.0

    result = await reward_model(remote, low=0, high=100).aevaluate("r", STATE)
    assert result.score == pytest.approx(0.8)


async def test_sync_function_on_the_async_path() -> None:
    result = await reward_model(lambda t, r: 3, low=0, high=4).aevaluate("r", STATE)
    assert result.score == 0.75


def test_async_function_on_the_sync_path_says_what_to_do() -> None:
    async def remote(task: str, response: str) -> float:
        return 1.0

    with pytest.raises(TypeError, match=r"is async; run the loop with ainvoke\(\) or arefine\(\)"):
        reward_model(remote).evaluate("r", STATE)


def test_sync_function_returning_an_awaitable_on_the_sync_path() -> None:
    async def inner() -> float:
        return 1.0

    with pytest.raises(TypeError, match="returned an awaitable"):
        reward_model(lambda t, r: inner()).evaluate("r", STATE)


@pytest.mark.parametrize("value", ["0.5", None, True, [1.0]])
def test_non_numeric_rewards_are_rejected(value: Any) -> None:
    with pytest.raises(TypeError, match="return a number"):
        reward_model(lambda t, r: value).evaluate("r", STATE)


def test_nan_reward_is_rejected() -> None:
    with pytest.raises(ValueError, match="returned NaN"):
        reward_model(lambda t, r: math.nan).evaluate("r", STATE)


def test_infinite_rewards_clamp() -> None:
    assert reward_model(lambda t, r: math.inf).evaluate("r", STATE).score == 1.0
    assert reward_model(lambda t, r: -math.inf).evaluate("r", STATE).score == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"low": 1.0, "high": 1.0}, r"low \(1.0\) must be less than high \(1.0\)"),
        ({"low": 2, "high": 1}, r"low \(2\) must be less than high \(1\)"),
        ({"low": math.nan}, "low must be a finite number, got nan"),
        ({"high": math.inf}, "high must be a finite number, got inf"),
        ({"low": "0"}, "low must be a finite number"),
        ({"high": True}, "high must be a finite number"),
    ],
)
def test_bad_bounds(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reward_model(lambda t, r: 0.0, **kwargs)


def test_fn_must_be_callable() -> None:
    with pytest.raises(ValueError, match=r"fn must be a callable \(task, response\) -> float"):
        reward_model(0.5)  # type: ignore[arg-type]


def test_in_a_loop() -> None:
    drafts = iter(["hi", "hello there", "hello there, friend"])
    result = refine(
        lambda state: next(drafts),
        "Greet",
        reward_model(lambda task, response: len(response), low=0, high=19),
        target_score=1.0,
        max_iterations=5,
    )
    assert result.score_history == pytest.approx([2 / 19, 11 / 19, 1.0])
    assert result.stop_reason == "target_reached"


async def test_async_reward_in_an_async_loop() -> None:
    async def judge(task: str, response: str) -> float:
        return 10.0 if "please" in response else 2.0

    drafts = iter(["give", "please give"])
    result = await arefine(
        lambda state: next(drafts), "Ask nicely", reward_model(judge, low=0, high=10)
    )
    assert result.score_history == [0.2, 1.0]
