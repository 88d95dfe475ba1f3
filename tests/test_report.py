"""The `report` verb: a self-contained HTML report of a batch, checked in headless Chromium."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable, Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from langgraph_refine.cli._report import MEAN_COLOR, TASK_COLORS
from tests.test_cli_helpers import assert_one_line_error, cli, openai_server, per_task  # noqa: F401

ROWS = [
    {"id": "a", "task": "Explain <b>tags</b> & entities"},
    {"id": "b", "task": "Second task", "max_iterations": 1},
    {"id": "c", "task": "Third task", "max_iterations": 0},
    {"id": "d", "task": "Fourth task", "target_score": 0.7},
]


@pytest.fixture
def batch_output(cli: Any, openai_server: Any, tmp_path: Path) -> Path:
    """A real batch's output file (scripted server, four tasks stopping differently)."""
    server = openai_server(per_task())
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    run = cli("batch", str(src), "--out", str(out), "--model", "m", "--base-url", server.base_url)
    assert run.code == 0, run.err
    return out


class Elements(HTMLParser):
    """Collects start tags with their attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def find(self, tag: str, cls: str | None = None) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and (cls is None or a.get("class") == cls)]


def parse(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    return parser


def test_report_summarises_plots_and_details_every_task(
    cli: Any, batch_output: Path, tmp_path: Path
) -> None:
    target = tmp_path / "report.html"
    run = cli("report", str(batch_output), "--html", str(target))
    assert run.code == 0, run.err
    assert "4 task(s)" in run.out
    html = target.read_text()
    page = parse(html)
    text = " ".join(page.text)

    rows = [json.loads(line) for line in batch_output.read_text().splitlines()]
    histories = {r["id"]: r["score_history"] for r in rows}
    assert histories == {"a": [0.5, 0.75, 1.0], "b": [0.5, 0.75], "c": [0.5], "d": [0.5, 0.75]}
    mean_first = sum(h[0] for h in histories.values()) / 4
    mean_best = sum(r["score"] for r in rows) / 4
    summary = dict(re.findall(r"<tr><th>([^<]+)</th><td class=\"num\">([^<]+)</td></tr>", html))
    assert summary["tasks"] == "4"
    assert summary["mean first score"] == f"{mean_first:.2f}"
    assert summary["mean best score"] == f"{mean_best:.2f}"
    reasons = dict(re.findall(r"<tr><td>([a-z_]+)</td><td class=\"num\">(\d+)</td>", html))
    assert reasons == {"passed": "1", "max_iterations": "2", "target_reached": "1"}

    # One line per task that has scores (c has a single point, drawn as a dot) and the mean.
    task_lines = page.find("polyline", "task-line")
    assert len(task_lines) == 4
    in_file_order = [len(r["score_history"]) for r in rows]
    assert [len((p["points"] or "").split()) for p in task_lines] == in_file_order
    (mean_line,) = page.find("polyline", "mean-line")
    assert len((mean_line["points"] or "").split()) == 3

    # Per-task details hold every attempt's response and feedback.
    details = page.find("details", "task")
    assert [d["data-id"] for d in details] == [r["id"] for r in rows]
    for row in rows:
        for attempt in row["attempts"]:
            assert attempt["response"] in text
            assert attempt["evaluation"]["feedback"] in text


def test_report_is_self_contained_and_escapes_text(
    cli: Any, batch_output: Path, tmp_path: Path
) -> None:
    target = tmp_path / "report.html"
    assert cli("report", str(batch_output), "--html", str(target)).code == 0
    html = target.read_text()
    assert "<b>tags</b>" not in html and "&lt;b&gt;tags&lt;/b&gt; &amp; entities" in html
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert not re.search(r"\b(src|href)=", html)
    # The only URL is the SVG namespace, which is an identifier, not a download.
    assert set(re.findall(r"https?://[^\s\"')]+", html)) == {"http://www.w3.org/2000/svg"}


def test_report_skips_bad_lines_with_their_numbers(
    cli: Any, batch_output: Path, tmp_path: Path
) -> None:
    lines = batch_output.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        "\n".join([lines[0], "{oops", lines[1], '{"id": "x", "score": "high"}']) + "\n"
    )
    target = tmp_path / "r.html"
    run = cli("report", str(broken), "--html", str(target))
    assert run.code == 1
    errors = [e for e in run.err.splitlines() if e.startswith("langgraph-refine: ")]
    assert len(errors) == 2
    assert "broken.jsonl:2: malformed JSON line" in errors[0]
    assert "broken.jsonl:4: 'score' must be a number" in errors[1]
    assert len(parse(target.read_text()).find("details", "task")) == 2

    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert_one_line_error(cli("report", str(empty), "--html", str(target)), "holds no task results")


# -- rendering in a real browser ------------------------------------------------------------

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]
WINDOW = (960, 1400)

# Injected into a copy of the report only: measures what the browser laid out and drew.
MEASURE = """<script>
const svg = document.getElementById('score-plot');
const box = svg.getBoundingClientRect();
const lines = [...svg.querySelectorAll('polyline')].map(p => ({
  cls: p.getAttribute('class'), points: p.points.numberOfItems,
  length: p.getTotalLength(), width: p.getBBox().width, height: p.getBBox().height,
  stroke: getComputedStyle(p).stroke, visible: getComputedStyle(p).visibility }));
const out = document.createElement('pre');
out.id = 'measure';
out.textContent = JSON.stringify({x: box.x, y: box.y, width: box.width, height: box.height,
  scrollY: window.scrollY, lines});
document.body.appendChild(out);
</script>"""


REQUIRE_BROWSER_ENV = "LANGGRAPH_REFINE_REQUIRE_BROWSER"
"""Set to 1 (as .ci/run does) to make a missing Chromium fail the browser test, not skip it."""
CHROMIUM_HINT = "install Debian's package with `apt-get install -y chromium` (.ci/run does this)"


def chromium(
    environ: Mapping[str, str] = os.environ, which: Callable[[str], str | None] = shutil.which
) -> str:
    """The headless Chromium binary; skip the test without it, or fail when it is required."""
    path = which("chromium") or which("chromium-browser")
    if path is not None:
        return path
    if environ.get(REQUIRE_BROWSER_ENV, "").strip() == "1":
        pytest.fail(
            f"{REQUIRE_BROWSER_ENV}=1 but headless Chromium is not installed: {CHROMIUM_HINT}"
        )
    pytest.skip(f"headless Chromium is not installed; {CHROMIUM_HINT}")


@pytest.fixture
def chromium_binary() -> str:
    """Chromium's path; requested first, so a missing browser skips before any batch runs."""
    return chromium()


def test_missing_chromium_skips_unless_required() -> None:
    nowhere: Callable[[str], str | None] = lambda name: None  # noqa: E731
    with pytest.raises(pytest.skip.Exception, match="Chromium is not installed"):
        chromium({}, nowhere)
    with pytest.raises(pytest.skip.Exception):
        chromium({REQUIRE_BROWSER_ENV: "0"}, nowhere)
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_BROWSER_ENV}=1"):
        chromium({REQUIRE_BROWSER_ENV: "1"}, nowhere)
    found = {"chromium-browser": "/usr/bin/chromium-browser"}
    assert chromium({REQUIRE_BROWSER_ENV: "1"}, found.get) == "/usr/bin/chromium-browser"


def run_chromium(page: Path, tmp_path: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    command = [
        chromium(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        *mode,
        page.as_uri(),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def decode_png(data: bytes) -> tuple[int, int, int, list[bytearray]]:
    """Decode an 8-bit, non-interlaced RGB(A) PNG into rows of pixel bytes."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, chunk = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (2, 6), header
    bpp = 4 if color == 6 else 3
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + (left + prev[i]) // 2) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def count_color(
    rows: list[bytearray], bpp: int, color: str, box: tuple[int, int, int, int], tolerance: int = 40
) -> int:
    target = tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))
    x0, y0, x1, y1 = box
    hits = 0
    for y in range(max(0, y0), min(len(rows), y1)):
        row = rows[y]
        for x in range(max(0, x0), min(len(row) // bpp, x1)):
            px = row[x * bpp : x * bpp + 3]
            if all(abs(px[i] - target[i]) <= tolerance for i in range(3)):
                hits += 1
    return hits


def blend(color: str, opacity: float) -> str:
    """`color` drawn with `opacity` over white, as `#rrggbb`."""
    channels = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c * opacity + 255 * (1 - opacity)):02x}" for c in channels)


@pytest.mark.browser
@pytest.mark.slow
def test_plot_is_drawn_in_headless_chromium(
    chromium_binary: str, cli: Any, batch_output: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    assert cli("report", str(batch_output), "--html", str(report)).code == 0

    # 1. The DOM after layout: every line has its points, a length and a size on screen.
    measured = tmp_path / "measured.html"
    measured.write_text(report.read_text().replace("</body>", MEASURE + "</body>"))
    dom = run_chromium(measured, tmp_path, "--dump-dom").stdout
    match = re.search(r'<pre id="measure">(.*?)</pre>', dom, re.S)
    assert match, "the measuring script did not run"
    plot = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert (plot["width"], plot["height"]) == (760, 380)
    lines = plot["lines"]
    assert [line["cls"] for line in lines] == ["task-line"] * 4 + ["mean-line"]
    rows = [json.loads(line) for line in batch_output.read_text().splitlines()]
    assert [line["points"] for line in lines] == [len(r["score_history"]) for r in rows] + [3]
    for line in lines:
        assert line["visible"] == "visible"
        if line["points"] > 1:
            assert line["length"] > 100 and line["width"] > 100
    assert plot["y"] + plot["height"] <= WINDOW[1], "the plot must fit the screenshot"

    # 2. The pixels: the mean line's red and the task lines' colours inside the plot box.
    shot = tmp_path / "shot.png"
    run_chromium(report, tmp_path, f"--screenshot={shot}")
    _, _, bpp, rows = decode_png(shot.read_bytes())
    box = (
        int(plot["x"]),
        int(plot["y"]),
        int(plot["x"] + plot["width"]),
        int(plot["y"] + plot["height"]),
    )
    assert count_color(rows, bpp, MEAN_COLOR, box) > 1500  # a 4px line across the plot
    # Task lines are drawn at 75% opacity over white (and may cover one another).
    task_pixels = sum(count_color(rows, bpp, blend(c, 0.75), box) for c in TASK_COLORS[:4])
    assert task_pixels > 600
    # Outside the plot, that red is only the legend's small swatch.
    above = (0, 0, WINDOW[0], box[1])
    assert count_color(rows, bpp, MEAN_COLOR, above) < 200


def test_report_lists_failed_tasks_and_counts_the_last_row_of_each_id(
    cli: Any, batch_output: Path, tmp_path: Path
) -> None:
    lines = batch_output.read_text().splitlines()
    failed = {"id": "x", "task": "Broken <task>", "attempts": [], "error": "HTTP 400: <too long>"}
    retried_error = {"id": "a", "task": "first try", "attempts": [], "error": "timed out"}
    # Reruns append: "a" failed first, then succeeded; "x" failed and was not retried yet.
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join([json.dumps(retried_error), *lines, json.dumps(failed)]) + "\n")
    target = tmp_path / "r.html"
    run = cli("report", str(source), "--html", str(target))
    assert run.code == 1, run.err  # docs/cli.md: a failed task makes the exit code 1
    assert target.exists() and run.err == ""
    out = run.out.splitlines()
    assert out[0].endswith("(5 task(s), 1 failed)")
    assert out[1].startswith("moves in this batch: refine ")
    assert out[2:] == ["failed: id 'x': HTTP 400: <too long>"]

    html = target.read_text()
    page = parse(html)
    batch_ids = [json.loads(line)["id"] for line in lines]  # concurrency decides their order
    # "a" keeps the place of its first row (the error), with its last row's content.
    expected = ["a", *(i for i in batch_ids if i != "a"), "x"]
    assert [d["data-id"] for d in page.find("details", "task")] == expected
    assert [r["data-id"] for r in page.find("tr", "failed-task")] == ["x"]
    assert "HTTP 400: &lt;too long&gt;" in html and "timed out" not in html
    summary = dict(re.findall(r"<tr><th>([^<]+)</th><td class=\"num\">([^<]+)</td></tr>", html))
    assert summary["failed tasks"] == "1"

    clean = tmp_path / "clean.html"
    assert cli("report", str(batch_output), "--html", str(clean)).code == 0
    assert 'id="failed"' not in clean.read_text()


def test_a_batch_input_file_is_no_report(cli: Any, batch_output: Path, tmp_path: Path) -> None:
    tasks = [{"id": i, "task": f"task {i}", "select": "pairwise"} for i in range(4)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    target = tmp_path / "r.html"
    run = cli("report", str(source), "--html", str(target))
    assert_one_line_error(run, f"{source} holds no results", "batch's input file")
    assert not target.exists() and run.out == ""
    # An input line among results is skipped with its line number (and the exit code is 1).
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(batch_output.read_text() + json.dumps(tasks[0]) + "\n")
    run = cli("report", str(mixed), "--html", str(target))
    assert run.code == 1 and "a task without a result" in run.err
    assert f"{mixed}:{len(batch_output.read_text().splitlines()) + 1}:" in run.err


def test_report_draws_which_attempt_refined_which(
    cli: Any, batch_output: Path, tmp_path: Path
) -> None:
    target = tmp_path / "report.html"
    assert cli("report", str(batch_output), "--html", str(target)).code == 0
    page = parse(target.read_text())
    rows = [json.loads(line) for line in batch_output.read_text().splitlines()]
    expected = {
        (str(a["parent"]), str(a["index"]))
        for r in rows
        for a in r["attempts"]
        if a.get("parent") is not None
    }
    assert expected  # the batch refined something
    drawn = {(line["data-from"], line["data-to"]) for line in page.find("line", "refines")}
    assert drawn == expected
    assert len(page.find("svg", "attempt-tree")) == len(rows)
    assert len(page.find("circle", "attempt")) == sum(len(r["attempts"]) for r in rows)


# -- what the legends and tables say --------------------------------------------------------


def test_the_legends_say_what_the_plot_and_the_tree_draw(
    cli: Any, batch_output: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    assert cli("report", str(batch_output), "--html", str(report)).code == 0
    page = Elements()
    page.feed(report.read_text())
    text = "".join(page.text)
    # One swatch per colour the four task lines are drawn in, not one blue for all.
    swatches = page.find("i", "swatch task-swatch")
    assert [s["style"] for s in swatches] == [
        f"background:{c};width:.6rem" for c in TASK_COLORS[:4]
    ]
    assert "one line per task, each in its own colour" in text
    # The tree's hollow, filled and ringed dots are explained, and the result is ringed.
    assert "a fresh attempt (written anew, refining none)" in text
    assert "a refinement (the arrow comes from the attempt it refines)" in text
    assert "the result (the best response)" in text
    rows = [json.loads(line) for line in batch_output.read_text().splitlines()]
    assert len(page.find("circle", "best-ring")) == len(rows)
    # The attempts table gives the response the widest column.
    assert len(page.find("col", "response")) == len(rows)


def test_best_index_is_the_chosen_or_the_best_scored_attempt_holding_the_result() -> None:
    from langgraph_refine.cli._report import TaskRecord, best_index

    def attempt(index: int, response: str, score: float) -> dict[str, Any]:
        return {"index": index, "response": response, "evaluation": {"score": score}}

    def record(value: str, attempts: list[dict[str, Any]], **extra: Any) -> TaskRecord:
        return TaskRecord("a", "t", value, None, None, "passed", 0, [], attempts, **extra)

    attempts = [attempt(0, "x", 0.9), attempt(1, "y", 0.5), attempt(2, "x", 0.95)]
    assert best_index(record("x", attempts)) == 2
    assert best_index(record("x", attempts[:2])) == 0
    assert best_index(record("y", attempts, selection={"chosen": 1})) == 1
    assert best_index(record("z", attempts)) is None


LAYOUT = """<script>
for (const d of document.querySelectorAll('details')) d.open = true;
const tables = [...document.querySelectorAll('table')].filter(t => t.caption).map(t => ({
  caption: t.caption.getBoundingClientRect().left, table: t.rows[0].getBoundingClientRect().left}));
const attempts = document.querySelector('table.attempts');
const cells = [...attempts.rows[1].cells].map(c => c.getBoundingClientRect().width);
const out = document.createElement('pre');
out.id = 'layout';
out.textContent = JSON.stringify({tables, cells, width: attempts.getBoundingClientRect().width,
  body: document.body.getBoundingClientRect().width});
document.body.appendChild(out);
</script>"""


@pytest.mark.browser
@pytest.mark.slow
def test_captions_sit_on_their_tables_and_responses_get_room_in_chromium(
    chromium_binary: str, cli: Any, batch_output: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    assert cli("report", str(batch_output), "--html", str(report)).code == 0
    measured = tmp_path / "layout.html"
    measured.write_text(report.read_text().replace("</body>", LAYOUT + "</body>"))
    dom = run_chromium(measured, tmp_path, "--dump-dom").stdout
    match = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert match, "the layout script did not run"
    layout = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert layout["tables"], "the report has captioned tables"
    for table in layout["tables"]:  # each caption starts where its table starts
        assert abs(table["caption"] - table["table"]) <= 2, table
    # The attempts table spans the task; its response column is the widest.
    cells = layout["cells"]
    assert cells[-1] == max(cells) and cells[-1] > 0.3 * layout["width"]
    assert layout["width"] > 0.8 * layout["body"] - 60
