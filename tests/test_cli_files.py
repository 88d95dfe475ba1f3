"""What the command line writes is whole: a report that fails leaves the old one, any row
a batch wrote renders, and one batch at a time appends to an output file.

Each test runs the installed `langgraph-refine` command in its own process against a
scripted OpenAI-compatible server on loopback.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import resource
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.cli_process import held_after, run_command, start_command, wait_until
from tests.test_cli_batch import batch_args, read_jsonl, tasks, write_jsonl
from tests.test_cli_helpers import openai_server, per_task  # noqa: F401 - fixture

SURROGATE_LINE = '{"id": "odd", "task": "Describe \\ud800 this."}'
"""Valid JSON, whose task holds a lone surrogate: no UTF-8 text can carry it."""


def _files_of_at_most(size: int) -> None:
    # A file written past `size` bytes fails with EFBIG (as a full disk would), rather
    # than the process being killed by SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def test_any_row_a_batch_wrote_renders_and_a_failed_report_leaves_the_old_file_whole(
    openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src = write_jsonl(tmp_path / "in.jsonl", [*tasks(2), SURROGATE_LINE])
    out = tmp_path / "out.jsonl"
    batch = run_command(*batch_args(server, src, out))
    assert batch.code == 1, batch.err  # the odd line is a failed row
    assert sorted(row["id"] for row in read_jsonl(out)) == ["odd", "t0", "t1"]

    report = tmp_path / "keep.html"
    report.write_text("<p>the report kept from before</p>\n")
    cut_short = run_command(
        "report", out, "--html", report, preexec_fn=lambda: _files_of_at_most(4096)
    )
    assert cut_short.code == 2
    (line,) = cut_short.lines()
    assert line.startswith(f"langgraph-refine: cannot write --html {report}")
    assert report.read_text() == "<p>the report kept from before</p>\n"  # whole, as it was
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

    written = run_command("report", out, "--html", report)
    assert written.code == 1, written.err  # the failed row makes it 1, as documented
    assert "Traceback" not in written.err
    page = report.read_text(encoding="utf-8")
    assert "Describe \\ud800 this." in page  # the text no file can hold, escaped
    assert "answer to task number 1" in page and "failed: id 'odd'" in written.out


def test_a_calibration_cut_short_leaves_the_old_one_whole(tmp_path: Path) -> None:
    sea = "Describe the sea."
    labels = [{"task": sea, "response": "Blue.", "passed": False}] * 4 + [
        {"task": sea, "response": "Grey waves break on the cold shore at dawn.", "passed": True}
    ] * 12
    src = write_jsonl(tmp_path / "labels.jsonl", labels)
    kept = tmp_path / "cal.json"
    args = ["calibrate", src, "-e", "words:5-100", "--alpha", "0.3", "--out", kept]
    assert run_command(*args).code == 0
    before = kept.read_text()
    assert len(before) > 600
    cut_short = run_command(*args, "--alpha", "0.25", preexec_fn=lambda: _files_of_at_most(512))
    assert cut_short.code == 2
    assert cut_short.lines()[-1].startswith(f"langgraph-refine: cannot write --out {kept}")
    assert kept.read_text() == before  # whole, as it was
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.slow
def test_a_second_batch_on_the_same_out_is_refused_whatever_its_checkpoint(
    openai_server: Any, tmp_path: Path
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", tasks(6))
    reference = openai_server(per_task())
    whole = run_command(*batch_args(reference, src, tmp_path / "whole.jsonl"))
    assert whole.code == 0, whole.err
    paid = len(reference.requests)

    release = threading.Event()
    server = openai_server(held_after(per_task(), 2, release))  # the first batch waits
    out = tmp_path / "out.jsonl"
    first = start_command(
        *batch_args(server, src, out, "-c", "2", "--checkpoint", tmp_path / "a.sqlite")
    )
    try:
        wait_until(lambda: len(server.requests) >= 2)
        second = run_command(*batch_args(server, src, out, "--checkpoint", tmp_path / "b.sqlite"))
        release.set()
        _, err = first.communicate(timeout=60)
    finally:
        release.set()
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, err
    assert second.code == 1
    (line,) = second.lines()
    assert line == (
        f"langgraph-refine: --out {out} is being written by another batch (process "
        f"{first.pid}); wait for it to end, or give this batch another --out"
    )
    assert not (tmp_path / "b.sqlite").exists()  # refused before anything was opened
    assert sorted(row["id"] for row in read_jsonl(out)) == [f"t{i}" for i in range(6)]  # once
    assert len(server.requests) == paid  # every call paid once
