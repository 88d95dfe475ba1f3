"""`calibrate`, `run --calibration FILE`, and the labels of `run --review --store FILE`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    assert_one_line_error,
    cli,
    drafts_and_judge,
    openai_server,
)

WORDS = "words:40-1000"  # scores n/40 below 40 words: people pass more than 30


def write_labels(path: Path, n: int = 60) -> Path:
    rows = [{"task": "t", "response": "good " * i, "passed": i > 30} for i in range(n)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def calibration_file(cli: Any, tmp_path: Path) -> Path:  # noqa: F811 - the fixture, passed in
    """A calibration of `WORDS` on 60 labels, made with `calibrate --out`."""
    out = tmp_path / "cal.json"
    assert cli("calibrate", write_labels(tmp_path / "l.jsonl"), "-e", WORDS, "--out", out).code == 0
    return out


def run_args(server: Any) -> list[str]:
    """`run` on the scripted model `server` serves."""
    return ["run", "t", "--model", "scripted", "--base-url", server.base_url]


def test_calibrate_prints_the_table_and_threshold_and_writes_the_file(
    cli: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    out = tmp_path / "cal.json"
    run = cli("calibrate", write_labels(tmp_path / "labels.jsonl"), "-e", WORDS, "--out", out)
    assert run.code == 0, run.err
    assert "judge alone" in run.out and "calibrated" in run.out and "false PASS" in run.out
    assert "threshold 0.800" in run.out and "(60 labels)" in run.out
    data = json.loads(out.read_text())
    assert data["judge"]["spec"] == WORDS and data["report"]["threshold"] == 0.8
    assert data["report"]["met"] is True


def test_calibrate_with_too_few_labels_exits_1_and_says_so(
    cli: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    out = tmp_path / "cal.json"
    run = cli("calibrate", write_labels(tmp_path / "few.jsonl", 8), "-e", WORDS, "--out", out)
    assert run.code == 1, run.err
    assert "alpha=0.1 not met" in run.out and out.exists()


def test_calibrate_usage_errors_exit_2_with_a_clear_line(
    cli: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    missing = cli("calibrate", tmp_path / "none.jsonl", "-e", WORDS)
    assert missing.code == 2
    assert_one_line_error(missing, "none.jsonl", "does not exist")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "t", "response": "r"}\n')
    malformed = cli("calibrate", bad, "-e", WORDS)
    assert malformed.code == 2
    assert_one_line_error(malformed, "bad.jsonl line 1 has no 'passed'")
    alpha = cli("calibrate", write_labels(tmp_path / "l.jsonl"), "-e", WORDS, "--alpha", "2")
    assert alpha.code == 2
    assert_one_line_error(alpha, "--alpha must be a number strictly between 0 and 1")


def test_run_with_a_calibration_says_its_pass_was_calibrated(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    out = calibration_file(cli, tmp_path)
    server = openai_server(drafts_and_judge())
    args = [*run_args(server), "--json"]
    run = cli(*args, "-e", WORDS, "--calibration", out, "--max-iterations", "1")
    assert run.code == 0, run.err
    data = run.json()
    assert data["calibration"]["threshold"] == 0.8 and data["verdict"] == "NEEDS_IMPROVEMENT"
    stale = cli(*args, "-e", "words:1-5", "--calibration", out)
    assert stale.code == 2
    assert_one_line_error(
        stale, "spec: calibrated with 'words:40-1000', this judge has 'words:1-5'"
    )
    (tmp_path / "x.json").write_text("{}")
    wrong = cli(*args, "-e", WORDS, "--calibration", tmp_path / "x.json")
    assert wrong.code == 2
    assert_one_line_error(wrong, "is not a calibration file")


def test_run_requires_calibration_on_the_command_line(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 1.0, "draft 1": 1.0}))
    args = [*run_args(server), "--json"]
    trusted = cli(*args, "--max-iterations", "1")
    assert trusted.json()["stop_reason"] == "passed"
    server = openai_server(drafts_and_judge({"draft 0": 1.0, "draft 1": 1.0}))
    args = [*run_args(server), "--json"]
    run = cli(*args, "--max-iterations", "1", "--require-calibration")
    assert run.code == 0, run.err
    data = run.json()
    assert data["stop_reason"] == "max_iterations"
    assert [n["attempt"] for n in data["untrusted_pass"]] == [0, 1]


def test_cli_reviews_are_kept_in_the_store_and_calibrate_reads_them(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    store = tmp_path / "reviews.sqlite"
    server = openai_server(drafts_and_judge({"draft 0": 0.8}))
    args = ["run", "Write a haiku.", "--model", "scripted", "--base-url", server.base_url]
    run = cli(*args, "--review", "--store", store, "--json", "--max-iterations", "0", stdin="a\n")
    assert run.code == 0, run.err
    again = cli(*args, "--review", "--store", store, "--json", "--max-iterations", "0", stdin="r\n")
    assert again.code == 0, again.err
    from langgraph_refine import evaluators
    from langgraph_refine.cli._calibration import _sqlite_store

    with _sqlite_store(store) as kept:
        labels = evaluators.store_labels(kept)
    assert [(label.task, label.passed) for label in labels] == [
        ("Write a haiku.", True),
        ("Write a haiku.", False),
    ]
    calibrated = cli("calibrate", store, "-e", WORDS, "--out", tmp_path / "c.json")
    assert calibrated.code == 1 and "(2 labels)" in calibrated.out  # two labels prove little


def test_batch_takes_a_calibration_and_refuses_it_with_a_server(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    calibration = tmp_path / "cal.json"
    labels = write_labels(tmp_path / "l.jsonl")
    assert cli("calibrate", labels, "-e", WORDS, "--out", calibration).code == 0
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": 1, "task": "t"}\n')
    server = openai_server(drafts_and_judge())
    base = ["batch", tasks, "--model", "scripted", "--base-url", server.base_url]
    out = tmp_path / "out.jsonl"
    run = cli(
        *base, "--out", out, "-e", WORDS, "--calibration", calibration, "--max-iterations", "0"
    )
    assert run.code == 0, run.err
    row = json.loads(out.read_text().splitlines()[0])
    details = row["attempts"][0]["evaluation"]["details"]
    assert details["calibration"]["threshold"] == 0.8
    remote = cli(
        *base,
        "--out",
        tmp_path / "o2.jsonl",
        "--server",
        "http://127.0.0.1:9",
        "--calibration",
        calibration,
    )
    assert remote.code == 2
    assert_one_line_error(remote, "--calibration", "does not apply with --server")


def test_the_false_pass_plot_in_calibrate_html_and_the_batch_report(
    cli: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    calibration, page = tmp_path / "cal.json", tmp_path / "cal.html"
    labels = write_labels(tmp_path / "l.jsonl")
    run = cli("calibrate", labels, "-e", WORDS, "--out", calibration, "--html", page)
    assert run.code == 0, run.err
    text = page.read_text()
    assert '<svg id="calibration-plot"' in text and 'class="threshold"' in text
    assert text.count("<polyline") == 2 and "0.800" in text  # rate and bound; the threshold
    results = tmp_path / "results.jsonl"
    results.write_text(
        json.dumps(
            {
                "id": 1,
                "task": "t",
                "value": "v",
                "score": 0.5,
                "stop_reason": "plateau",
                "iterations": 0,
                "score_history": [0.5],
                "attempts": [],
            }
        )
        + "\n"
    )
    report = tmp_path / "report.html"
    done = cli("report", results, "--html", report, "--calibration", calibration)
    assert done.code == 0, done.err
    assert '<section id="calibration">' in report.read_text()
    bad = cli("report", results, "--html", report, "--calibration", labels)
    assert bad.code == 2
    assert_one_line_error(bad, "l.jsonl", "is not JSON")


def test_the_terminal_result_says_whether_its_pass_was_calibrated(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    out = calibration_file(cli, tmp_path)
    server = openai_server(drafts_and_judge({"draft 0": 1.0}))
    args = run_args(server)
    calibrated = cli(*args, "-e", WORDS, "--calibration", out, "--max-iterations", "0")
    assert calibrated.code == 0, calibrated.err
    assert "calibrated judge: a PASS needs 0.80 (60 labels" in calibrated.out
    server = openai_server(drafts_and_judge({"draft 0": 1.0}))  # its drafts count from 0
    args = run_args(server)
    refused = cli(*args, "--require-calibration", "--max-iterations", "0")
    assert refused.code == 0, refused.err
    assert "not trusted (uncalibrated judge): the passed of attempt #0" in refused.out


def test_calibrating_the_llm_judge_counts_its_calls_and_a_cache_spares_them(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    scores = {f"draft {i}": (1.0 if i >= 20 else 0.4) for i in range(50)}
    server = openai_server(drafts_and_judge(scores))
    labels = tmp_path / "labels.jsonl"
    rows = [{"task": "t", "response": f"draft {i}", "passed": i >= 20} for i in range(50)]
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["calibrate", labels, "--model", "scripted", "--base-url", server.base_url]
    cache = tmp_path / "cache.sqlite"
    run = cli(*args, "--cache", cache, "--out", tmp_path / "cal.json")
    assert run.code == 0, run.err
    assert "agreement with people: judge (50 labels)" in run.out and "threshold 1.000" in run.out
    assert len(server.requests) == 50  # one judge call per labelled response
    again = cli(*args, "--cache", cache, "--out", tmp_path / "again.json")
    assert again.code == 0, again.err
    assert len(server.requests) == 50  # every judgment came from the cache
    judge = json.loads((tmp_path / "again.json").read_text())["judge"]
    assert judge["spec"] == "judge" and judge["model"] == "openai:scripted"


def test_a_calibration_belongs_to_its_judge_on_the_command_line(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    # Several responses per task: the folds are dealt by task.
    scores = {f"draft {i}": (1.0 if i >= 20 else 0.4) for i in range(60)}
    server = openai_server(drafts_and_judge(scores))
    labels = tmp_path / "labels.jsonl"
    rows = [
        {"task": f"task {i % 12}", "response": f"draft {i}", "passed": i >= 20} for i in range(60)
    ]
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "cal.json"
    base = ["--model", "scripted", "--base-url", server.base_url]
    made = cli(
        "calibrate",
        labels,
        *base,
        "--criterion",
        "Cites a source",
        "--concurrency",
        "4",
        "--out",
        out,
    )
    assert made.code == 0, made.err
    assert "folds by task: 12 tasks" in made.out
    assert len(server.requests) == 60
    judged = [body for body in server.requests]
    assert all("Cites a source" in json.dumps(body) for body in judged)  # the criterion asked
    identity = json.loads(out.read_text())["judge"]
    assert identity["criteria"] == ["Cites a source"] and identity["model"] == "openai:scripted"
    # Another judge: exit 2 before any call, naming what differs.
    for flags, named in [
        (["--judge-model", "other"], "model: calibrated with 'openai:scripted'"),
        (["--criterion", "Rhymes"], "criteria: calibrated with ['Cites a source']"),
        ([], "criteria: calibrated with ['Cites a source'], this judge has no criteria"),
        (["--criterion", "Cites a source", "-e", "judge", "-e", "words:1-9"], "spec:"),
    ]:
        before = len(server.requests)
        refused = cli("run", "t", *base, *flags, "--calibration", out)
        assert refused.code == 2, (flags, refused.err)
        assert_one_line_error(refused, "was made for another judge", named)
        assert len(server.requests) == before  # no call
    same = cli("run", "t", *base, "--criterion", "Cites a source", "--calibration", out, "--json")
    assert same.code == 0, same.err
    assert same.json()["calibration"]["threshold"] == 1.0


def test_require_calibration_with_a_calibration_that_passes_nothing_exits_2_before_any_call(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    out = tmp_path / "cal.json"
    made = cli("calibrate", write_labels(tmp_path / "few.jsonl", 8), "-e", WORDS, "--out", out)
    assert made.code == 1  # alpha not met: it can pass nothing
    server = openai_server(drafts_and_judge())
    args = [*run_args(server), "-e", WORDS, "--calibration", out]
    refused = cli(*args, "--require-calibration")
    assert refused.code == 2, refused.err
    assert_one_line_error(refused, "can pass nothing", "refuses to start")
    assert server.requests == []


def test_a_run_with_a_calibration_that_passes_nothing_says_once_its_pass_is_untrusted(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    out = tmp_path / "cal.json"
    cli("calibrate", write_labels(tmp_path / "few.jsonl", 8), "-e", WORDS, "--out", out)
    server = openai_server(drafts_and_judge())
    run = cli(*run_args(server), "-e", WORDS, "--calibration", out, "--max-iterations", "1")
    said = [line for line in run.err.splitlines() if "untrusted" in line]
    assert len(said) == 1, run.err
    assert "passes nothing" in said[0] and "Traceback" not in run.err
    assert "CalibrationWarning" not in run.err


def test_an_unmet_calibration_shows_its_best_bound_its_threshold_and_advice(
    cli: Any,  # noqa: F811 - a fixture
    tmp_path: Path,
) -> None:
    out, page = tmp_path / "cal.json", tmp_path / "cal.html"
    run = cli(
        "calibrate",
        write_labels(tmp_path / "l.jsonl", 40),
        "-e",
        WORDS,
        "--out",
        out,
        "--html",
        page,
    )
    assert run.code == 1, run.err
    report = json.loads(out.read_text())["report"]
    assert report["diagnosis"] == "too_few_labels" and report["best_threshold"] is not None
    shown = " ".join(run.out.split())
    assert f"best in-sample false-PASS bound {report['bound']:.2f}" in shown
    assert "Add about" in shown
    html = page.read_text()
    assert 'class="best"' in html and "Add about" in html
