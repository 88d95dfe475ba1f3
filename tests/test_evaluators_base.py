"""The evaluator protocol: direct calls, calling maybe-async functions, import layering."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import threading
from typing import Any

import pytest

from langgraph_refine import Evaluation, evaluators
from langgraph_refine.evaluators import CallableEvaluator, combine, reward_model, word_count
from langgraph_refine.evaluators._base import BaseEvaluator, acall, call_sync, is_async_callable
from langgraph_refine.evaluators._combine import as_evaluator

STATE = {"task": "Write about owls."}


def sync_score(response: str, state: Any) -> float:
    return 0.25


async def async_score(response: str, state: Any) -> Evaluation:
    await asyncio.sleep(0)
    return Evaluation(score=0.75, feedback="async")


class AsyncCallable:
    async def __call__(self, response: str, state: Any) -> float:
        return 0.5


# -- calling an evaluator directly ------------------------------------------------------------


def test_a_sync_callable_evaluator_called_directly_returns_an_evaluation() -> None:
    result = CallableEvaluator(sync_score)("text", STATE)
    assert isinstance(result, Evaluation)
    assert result.score == 0.25


@pytest.mark.parametrize("fn", [async_score, AsyncCallable()], ids=["function", "object"])
async def test_an_async_callable_evaluator_called_directly_returns_an_awaitable(fn: Any) -> None:
    ev = as_evaluator(fn)
    assert ev.is_async
    pending = ev("text", STATE)
    assert inspect.isawaitable(pending)
    result = await pending
    assert isinstance(result, Evaluation)
    assert result.score in (0.75, 0.5)


async def test_an_async_reward_model_called_directly_returns_an_awaitable() -> None:
    async def remote(task: str, response: str) -> float:
        await asyncio.sleep(0)
        return 8.0

    pending = reward_model(remote, low=0, high=10)("text", STATE)
    assert inspect.isawaitable(pending)
    result = await pending
    assert result.score == pytest.approx(0.8)


def test_a_sync_reward_model_called_directly_returns_an_evaluation() -> None:
    result = reward_model(lambda task, response: 0.4)("text", STATE)
    assert isinstance(result, Evaluation)
    assert result.score == 0.4


async def test_a_combination_with_an_async_part_is_async() -> None:
    sync_only = combine(sync_score, word_count(1, 5))
    assert not sync_only.is_async
    assert isinstance(sync_only("two words", STATE), Evaluation)
    mixed = combine(sync_score, async_score)
    assert mixed.is_async
    pending = mixed("text", STATE)
    assert inspect.isawaitable(pending)
    assert (await pending).score == pytest.approx(0.5)


def test_ready_evaluators_called_directly_return_an_evaluation() -> None:
    result = word_count(1, 3)("one two", STATE)
    assert isinstance(result, Evaluation)
    assert result.score == 1.0


# -- acall and call_sync ----------------------------------------------------------------------


async def test_acall_awaits_async_functions_and_threads_sync_ones() -> None:
    loop_thread: list[int] = []

    def where(x: int) -> int:
        loop_thread.append(threading.get_ident())
        return x + 1

    async def twice(x: int) -> int:
        return x * 2

    assert await acall(where, 1) == 2
    assert loop_thread[0] != threading.get_ident()  # ran in a worker thread
    assert await acall(twice, 4) == 8
    assert await acall(AsyncCallable(), "r", {}) == 0.5


class _Where(BaseEvaluator):
    """Records the thread that runs `evaluate`."""

    def __init__(self, inline: bool) -> None:
        self.inline = inline
        self.threads: list[int] = []

    def evaluate(self, response: str, state: Any) -> Evaluation:
        self.threads.append(threading.get_ident())
        return Evaluation(score=0.5)


@pytest.mark.parametrize("inline", [True, False])
async def test_aevaluate_runs_an_inline_check_in_the_callers_thread_and_others_in_a_worker(
    inline: bool,
) -> None:
    check = _Where(inline)
    assert (await check.aevaluate("text", STATE)).score == 0.5
    assert (check.threads[0] == threading.get_ident()) is inline


def test_the_quick_ready_checks_are_inline_and_the_waiting_ones_are_not() -> None:
    quick = [
        word_count(1, 3),
        evaluators.contains_all(["owl"]),
        evaluators.matches_regex(r"\d"),
        evaluators.json_schema({"type": "object"}),
        evaluators.no_repetition(),
    ]
    assert all(check.inline for check in quick)
    assert combine(*quick).inline
    # a user's sync function may wait (HTTP, files): it keeps its worker thread
    assert not CallableEvaluator(sync_score).inline
    assert not combine(word_count(1, 3), sync_score).inline
    assert not evaluators.python_tests("def test_x():\n    assert True\n").inline


async def test_a_combination_of_inline_checks_runs_each_in_the_callers_thread() -> None:
    first, second = _Where(inline=True), _Where(inline=True)
    result = await combine(first, second).aevaluate("text", STATE)
    assert result.score == 0.5
    assert first.threads == second.threads == [threading.get_ident()]
    waiting = _Where(inline=False)
    await combine(first, waiting).aevaluate("text", STATE)
    assert waiting.threads[0] != threading.get_ident()


async def test_acall_awaits_an_awaitable_returned_by_a_sync_function() -> None:
    async def inner() -> str:
        return "done"

    assert await acall(lambda: inner()) == "done"


def test_call_sync_refuses_async_functions_by_name() -> None:
    with pytest.raises(TypeError, match=r"^the scorer is async; run the loop with ainvoke"):
        call_sync(async_score, "r", {}, what="scorer")


def test_call_sync_refuses_and_closes_a_returned_awaitable() -> None:
    coroutine = async_score("r", {})
    with pytest.raises(TypeError, match=r"^the scorer returned an awaitable"):
        call_sync(lambda: coroutine, what="scorer")
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED


def test_call_sync_passes_arguments_through() -> None:
    assert call_sync(max, 2, 7, what="max") == 7
    assert not is_async_callable(max)


# -- layering -----------------------------------------------------------------------------------


def _package_modules() -> list[str]:
    import pkgutil

    import langgraph_refine

    return sorted(
        info.name
        for info in pkgutil.walk_packages(langgraph_refine.__path__, "langgraph_refine.")
        if not info.name.endswith("__main__")
    )


# Importing `pkg.x.y` first runs `pkg/__init__.py` to its end before `y`, so every module
# the package's `__init__` imports is imported first exactly as the package is. One fresh
# interpreter imports the package; each module left over (the command line, the server,
# what loads lazily) is then imported first in a process forked from it. (One interpreter
# per module took a second and a half apiece, 100 s for the suite.)
IMPORT_EACH_FIRST = r"""
import os, sys, traceback

def first(module):
    try:
        __import__(module)
    except BaseException:
        sys.stderr.write(f"--- import {module} first:\n{traceback.format_exc()}")
        return False
    return True

modules = sys.argv[1:]
if not first(modules[0].split(".")[0]):
    sys.exit(1)
failed = 0
for module in [m for m in modules if m not in sys.modules]:
    pid = os.fork()
    if pid == 0:
        ok = first(module)
        sys.stderr.flush()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    failed += status != 0
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow
def test_each_module_imports_first_in_a_fresh_interpreter() -> None:
    # An import cycle shows up as an ImportError when the cycle is entered from one side.
    modules = _package_modules()
    assert "langgraph_refine._loop._graph" in modules and len(modules) > 40
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH_FIRST, *modules],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_an_import_cycle_fails_the_import_first_check(tmp_path: Any) -> None:
    # The check itself: a package whose two modules import each other's names fails it.
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic.b import B\nA = 1\n")
    (package / "b.py").write_text("from cyclic.a import A\nB = 2\n")
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH_FIRST, "cyclic", "cyclic.a", "cyclic.b"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "import cyclic.a first" in done.stderr and "ImportError" in done.stderr


def test_as_evaluator_imports_nothing_when_called() -> None:
    assert "import" not in inspect.getsource(as_evaluator)
