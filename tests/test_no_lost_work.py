"""No lost work: every error a loop raises after its first model call carries the best
result so far in `.result` (its attempts and usage), and the command line shows it
before the error line (`run`, `run --json`, a batch's failed row).
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import RefineResult, arefine, refine
from tests.fakes import ScriptedChatModel, scores
from tests.test_cli_batch import batch_args, read_jsonl, tasks, write_jsonl
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    Reply,
    cli,
    drafts_and_judge,
    is_judge,
    openai_server,
)


class ProviderDown(Exception):
    """A provider's error of a type the loop knows nothing about."""


def failing_generator() -> ScriptedChatModel:
    """Two drafts, then the provider fails for good."""
    return ScriptedChatModel(replies=["draft 0", "draft 1", ProviderDown("provider down")])


def test_a_generator_error_mid_run_carries_the_attempts_and_usage() -> None:
    with pytest.raises(ProviderDown) as caught:
        refine(failing_generator(), "Write.", scores(0.3, 0.5), max_iterations=4)
    result = caught.value.result  # type: ignore[attr-defined]
    assert isinstance(result, RefineResult)
    assert [a.response for a in result.attempts] == ["draft 0", "draft 1"]
    assert result.value == "draft 1" and result.score == 0.5
    # The failed call was sent too: it counts (its reply brought no tokens).
    assert result.usage.calls == 3 and result.usage.total_tokens == 30


def test_a_graph_invoked_directly_raises_with_the_result_too() -> None:
    from langgraph_refine import create_refine_graph

    graph = create_refine_graph(failing_generator(), scores(0.3, 0.5), retry_policy=None)
    with pytest.raises(ProviderDown) as caught:
        graph.compile().invoke({"task": "Write."})
    result = caught.value.result  # type: ignore[attr-defined]
    assert [a.response for a in result.attempts] == ["draft 0", "draft 1"]
    assert result.usage.calls == 3


def test_an_evaluator_error_keeps_the_unjudged_attempt_too() -> None:
    judged: list[str] = []

    def evaluator(response: str, state: Any) -> float:
        judged.append(response)
        if len(judged) == 2:
            raise ProviderDown("judge down")
        return 0.4

    model = ScriptedChatModel(replies=["draft 0", "draft 1"])
    with pytest.raises(ProviderDown) as caught:
        refine(model, "Write.", evaluator)
    result = caught.value.result  # type: ignore[attr-defined]
    assert [a.response for a in result.attempts] == ["draft 0", "draft 1"]
    assert result.attempts[1].evaluation is None  # generated, paid, never judged
    assert result.value == "draft 0" and result.score == 0.4
    assert result.usage.calls == 2


@pytest.mark.parametrize("durable", [False, True])
def test_async_and_durable_runs_carry_the_result_too(durable: bool) -> None:
    saver = InMemorySaver() if durable else None

    async def run() -> None:
        await arefine(failing_generator(), "Write.", scores(0.3, 0.5), checkpointer=saver)

    with pytest.raises(ProviderDown) as caught:
        asyncio.run(run())
    result = caught.value.result  # type: ignore[attr-defined]
    assert [a.response for a in result.attempts] == ["draft 0", "draft 1"]


def test_an_error_before_any_attempt_carries_what_its_calls_cost() -> None:
    model = ScriptedChatModel(replies=[ProviderDown("down from the start")])
    with pytest.raises(ProviderDown) as caught:
        refine(model, "Write.", scores(0.3))
    result = caught.value.result  # type: ignore[attr-defined]
    assert result.attempts == [] and result.value == ""
    assert result.usage.calls == len(model.calls) > 0  # the failed requests were paid
    assert result.stop_reason == "model_error"


# -- the command line ---------------------------------------------------------------------

SCORES = {"draft 0": 0.4, "draft 1": 0.7}


def second_round_fails(body: dict[str, Any]) -> Reply | str:
    """Draft 0 is judged 0.4; the next generation gets an HTTP 400."""
    drafts = second_round_fails.drafts  # type: ignore[attr-defined]
    if not is_judge(body) and second_round_fails.generated >= 1:  # type: ignore[attr-defined]
        return Reply(status=400, error="the provider refused round 1")
    if not is_judge(body):
        second_round_fails.generated += 1  # type: ignore[attr-defined]
    return drafts(body)  # type: ignore[no-any-return]


@pytest.fixture
def failing_server(openai_server: Any) -> Any:
    second_round_fails.generated = 0  # type: ignore[attr-defined]
    second_round_fails.drafts = drafts_and_judge(SCORES)  # type: ignore[attr-defined]
    return openai_server(second_round_fails)


def run_args(server: Any, *extra: str) -> list[str]:
    return ["run", "Write a poem.", "--model", "scripted", "--base-url", server.base_url, *extra]


def test_run_shows_the_best_result_so_far_before_the_error(cli: Any, failing_server: Any) -> None:
    run = cli(*run_args(failing_server))
    assert run.code == 1
    assert "best response so far — score 0.40" in run.out and "the run failed" in run.out
    # Three calls were sent: draft 0, its judgment, and the refused one.
    assert "draft 0" in run.out and "spent: 3 model calls" in run.out
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert lines[-1].startswith("langgraph-refine: ") and "refused round 1" in lines[-1]
    assert "Traceback" not in run.err + run.out


def test_run_json_writes_the_result_with_the_error(cli: Any, failing_server: Any) -> None:
    run = cli(*run_args(failing_server, "--json"))
    assert run.code == 1
    data = json.loads(run.out)
    assert data["value"] == "draft 0" and data["score"] == 0.4
    assert [a["response"] for a in data["attempts"]] == ["draft 0"]
    assert data["usage"]["calls"] == 3
    assert "refused round 1" in data["error"] and "refused round 1" in run.err


def test_a_batch_row_keeps_the_attempts_and_usage(
    cli: Any, failing_server: Any, tmp_path: Path
) -> None:
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(1)), tmp_path / "out.jsonl"
    run = cli(*batch_args(failing_server, src, out))
    assert run.code == 1
    (row,) = read_jsonl(out)
    assert "refused round 1" in row["error"]
    assert [a["response"] for a in row["attempts"]] == ["draft 0"]
    assert row["usage"]["calls"] == 3 and row["score"] == 0.4


# -- an unpriced rung under max_cost is refused before the first call ---------------------


def ladder_models(server: Any) -> list[Any]:
    from langchain_openai import ChatOpenAI

    return [
        ChatOpenAI(model=name, base_url=server.base_url, api_key="unused", max_retries=0)
        for name in ("cheap", "strong")
    ]


def test_an_unpriced_rung_is_refused_before_the_first_call(openai_server: Any) -> None:
    from langgraph_refine import Budget, UnknownPriceError

    server = openai_server(drafts_and_judge(SCORES))
    budget = Budget(max_cost=1.0, prices={"cheap": {"input": 1, "output": 1}})
    with pytest.raises(UnknownPriceError) as caught:
        refine(ladder_models(server), "Write a poem.", budget=budget)
    message = str(caught.value)
    assert message.startswith("generator[1] of the ladder (rung 1): no price is known")
    assert "'strong'" in message and "--price strong=0.15,0.6" in message
    assert server.requests == []
    priced = Budget(
        max_cost=1.0,
        prices={"cheap": {"input": 1, "output": 1}, "strong": {"input": 2, "output": 2}},
    )
    assert refine(ladder_models(server), "Write a poem.", budget=priced).usage.cost


def test_the_cli_refuses_an_unpriced_rung_before_the_first_call(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    from tests.test_cli_helpers import assert_one_line_error

    server = openai_server(drafts_and_judge(SCORES))
    ladder = ["--model", "cheap", "--model", "strong", "--base-url", server.base_url]
    money = ["--max-cost", "0.01", "--price", "cheap=1,1"]
    run = cli("run", "Write a poem.", *ladder, *money, "--json")
    assert_one_line_error(run, "generator[1] of the ladder", "--price strong=")
    assert run.out == "" and server.requests == []
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(1)), tmp_path / "out.jsonl"
    batch = cli("batch", str(src), "--out", str(out), *ladder, *money)
    assert batch.code == 1 and server.requests == []
    (row,) = read_jsonl(out)
    assert "generator[1] of the ladder" in row["error"]


# -- a comparer that fails: the choice falls back to the score ----------------------------


def dead_comparer(task: str, first: str, second: str) -> str:
    raise TimeoutError("the comparer's endpoint timed out")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async", "async-budget"])
def test_a_failing_comparer_falls_back_to_the_score(mode: str) -> None:
    from langgraph_refine import Budget
    from tests.test_select import TASK, evaluate, five_attempts, generate

    options = five_attempts(select="pairwise", comparer=dead_comparer)
    if mode == "async-budget":  # the comparisons run one after another
        options["budget"] = Budget(max_calls=100)
    if mode == "sync":
        result = refine(generate, TASK, evaluate, **options)
    else:
        result = asyncio.run(arefine(generate, TASK, evaluate, **options))
    assert result.value == "v1" and result.best_index == 1 and len(result.attempts) == 5
    selection = result.metadata["selection"]
    assert selection["method"] == "score" and selection["chosen"] == 1
    assert selection["note"] == (
        "the comparer failed (TimeoutError: the comparer's endpoint timed out); chosen by score"
    )


def test_cli_a_dead_comparer_keeps_the_run(cli: Any, openai_server: Any) -> None:
    from tests.test_cli_helpers import last_user_text

    drafts = drafts_and_judge(SCORES)

    def script(body: dict[str, Any]) -> Reply | str:
        if "Compare response A" in last_user_text(body):
            return Reply(status=400, error="comparisons are switched off")
        return drafts(body)

    server = openai_server(script)
    run = cli(*run_args(server, "--select", "pairwise", "--max-iterations", "2", "--json"))
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["value"] == "draft 1" and data["selection"]["method"] == "score"
    assert "the comparer failed" in data["selection"]["note"]
    assert "comparisons are switched off" in data["selection"]["note"]
