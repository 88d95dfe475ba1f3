"""Money on the command line: `--max-cost`, `--price`, `budget.max_cost` on batch lines,
cost in the run summary, batch rows and report; `budget.max_cost` in a served graph's
context; feedback cut at a word boundary in progress lines (CLI and `make demo`).

Real `ChatOpenAI` clients talk to scripted OpenAI-compatible servers on loopback; prices
are checked against `genai-prices`' own numbers for `gpt-4o-mini`.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import genai_prices
import pytest

from langgraph_refine import Budget
from langgraph_refine._calls._prices import Price
from langgraph_refine._display import shorten
from langgraph_refine.cli._errors import CliError
from langgraph_refine.cli._options import budget_dict, parse_prices, with_prices
from langgraph_refine.cli._shared import SharedFlags
from langgraph_refine.server import build_graph
from tests.fault_server import FaultServer
from tests.test_cli_batch import batch_args, read_jsonl, write_jsonl
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    assert_one_line_error,
    cli,
    drafts_and_judge,
    openai_server,
    per_task,
)

SCORES = {"draft 0": 0.4, "draft 1": 0.7, "draft 2": 0.95}


def genai_cost(input_tokens: int, output_tokens: int) -> float:
    usage = genai_prices.Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return float(genai_prices.calc_price(usage, "gpt-4o-mini", provider_id="openai").total_price)


def run_args(server: Any, model: str, *extra: str) -> list[str]:
    return ["run", "Write a poem.", "--model", model, "--base-url", server.base_url, *extra]


# -- run ----------------------------------------------------------------------------------


def test_run_json_reports_usage_priced_by_genai_prices(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(*run_args(server, "gpt-4o-mini", "--json"))
    assert run.code == 0, run.err
    usage = run.json()["usage"]
    assert usage["calls"] == len(server.requests) == 6
    # gpt-4o-mini has one price per token kind, so the total prices the summed tokens.
    expected = genai_cost(usage["input_tokens"], usage["output_tokens"])
    assert usage["cost"] == pytest.approx(expected)
    assert round(usage["cost"], 2) == round(expected, 2)


def test_run_summary_shows_what_was_spent(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(*run_args(server, "gpt-4o-mini"))
    assert run.code == 0, run.err
    spent = [line for line in run.out.splitlines() if line.startswith("spent:")]
    assert len(spent) == 1 and "6 model calls" in spent[0] and "$0.000" in spent[0]
    unpriced = cli(*run_args(openai_server(drafts_and_judge(SCORES)), "scripted"))
    assert "spent: 6 model calls" in unpriced.out and "cost unknown" in unpriced.out


def test_max_cost_stops_before_a_call_past_it(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(*run_args(server, "gpt-4o-mini", "--max-cost", "0.0000001", "--json"))
    assert run.code == 0, run.err
    data = run.json()
    # The first call starts at $0; once it cost anything, no other call starts.
    assert len(server.requests) == 1 == data["usage"]["calls"]
    assert data["stop_reason"] == "budget_exhausted"


def test_an_unpriced_model_is_refused_with_how_to_price_it(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(*run_args(server, "my-model", "--max-cost", "1"))
    assert_one_line_error(run, "'my-model'", "--price my-model=", "prices=")
    assert server.requests == []  # nothing was sent


def test_price_prices_a_model_the_data_does_not_know(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(*run_args(server, "my-model", "--max-cost", "1", "--price", "my-model=2,8", "--json"))
    assert run.code == 0, run.err
    usage = run.json()["usage"]
    expected = (usage["input_tokens"] * 2 + usage["output_tokens"] * 8) / 1_000_000
    assert usage["cost"] == pytest.approx(expected)


def test_price_without_max_cost_still_prices(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(*run_args(server, "my-model", "--price", "my-model=1,1", "--json"))
    usage = run.json()["usage"]
    assert usage["cost"] == pytest.approx(usage["total_tokens"] / 1_000_000)


@pytest.mark.parametrize(
    "value",
    ["my-model", "my-model=1", "my-model=a,b", "=1,2", "my-model=-1,2", "m=1,2,3", "m=1,inf"],
)
def test_bad_price_is_a_one_line_error(cli: Any, value: str) -> None:
    run = cli("run", "Say hi.", "--model", "m", "--price", value)
    assert_one_line_error(run, f"--price {value!r}", "MODEL=IN,OUT", "--price gpt-4o-mini=0.15,0.6")


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_bad_max_cost_is_a_one_line_error(cli: Any, value: str) -> None:
    run = cli("run", "Say hi.", "--model", "m", "--max-cost", value)
    assert_one_line_error(run, "Budget.max_cost must be a number >= 0")


# -- options plumbing -----------------------------------------------------------------------


def test_prices_join_the_budget_and_travel_in_the_context() -> None:
    options = SharedFlags(max_cost=0.5, price=["a=1,2", "b=0,0.5"]).options()
    budget = options.run_budget()
    assert budget == Budget(
        max_cost=0.5, prices={"a": Price(input=1, output=2), "b": Price(input=0, output=0.5)}
    )
    context = budget_dict(budget)
    assert context == {
        "max_cost": 0.5,
        "prices": {"a": {"input": 1.0, "output": 2.0}, "b": {"input": 0.0, "output": 0.5}},
    }
    assert Budget.coerce(json.loads(json.dumps(context))) == budget  # JSON round trip
    # A batch line's own budget keeps the --price values; its own prices win.
    line = options.override(
        {"budget": {"max_calls": 3, "prices": {"a": {"input": 9, "output": 9}}}}
    )
    assert line.run_budget() == Budget(
        max_calls=3, prices={"a": Price(input=9, output=9), "b": Price(input=0, output=0.5)}
    )
    assert with_prices(None, {}) is None
    assert parse_prices(None) == {}
    with pytest.raises(CliError, match="--price"):
        parse_prices(["oops"])


# -- batch and report ----------------------------------------------------------------------


def test_batch_lines_set_max_cost_and_rows_carry_the_cost(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    rows = [
        {"id": "capped", "task": "A", "budget": {"max_cost": 0.0000001}},
        {"id": "free", "task": "B", "max_iterations": 1},
    ]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    run = cli(
        "batch",
        str(src),
        "--out",
        str(out),
        "--model",
        "gpt-4o-mini",
        "--base-url",
        server.base_url,
    )
    assert run.code == 0, run.err
    by_id = {r["id"]: r for r in read_jsonl(out)}
    capped, free = by_id["capped"]["usage"], by_id["free"]["usage"]
    assert capped["calls"] == 1 and by_id["capped"]["stop_reason"] == "budget_exhausted"
    for usage in (capped, free):
        assert usage["cost"] == pytest.approx(
            genai_cost(usage["input_tokens"], usage["output_tokens"])
        )
    total = capped["cost"] + free["cost"]
    assert f"cost ${total:.6f}".rstrip("0") in run.out

    target = tmp_path / "report.html"
    assert cli("report", str(out), "--html", str(target)).code == 0
    page = target.read_text()
    assert "cost (USD)" in page and f"${total:.6f}".rstrip("0") in page
    assert f'<td class="num">{capped["calls"] + free["calls"]}</td>' in page


def test_a_bad_max_cost_on_a_batch_line_is_reported_with_its_line(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    rows = [{"id": "bad", "task": "A", "budget": {"max_cost": -1}}, {"id": "ok", "task": "B"}]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    run = cli("batch", str(src), "--out", str(out), "--model", "m", "--base-url", server.base_url)
    assert run.code == 1
    assert "in.jsonl:1: budget: Budget.max_cost must be a number >= 0" in run.err
    assert "cost unknown" in run.out  # the model "m" has no price
    assert [r["id"] for r in read_jsonl(out)] == ["ok"]


def test_an_unpriced_model_under_max_cost_fails_the_task_with_the_fix(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src, out = write_jsonl(tmp_path / "in.jsonl", [{"id": "t", "task": "A"}]), tmp_path / "o.jsonl"
    run = cli(*batch_args(server, src, out, "--max-cost", "1"))
    assert run.code == 1 and "Traceback" not in run.err
    (row,) = read_jsonl(out)
    assert "no price is known for model 'm'" in row["error"] and "--price m=" in row["error"]
    assert server.requests == []


# -- served graphs ---------------------------------------------------------------------------


def test_served_graph_takes_max_cost_in_its_context(monkeypatch: pytest.MonkeyPatch) -> None:
    with FaultServer().serve() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        graph = build_graph(environ={"REFINE_MODEL": "gpt-4o-mini"})
        per_call = genai_cost(10, 5)  # what the scripted server reports for each call
        graph.invoke({"task": "Write."}, context={"budget": {"max_cost": 2.5 * per_call}})
        assert len(server.received) == 3  # generate, judge, generate; then $ ran out
        unpriced = build_graph(environ={"REFINE_MODEL": "my-model"})
        with pytest.raises(ValueError, match="'my-model'"):
            unpriced.invoke({"task": "Write."}, context={"budget": {"max_cost": 1}})
        assert len(server.received) == 3


# -- progress lines ---------------------------------------------------------------------------


def test_progress_lines_cut_feedback_at_a_word(cli: Any, openai_server: Any) -> None:
    long = "Missing 1 of 4 required words: " + ", ".join(f"word{i}" for i in range(40))

    def script(body: dict[str, Any]) -> str:
        from tests.test_cli_helpers import is_judge, judge_json

        if is_judge(body):
            return judge_json(0.95, feedback=long)
        return "draft"

    run = cli(*run_args(openai_server(script), "m"))
    (line,) = [line for line in run.out.splitlines() if line.startswith("round")]
    shown = line.split("PASS  ")[-1] if "PASS" in line else line.split("  ")[-1]
    assert shown.endswith("…")
    assert long.startswith(shown[:-1])  # a prefix of the feedback ...
    assert long[len(shown) - 1] in " ,"  # ... that ends where a word ends


def test_demo_cuts_feedback_with_the_same_helper(capsys: pytest.CaptureFixture[str]) -> None:
    from tools import demo

    feedback = "Missing 1 of 4 required words: " + "lamp owl " * 40
    demo._print_round(
        {
            "type": "round",
            "iteration": 1,
            "parent": 0,
            "score": 0.5,
            "verdict": None,
            "best_score": 0.5,
            "feedback": feedback,
        }
    )
    line = capsys.readouterr().out.splitlines()[1].removeprefix("    feedback: ")
    assert line == shorten(feedback, demo.FEEDBACK_CHARS)
    assert line.endswith("…") and len(line) <= demo.FEEDBACK_CHARS
    assert feedback[len(line) - 1] == " "  # the cut fell on a word boundary
