"""`select="pairwise"`: the result chosen by comparing the best attempts in pairs, both orders."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from langgraph_refine import Attempt, Budget, Evaluation, arefine, create_refine_graph, refine
from langgraph_refine._loop._select import (
    choose,
    outcome,
    read_preference,
    select_candidates,
)
from langgraph_refine.cli._errors import CliError
from langgraph_refine.cli._flags import loop_flags
from langgraph_refine.cli._options import CommandOptions
from langgraph_refine.cli._report import selection_section
from langgraph_refine.cli._shared import SharedFlags
from tests.fakes import ScriptedChatModel, judge_reply
from tests.test_cli_helpers import (  # noqa: F401
    assert_one_line_error,
    cli,
    is_judge,
    judge_json,
    last_user_text,
    openai_server,
    rated_text,
)

TASK = "Describe the sea."
# Scores the (noisy) evaluator gives attempts 0..4, and their hidden true quality.
SCORES = [0.5, 0.8, 0.75, 0.7, 0.3]
QUALITY = {"v0": 0.5, "v1": 0.6, "v2": 0.9, "v3": 0.7, "v4": 0.1}


def generate(state: Any) -> str:
    return f"v{len(state['attempts'])}"


def evaluate(response: str, state: Any) -> float:
    return SCORES[int(response[1:])]


class Oracle:
    """A comparer that knows the true quality, recording every (first, second) it is asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def __call__(self, task: str, first: str, second: str) -> str:
        assert task == TASK
        self.asked.append((first, second))
        return "first" if QUALITY[first] > QUALITY[second] else "second"


def five_attempts(**options: Any) -> dict[str, Any]:
    """Options that run exactly five attempts (no early stop)."""
    return {
        "max_iterations": 4,
        "patience": None,
        "target_score": 1.0,
        "strategy": "chain",
        **options,
    }


def test_candidates_are_within_the_margin_and_at_most_top() -> None:
    attempts = [
        Attempt(index=i, response=f"v{i}", evaluation=Evaluation(score=s))
        for i, s in enumerate(SCORES)
    ]
    assert [a.index for a in select_candidates(attempts, top=3, margin=0.1)] == [1, 2, 3]
    assert [a.index for a in select_candidates(attempts, top=2, margin=0.1)] == [1, 2]
    assert [a.index for a in select_candidates(attempts, top=5, margin=0.05)] == [1, 2]
    assert [a.index for a in select_candidates(attempts, top=9, margin=1.0)] == [0, 1, 2, 3, 4]
    unevaluated = [Attempt(index=0, response="x")]
    assert select_candidates(unevaluated, top=3, margin=0.1) == []


def test_a_pair_wins_only_when_both_orders_agree() -> None:
    assert outcome(1, 2, "first", "second") == 1
    assert outcome(1, 2, "second", "first") == 2
    assert outcome(1, 2, "first", "first") is None  # position bias: a tie
    assert outcome(1, 2, "second", "second") is None
    assert outcome(1, 2, "tie", "second") is None


def test_most_wins_then_higher_score_then_earlier_attempt() -> None:
    attempts = [
        Attempt(index=i, response=f"v{i}", evaluation=Evaluation(score=s))
        for i, s in enumerate([0.7, 0.8, 0.8])
    ]
    beats = [{"pair": [0, 1], "outcome": 0}, {"pair": [0, 2], "outcome": 0}]
    assert choose(attempts, beats) == 0  # most wins beats the higher score
    ties = [{"pair": [0, 1], "outcome": "tie"}, {"pair": [1, 2], "outcome": "tie"}]
    assert choose(attempts, ties) == 1  # no wins: the higher score, then the earlier one


@pytest.mark.parametrize(
    ("reply", "preference"),
    [
        ("A", "first"),
        ("b", "second"),
        (" TIE. ", "tie"),
        ("Response B", "second"),
        ("[[A]] is clearly better", "first"),
        ('{"winner": "B", "why": "complete"}', "second"),
        ("I think B is better than A.", "second"),
        ("a good question; the answer is unclear", "tie"),
        ("???", "tie"),
        ("", "tie"),
        (None, "tie"),
        (3, "tie"),
    ],
)
def test_replies_are_read_robustly_and_garbage_is_a_tie(reply: Any, preference: str) -> None:
    assert read_preference(reply) == preference


def test_every_pair_is_compared_in_both_orders_and_the_best_is_returned() -> None:
    oracle = Oracle()
    result = refine(generate, TASK, evaluate, **five_attempts(select="pairwise", comparer=oracle))
    # By score attempt 1 (0.8) wins; the comparisons find attempt 2, truly the best.
    assert (result.value, result.best_index, result.score) == ("v2", 2, 0.75)
    pairs = [("v1", "v2"), ("v1", "v3"), ("v2", "v3")]
    assert oracle.asked == [p for a, b in pairs for p in ((a, b), (b, a))]
    selection = result.metadata["selection"]
    assert selection["method"] == "pairwise"
    assert selection["candidates"] == [1, 2, 3] and selection["chosen"] == 2
    assert selection["comparisons"][0] == {
        "pair": [1, 2],
        "verdicts": ["second", "first"],
        "outcome": 2,
    }
    assert result.usage.calls == 5 + 6  # five generations, six comparisons
    plain = refine(generate, TASK, evaluate, **five_attempts())
    assert plain.value == "v1" and "selection" not in plain.metadata


def test_a_position_biased_comparer_ties_everything_and_the_score_decides() -> None:
    asked: list[str] = []

    def always_first(task: str, first: str, second: str) -> str:
        asked.append(first)
        return "first"

    result = refine(
        generate, TASK, evaluate, **five_attempts(select="pairwise", comparer=always_first)
    )
    selection = result.metadata["selection"]
    assert {c["outcome"] for c in selection["comparisons"]} == {"tie"}
    assert len(asked) == 6 and result.value == "v1"


def test_async_runs_choose_the_same_with_an_async_comparer() -> None:
    oracle = Oracle()

    async def compare(task: str, first: str, second: str) -> str:
        await asyncio.sleep(0)
        return oracle(task, first, second)

    result = asyncio.run(
        arefine(generate, TASK, evaluate, **five_attempts(select="pairwise", comparer=compare))
    )
    assert result.value == "v2" and len(oracle.asked) == 6
    assert result.metadata["selection"]["chosen"] == 2


def test_top_and_margin_limit_the_comparisons() -> None:
    oracle = Oracle()
    result = refine(
        generate,
        TASK,
        evaluate,
        **five_attempts(select="pairwise", comparer=oracle, select_top=2, select_margin=0.5),
    )
    assert result.metadata["selection"]["candidates"] == [1, 2]
    assert len(oracle.asked) == 2 and result.value == "v2"
    lone = refine(
        generate,
        TASK,
        evaluate,
        **five_attempts(select="pairwise", comparer=oracle, select_margin=0),
    )
    assert lone.metadata["selection"]["comparisons"] == [] and lone.value == "v1"


def test_a_budget_that_cannot_pay_every_comparison_selects_by_score_without_calling() -> None:
    oracle = Oracle()
    # 5 generations leave 5 calls: fewer than the 6 comparisons.
    result = refine(
        generate,
        TASK,
        evaluate,
        **five_attempts(select="pairwise", comparer=oracle, budget=Budget(max_calls=10)),
    )
    assert oracle.asked == [] and result.value == "v1" and result.usage.calls == 5
    selection = result.metadata["selection"]
    assert selection["method"] == "score" and selection["chosen"] == 1
    assert "cannot pay for the 6 comparisons" in selection["note"]
    paid = refine(
        generate,
        TASK,
        evaluate,
        **five_attempts(select="pairwise", comparer=Oracle(), budget=Budget(max_calls=11)),
    )
    assert paid.value == "v2" and paid.usage.calls == 11


def test_no_budget_left_after_a_budget_stop_selects_by_score() -> None:
    oracle = Oracle()
    result = refine(
        generate,
        TASK,
        evaluate,
        **five_attempts(select="pairwise", comparer=oracle, budget=Budget(max_calls=3)),
    )
    assert result.stop_reason == "budget_exhausted" and oracle.asked == []
    assert result.metadata["selection"]["method"] == "score"
    assert result.value == "v1"


def test_the_default_comparer_is_the_judge_model_with_the_pairwise_prompt() -> None:
    generator = ScriptedChatModel(replies=[f"draft {i}" for i in range(5)])

    def judge(messages: Any) -> str:
        text = str(messages[-1].content)
        shown = re.findall(r"<response_to_rate>\n?(.*?)\n?</response_to_rate>", text, re.S)
        if "Compare response A and response B" in text:
            # A position-consistent judge that truly prefers draft 2.
            return "A" if shown[0].strip() == "draft 2" else "B"
        return judge_reply(SCORES[int(shown[0].split()[1])])

    judges = ScriptedChatModel(replies=[judge], structured=False)
    result = refine(generator, TASK, judge_model=judges, **five_attempts(select="pairwise"))
    compare_prompts = [p for p in judges.prompts if "Compare response A" in p]
    assert len(compare_prompts) == 2 * len(result.metadata["selection"]["comparisons"])
    assert compare_prompts and all(f"# Task\n{TASK}" in p for p in compare_prompts)
    assert result.value == "draft 2"
    assert result.usage.calls == 5 + 5 + len(compare_prompts)


def test_a_model_answering_garbage_ties_every_pair() -> None:
    judge = ScriptedChatModel(
        replies=[
            lambda m: (
                "I cannot decide, both are lovely" if "Compare" in str(m[-1].content) else "unused"
            )
        ]
    )
    result = refine(generate, TASK, evaluate, **five_attempts(select="pairwise", comparer=judge))
    assert {c["outcome"] for c in result.metadata["selection"]["comparisons"]} == {"tie"}
    assert result.value == "v1" and len(judge.calls) == 6


def test_pairwise_needs_a_comparer_and_options_are_checked() -> None:
    with pytest.raises(ValueError, match="select='pairwise' needs a comparer"):
        create_refine_graph(generate, evaluate, select="pairwise")
    with pytest.raises(ValueError, match="select must be one of 'score', 'pairwise'; got 'best'"):
        create_refine_graph(generate, evaluate, select="best")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="select_top must be an integer >= 2, got 1"):
        create_refine_graph(generate, evaluate, select_top=1)
    with pytest.raises(ValueError, match=r"select_margin must be a number in \[0, 1\], got 2"):
        create_refine_graph(generate, evaluate, select_margin=2)
    with pytest.raises(ValueError, match="comparer must be a chat model, a model string or a"):
        create_refine_graph(generate, evaluate, select="pairwise", comparer=42)


def test_the_run_context_asks_for_pairwise_selection() -> None:
    oracle = Oracle()
    graph = create_refine_graph(generate, evaluate, comparer=oracle, **five_attempts()).compile()
    state = graph.invoke({"task": TASK}, context={"select": "pairwise", "select_top": 2})
    assert state["response"] == "v2" and len(oracle.asked) == 2
    assert graph.invoke({"task": TASK})["response"] == "v1"  # the built option: by score
    bare = create_refine_graph(generate, evaluate, **five_attempts()).compile()
    with pytest.raises(ValueError, match="needs a comparer"):
        bare.invoke({"task": TASK}, context={"select": "pairwise"})
    with pytest.raises(ValueError, match="select_margin must be a number"):
        graph.invoke({"task": TASK}, context={"select_margin": -1})


def test_a_reviewers_approval_is_not_reselected() -> None:
    oracle = Oracle()
    result = refine(
        generate,
        TASK,
        evaluate,
        human_review="final",
        reviewer=lambda payload: {"action": "approve"},
        **five_attempts(select="pairwise", comparer=oracle),
    )
    assert result.stop_reason == "approved" and oracle.asked == []
    assert "selection" not in result.metadata


def test_cli_select_pairwise_runs_the_judge_as_comparer(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    quality = {"draft 0": 0.2, "draft 1": 0.9, "draft 2": 0.4}
    counter = {"n": 0}

    def script(body: dict[str, Any]) -> str:
        text = last_user_text(body)
        if "Compare response A" in text:
            a, b = re.findall(r"<response_to_rate>\n?(.*?)\n?</response_to_rate>", text, re.S)
            return "A" if quality[a.strip()] > quality[b.strip()] else "B"
        if is_judge(body):
            score = {"draft 0": 0.6, "draft 1": 0.5, "draft 2": 0.65}[rated_text(body).strip()]
            return judge_json(score)
        counter["n"] += 1
        return f"draft {counter['n'] - 1}"

    server = openai_server(script)
    run = cli(
        "run", TASK, "--model", "scripted", "--base-url", server.base_url, "--json",
        "--max-iterations", "2", "--patience", "0", "--select", "pairwise",
        "--strategy", "chain",
    )  # fmt: skip
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["value"] == "draft 1"
    assert data["selection"]["method"] == "pairwise" and data["selection"]["chosen"] == 1
    bad = cli("run", TASK, "--model", "m", "--select", "best")
    assert_one_line_error(bad, "--select must be one of score, pairwise", "'best'")


def test_cli_options_carry_select_and_the_judge_as_comparer() -> None:
    choices = {flag.name: flag.choices for flag in loop_flags("run")}
    assert choices["select"] == ("score", "pairwise")
    judge = object()
    options = SharedFlags(
        evaluator=["words:1-5"], loop={"select": "Pairwise"}, memory="last"
    ).options()
    kwargs = options.graph_kwargs(lambda: judge)  # type: ignore[arg-type,return-value]
    assert kwargs["select"] == "pairwise" and kwargs["comparer"] is judge
    plain = (
        SharedFlags(evaluator=["words:1-5"], loop={}, memory="last")
        .options()
        .graph_kwargs(lambda: judge)
    )  # type: ignore[arg-type,return-value]
    assert "select" not in plain and "comparer" not in plain


def test_the_report_shows_each_comparison_and_the_choice() -> None:
    section = selection_section(
        {
            "method": "pairwise",
            "candidates": [1, 2],
            "comparisons": [{"pair": [1, 2], "verdicts": ["first", "first"], "outcome": "tie"}],
            "chosen": 1,
            "note": None,
        }
    )
    assert "Selection (pairwise)" in section and "chosen: #1" in section
    assert "<td>#1 vs #2</td><td>first</td><td>first</td><td>tie</td>" in section
    assert selection_section(None) == ""


def test_the_run_view_shows_the_chosen_attempts_reasoning_and_the_selection() -> None:
    import io

    from rich.console import Console

    from langgraph_refine.cli._view import show_result

    def think(state: Any) -> str:
        n = len(state["attempts"])
        return f"<think>plan {n}</think>v{n}"

    result = refine(think, TASK, evaluate, **five_attempts(select="pairwise", comparer=Oracle()))
    assert result.best_index == 2
    out = io.StringIO()
    show_result(Console(file=out, width=200), result, show_reasoning=True)
    text = out.getvalue()
    assert "plan 2" in text and "plan 1" not in text
    assert "selection: pairwise among #1, #2, #3 -> #2 (3 pairs compared in both orders" in text


def test_a_model_string_comparer_and_batch_lines_setting_select(
    openai_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def script(body: dict[str, Any]) -> str:
        text = last_user_text(body)
        a, b = re.findall(r"<response_to_rate>\n?(.*?)\n?</response_to_rate>", text, re.S)
        return "A" if QUALITY[a.strip()] > QUALITY[b.strip()] else "B"

    server = openai_server(script)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    result = refine(
        generate, TASK, evaluate, **five_attempts(select="pairwise", comparer="openai:scripted")
    )
    assert result.value == "v2" and len(server.requests) == 6
    line = CommandOptions().override({"select": "pairwise", "confirm_pass": True})
    assert line.settings == {"select": "pairwise", "confirm_pass": True}
    with pytest.raises(CliError, match="'confirm_pass' must be true or false, got 'yes'"):
        CommandOptions().override({"confirm_pass": "yes"})
    with pytest.raises(CliError, match="'select' must be one of score, pairwise; got 'best'"):
        CommandOptions().override({"select": "best"})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_token_limit_reached_during_the_comparisons_selects_by_score(mode: str) -> None:
    judge = ScriptedChatModel(replies=["A"])  # 15 tokens per call
    options = five_attempts(
        select="pairwise", comparer=judge, budget=Budget(max_tokens=40, max_calls=100)
    )
    if mode == "sync":
        result = refine(generate, TASK, evaluate, **options)
    else:
        result = asyncio.run(arefine(generate, TASK, evaluate, **options))
    selection = result.metadata["selection"]
    assert len(judge.calls) == 3 and result.usage.total_tokens == 45
    assert selection["method"] == "score" and result.value == "v1"
    assert "the budget ran out during the comparisons" in selection["note"]
    assert result.stop_reason == "max_iterations"
