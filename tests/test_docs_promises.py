"""What the docs promise of the newest features: prices keyed `provider:model`, a batch
whose lines name their own models, the strategy record's store, labels of members that
gave no feedback, a ladder that names one model twice, tracing a failed round, and the
smaller surfaces (the result box, ignored options, batch keys).
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langgraph_refine import Budget, refine
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    cli,
    drafts_and_judge,
    openai_server,
)

SCORES = {"draft 0": 0.4, "draft 1": 0.7, "draft 2": 0.95}


def chat(server: Any, name: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=name, base_url=server.base_url, api_key="unused", max_retries=0)


# -- prices keyed provider:model ----------------------------------------------------------


def test_prices_keyed_provider_and_model_price_the_calls(openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    keyed = Budget(max_cost=1.0, prices={"openai:smollm2": {"input": 1.0, "output": 2.0}})
    result = refine(chat(server, "smollm2"), "Write a poem.", budget=keyed)
    usage = result.usage
    assert usage.cost == pytest.approx((usage.input_tokens + usage.output_tokens * 2.0) / 1e6)
    # The provider-qualified price wins over the bare name's; another provider's is no price.
    both = {"openai:smollm2": {"input": 1.0, "output": 2.0}, "smollm2": {"input": 9, "output": 9}}
    again = refine(chat(server, "smollm2"), "Write a poem.", budget=Budget(prices=both))
    usage = again.usage
    assert usage.cost == pytest.approx((usage.input_tokens + usage.output_tokens * 2.0) / 1e6)
    other = Budget(prices={"anthropic:smollm2": {"input": 1.0, "output": 2.0}})
    assert refine(chat(server, "smollm2"), "Write a poem.", budget=other).usage.cost is None


def test_cli_price_keyed_provider_and_model(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(
        "run", "Write a poem.", "--model", "smollm2", "--base-url", server.base_url,
        "--max-cost", "0.01", "--price", "openai:smollm2=0.02,0.05", "--json",
    )  # fmt: skip
    assert run.code == 0, run.err
    data = run.json()
    assert data["usage"]["cost"] > 0 and list(data["models"]) == ["openai:smollm2"]


# -- a batch whose every line names its model needs no --model ----------------------------


def test_batch_lines_that_name_their_models_need_no_model_option(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    from tests.test_cli_ladder import by_model

    server = openai_server(by_model)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": "strong", "task": "one model", "model": "strong"},
        {"id": "ladder", "task": "its own", "model": ["cheap", "strong"]},
    ]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = cli("batch", src, "--out", out, "--base-url", server.base_url, "-c", "1")
    assert run.code == 0, run.err
    rows = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert [a["model"] for a in rows["strong"]["attempts"]] == ["openai:strong"]
    assert [a["model"] for a in rows["ladder"]["attempts"]][-1] == "openai:strong"
    # The judge runs on each line's first model (as `run` judges with its first rung).
    assert {r["model"] for r in server.judge_requests} == {"strong", "cheap"}
    # A line that relies on --model still needs one, before any output.
    src.write_text(json.dumps({"id": "plain", "task": "no model"}) + "\n")
    plain = cli("batch", src, "--out", tmp_path / "other.jsonl", "--base-url", server.base_url)
    assert plain.code == 2 and "no model given" in plain.err  # a usage error
    assert not (tmp_path / "other.jsonl").exists()


# -- strategy_records needs a LangGraph store ---------------------------------------------


@pytest.mark.parametrize("store", [None, "record.sqlite", Path("record.sqlite"), {}])
def test_strategy_records_names_what_it_needs(store: Any) -> None:
    import asyncio

    from langgraph_refine import astrategy_records, strategy_records

    with pytest.raises(ValueError, match="strategy_records needs a LangGraph store") as caught:
        strategy_records(store)
    assert type(store).__name__ in str(caught.value)
    if isinstance(store, str | Path):
        assert "--store" in str(caught.value)
    with pytest.raises(ValueError, match="needs a LangGraph store"):
        asyncio.run(astrategy_records(store))


# -- a ladder names each rung apart -------------------------------------------------------


def test_the_same_model_spelled_two_ways_is_refused(openai_server: Any, cli: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    with pytest.raises(ValueError, match=r"generator\[0\] and generator\[1\] of the ladder"):
        refine([chat(server, "smollm2"), chat(server, "smollm2")], "Write a poem.")
    run = cli(
        "run", "Write a poem.", "--model", "smollm2", "--model", "openai:smollm2",
        "--base-url", server.base_url,
    )  # fmt: skip
    assert run.code == 1 and "both the model 'openai:smollm2'" in run.err
    assert server.requests == []


def test_a_run_context_ladder_of_one_model_spelled_two_ways_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langgraph_refine._calls._run_models import check_run_models

    monkeypatch.setenv("OPENAI_API_KEY", "unused")  # the models are built, never called
    with pytest.raises(ValueError, match="name the model 'openai:smollm2' twice"):
        check_run_models(["smollm2", "openai:smollm2"], environ={})


def test_rungs_of_another_kind_that_share_a_name_are_told_apart() -> None:
    cheap = lambda state: "draft"  # noqa: E731 - two lambdas share the name "<lambda>"
    strong = lambda state: "a good answer"  # noqa: E731
    scores = iter([0.3, 0.3, 1.0])
    result = refine([cheap, strong], "t", lambda r, s: next(scores), max_iterations=2)
    assert [a.model for a in result.attempts] == ["<lambda>", "<lambda>", "<lambda>@rung1"]
    assert result.value == "a good answer"


# -- a member that gave no feedback is labelled by what its score says --------------------


def test_members_without_feedback_are_not_labelled_no_issues() -> None:
    from langgraph_refine import Evaluation, evaluators

    def zero(response: str, state: Any) -> float:
        return 0.0

    def partial(response: str, state: Any) -> float:
        return 0.2

    def failing(response: str, state: Any) -> Evaluation:
        return Evaluation(score=0.0, verdict="FAIL")

    def perfect(response: str, state: Any) -> float:
        return 1.0

    state = {"task": "t", "attempts": []}
    combined = evaluators.combine(zero, partial, perfect).evaluate("x", state)
    assert combined.feedback.splitlines() == [
        "[zero] score 0.00: gave no reason for scoring 0.00 (below 1.00)",
        "[partial] score 0.20: gave no reason for scoring 0.20 (below 1.00)",
        "[perfect] score 1.00: no issues",
    ]
    jury = evaluators.panel(failing, perfect).evaluate("x", state)
    assert "[failing] score 0.00 (FAIL): failed this check without saying why" in jury.feedback
    assert "[perfect] score 1.00: no issues" in jury.feedback


# -- the result box in an 80-column terminal -----------------------------------------------


@pytest.mark.parametrize("width", [80, 60, 200])
def test_the_result_box_title_is_never_cut_mid_word(width: int) -> None:
    import io

    from rich.console import Console

    from langgraph_refine import Attempt, Evaluation, RefineResult
    from langgraph_refine.cli._view import show_result

    attempts = [
        Attempt(
            index=i, response="x", evaluation=Evaluation(score=0.95, verdict="NEEDS_IMPROVEMENT")
        )
        for i in range(5)
    ]
    state = {"task": "t", "attempts": attempts, "stop_reason": "max_iterations"}
    result = RefineResult.from_state(state)
    out = io.StringIO()
    show_result(Console(file=out, width=width), result)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= width for line in lines)
    text = out.getvalue()
    assert "best response — score 0.95, NEEDS_IMPROVEMENT" in text
    assert "stopped: max_iterations, 4 refinement round(s)" in text  # whole, on a line
    assert "…" not in text


# -- a batch line key that is a near-miss of an option is warned about ---------------------


def test_a_misspelt_option_on_a_batch_line_is_warned_about(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    from tests.test_cli_helpers import per_task

    server = openai_server(per_task())
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": 1, "task": "a", "selct": "pairwise", "category": "geography"},
        {"id": 2, "task": "b", "max_iteration": 1, "difficulty": "hard"},
    ]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = cli("batch", src, "--out", out, "--model", "m", "--base-url", server.base_url)
    assert run.code == 0, run.err  # a warning, not a failure: the lines run
    warnings = [line for line in run.err.splitlines() if "is no option" in line]
    assert len(warnings) == 2
    assert (
        f"{src}:1: key 'selct' is no option and is ignored; did you mean 'select'?" in warnings[0]
    )
    assert "did you mean 'max_iterations'?" in warnings[1]
    assert "category" not in run.err and "difficulty" not in run.err  # a dataset's own fields
    assert len(out.read_text().splitlines()) == 2


# -- select="pairwise" finds the judge inside a panel or combine ---------------------------


@pytest.mark.parametrize("group", ["panel", "combine"])
def test_pairwise_compares_with_the_judge_inside_a_panel_or_combine(group: str) -> None:
    from langgraph_refine import evaluators
    from tests.fakes import ScriptedChatModel, judge_reply

    def reply(messages: Any) -> str:
        text = str(messages[-1].content)
        return "B" if "Compare response A" in text else judge_reply(0.5, feedback="more")

    judge = ScriptedChatModel(replies=[reply])
    drafts = iter(["v0", "v1", "v2"])

    def write(state: Any) -> str:
        return next(drafts)

    def length(response: str, state: Any) -> float:
        return 0.5

    grouped = getattr(evaluators, group)(judge, length)
    result = refine(
        write, "t", grouped, select="pairwise", max_iterations=2, patience=None, strategy="chain"
    )
    selection = result.metadata["selection"]
    assert selection["method"] == "pairwise" and selection["comparer"] == "ScriptedChatModel"
    asked = [str(call[-1].content) for call in judge.calls]
    assert sum("Compare response A" in text for text in asked) == 6  # 3 pairs, both orders


# -- options of pairwise selection without it are refused ---------------------------------


def test_comparer_and_select_top_without_pairwise_selection_are_refused() -> None:
    def compare(task: str, first: str, second: str) -> str:
        return "first"

    with pytest.raises(ValueError, match=r"comparer= only apply with select='pairwise'"):
        refine(lambda state: "x", "t", lambda r, s: 1.0, comparer=compare)
    with pytest.raises(ValueError, match=r"select_top=, select_margin= only apply"):
        refine(
            lambda s: "x", "t", lambda r, s: 1.0, select="score", select_top=2, select_margin=0.1
        )
    result = refine(lambda s: "x", "t", lambda r, s: 1.0, select="pairwise", comparer=compare)
    assert result.value == "x"


# -- review with pairwise selection: reject keeps what the reviewer saw -------------------


def test_a_reject_keeps_the_attempt_the_reviewer_saw() -> None:
    from tests.test_select import TASK, Oracle, evaluate, five_attempts, generate

    shown: list[str] = []

    def reviewer(payload: dict[str, Any]) -> dict[str, Any]:
        shown.append(payload["response"])
        return {"action": "reject"}

    oracle = Oracle()  # would pick v2; the reviewer was shown v1, the best by score
    result = refine(
        generate, TASK, evaluate, human_review="final", reviewer=reviewer,
        **five_attempts(select="pairwise", comparer=oracle),
    )  # fmt: skip
    assert shown == ["v1"] and result.stop_reason == "rejected"
    assert result.value == "v1" and oracle.asked == []
    selection = result.metadata["selection"]
    assert selection["method"] == "score" and "reviewer rejected" in selection["note"]
