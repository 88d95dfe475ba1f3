"""`calibrate`: fit the run's judge to people's labels; `--calibration FILE` on `run` / `batch`.

`calibrate LABELS -e SPEC ...` judges every labelled response with the checks `-e`
builds (the LLM judge by default), prints how the judge agrees with the people and the
threshold a PASS needs, and writes the calibration file (`--out`). LABELS is a JSONL
file of labels, or the SQLite store file `run --review --store FILE` kept the reviews
in. A run given `--calibration FILE` judges with the same checks, calibrated; the file
names the checks it was made for, and a run with other checks is refused (the
calibration would be stale).
"""

from __future__ import annotations

import html
import sqlite3
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from langgraph_refine._calls._specs import EvaluatorSpec
from langgraph_refine.cli._errors import USAGE, CliError
from langgraph_refine.cli._svg import svg_start
from langgraph_refine.evaluators._calibrate import (
    CalibratedEvaluator,
    CalibrationReport,
    calibrate,
    nothing_passes_text,
    read_calibration,
    unmet_text,
)
from langgraph_refine.evaluators._combine import as_evaluator
from langgraph_refine.evaluators._identity import judge_identity, mismatches
from langgraph_refine.evaluators._labels import Label, read_labels, store_labels

_SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Calibration:
    """A calibration file read for a run: the judge it was made for, and its report.

    Attributes:
        path: The file.
        identity: The judge it was made for (`-e` specs, model, criteria, prompt).
        report: The calibration.
    """

    path: Path
    identity: dict[str, Any]
    report: CalibrationReport

    @property
    def judge(self) -> str:
        """The checks it was made for, as written (`-e` specs, or `judge`)."""
        return str(self.identity.get("spec") or self.identity.get("evaluator") or "judge")

    def wrap(
        self,
        evaluator: Any,
        specs: Sequence[EvaluatorSpec],
        *,
        criteria: Sequence[str] = (),
        require_calibration: bool = False,
    ) -> CalibratedEvaluator:
        """The run's evaluator, calibrated: checked before any call is made.

        Raises:
            CliError: (exit 2) If the run's judge is not the one the file was made for
                (other checks, another model, other criteria or another prompt), or the
                run requires a calibrated PASS and this calibration can pass nothing.
        """
        evaluator = as_evaluator(evaluator, option="evaluator")  # several checks: combined
        current = judge_identity(evaluator, criteria=criteria, spec=checks_text(specs))
        differences = mismatches(self.identity, current)
        if differences:
            raise CliError(
                f"--calibration {self.path} was made for another judge ("
                + "; ".join(differences)
                + "): a calibration is only valid for its own judge; run with the same -e "
                "specs, models and --criterion, or calibrate this judge (langgraph-refine "
                "calibrate LABELS -e ... --criterion ...)",
                exit_code=2,
            )
        calibrated = CalibratedEvaluator(evaluator, self.report, identity=self.identity, warn=False)
        if calibrated.can_pass:
            return calibrated
        if require_calibration:
            raise CliError(
                f"--calibration {self.path}: " + nothing_passes_text(calibrated, required=True),
                exit_code=2,
            )
        from langgraph_refine.cli._app import PROG

        # Said once, in the command line's words (the library's warning is not repeated).
        Console(stderr=True).print(
            Text(f"{PROG}: --calibration {self.path}: ")
            + Text(nothing_passes_text(calibrated, required=False)),
            soft_wrap=True,
        )
        return calibrated


def checks_text(specs: Sequence[EvaluatorSpec]) -> str:
    """The checks as the file names them: the specs as written, or `judge`."""
    return ", ".join(spec.text for spec in specs) or "judge"


def read_for_run(path: Path) -> Calibration:
    """The calibration `--calibration FILE` names.

    Raises:
        CliError: (exit 2) if the file is missing or not a calibration.
    """
    try:
        identity, report = read_calibration(path)
    except ValueError as exc:
        raise CliError(f"--calibration: {exc}", exit_code=2) from None
    return Calibration(path, identity, report)


def read_label_file(path: Path) -> list[Label]:
    """Labels from a JSONL file, or from the reviews kept in a SQLite store file.

    Raises:
        CliError: (exit 2) if the file is missing, empty or holds a malformed label.
    """
    try:
        if _is_sqlite(path):
            with _sqlite_store(path) as store:
                labels = store_labels(store)
            if not labels:
                raise ValueError(
                    f"the store {path} holds no reviews yet: review runs with "
                    f"langgraph-refine run --review --store {path}"
                )
            return labels
        return read_labels(path)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False


@contextmanager
def _sqlite_store(path: Path) -> Iterator[Any]:
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        store = SqliteStore(conn)
        store.setup()
        yield store
    finally:
        conn.close()


@contextmanager
def open_review_store(path: Path | None) -> Iterator[Any]:
    """The SQLite store `run --store FILE` keeps the reviews in (None without `--store`).

    Raises:
        CliError: If the file's folder is missing or the file is not a SQLite database.
    """
    if path is None:
        yield None
        return
    if path.is_dir() or not path.parent.exists():
        raise CliError(f"--store {path}: give a file in an existing folder", exit_code=2)
    try:
        with _sqlite_store(path) as store:
            yield store
    except sqlite3.DatabaseError as exc:
        raise CliError(f"--store {path} is not a usable SQLite database: {exc}", USAGE) from None


def run_calibration(
    labels: list[Label],
    evaluator: Any,
    *,
    alpha: float,
    confidence: float,
    criteria: Sequence[str] = (),
    concurrency: int = 1,
) -> CalibratedEvaluator:
    """Calibrate, the warning of an unmet `alpha` kept for the table (not printed twice).

    Raises:
        CliError: (exit 2) for an `alpha`, `confidence` or `concurrency` out of range.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return calibrate(
                evaluator,
                labels,
                alpha=alpha,
                confidence=confidence,
                criteria=list(criteria),
                concurrency=concurrency,
            )
    except ValueError as exc:
        text = str(exc)
        for name in ("alpha", "confidence", "concurrency"):
            text = text.replace(f"{name} must", f"--{name} must")
        raise CliError(text, exit_code=2) from None


def show_report(console: Console, report: CalibrationReport, checks: str) -> None:
    """The agreement table, the threshold (or what was measured, and advice), unjudged labels.

    The table shows the calibrated judge beside the judge alone.
    """
    table = Table(title=f"agreement with people: {checks} ({report.n} labels)")
    table.add_column("")
    for name in ("accuracy", "kappa", "false PASS", "false FAIL"):
        table.add_column(name, justify="right")
    own = report.judge
    table.add_row(
        "judge alone",
        *(_pct(own.get(k)) for k in ("accuracy", "kappa", "false_pass", "false_fail")),
    )
    table.add_row(
        "calibrated",
        *(_pct(v) for v in (report.accuracy, report.kappa, report.false_pass, report.false_fail)),
    )
    for name, values in report.criteria.items():
        table.add_row(f"criterion: {name}", _pct(values["accuracy"]), _pct(values["kappa"]), "", "")
    console.print(table)
    if report.met and report.threshold is not None:
        console.print(
            Text(
                f"threshold {report.threshold:.3f}: a PASS needs this score; held-out false-PASS "
                f"bound {report.bound:.3f} <= alpha {report.alpha} at "
                f"{report.confidence:.0%} confidence ({_folds(report)})",
                style="bold green",
            ),
            soft_wrap=True,
        )
    else:
        console.print(Text(unmet_text(report), style="bold red"), soft_wrap=True)
    for item in report.unjudged_labels:
        console.print(
            Text(
                f"label {item['label']} ({item['task']!r}) could not be judged: {item['reason']}",
                style="yellow",
            ),
            soft_wrap=True,
        )


def _folds(report: CalibrationReport) -> str:
    if report.grouped:
        return f"folds by task: {report.tasks} tasks, each held out whole"
    return "all labels of one task: the bound holds for new responses to it, not new tasks"


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


JudgeFactory = Callable[[], Any]


PLOT_WIDTH, PLOT_HEIGHT = 640, 320
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 20, 16, 44


def _px(value: float) -> float:
    return _LEFT + (PLOT_WIDTH - _LEFT - _RIGHT) * max(0.0, min(1.0, value))


def _py(value: float) -> float:
    return _TOP + (PLOT_HEIGHT - _TOP - _BOTTOM) * (1.0 - max(0.0, min(1.0, value)))


def calibration_plot(report: CalibrationReport) -> str:
    """An SVG plot of the false-PASS rate (and its bound) against the threshold.

    The dashed line is `alpha`; the vertical line the threshold chosen (none when
    `alpha` was not met).
    """
    points = sorted(report.curve, key=lambda point: point.threshold)
    rate = " ".join(f"{_px(p.threshold):.1f},{_py(p.rate):.1f}" for p in points)
    bound = " ".join(f"{_px(p.threshold):.1f},{_py(p.bound):.1f}" for p in points)
    label = "false-PASS rate against threshold"
    parts = svg_start("calibration-plot", label, PLOT_WIDTH, PLOT_HEIGHT)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line x1="{_LEFT}" x2="{PLOT_WIDTH - _RIGHT}" y1="{_py(tick):.1f}" '
            f'y2="{_py(tick):.1f}" stroke="#e4e4e4"/>'
            f'<text x="{_LEFT - 8}" y="{_py(tick) + 4:.1f}" text-anchor="end" font-size="12" '
            f'fill="#555">{tick:.2f}</text>'
            f'<text x="{_px(tick):.1f}" y="{PLOT_HEIGHT - _BOTTOM + 18}" text-anchor="middle" '
            f'font-size="12" fill="#555">{tick:.2f}</text>'
        )
    parts.append(
        f'<text x="{(PLOT_WIDTH + _LEFT) / 2:.1f}" y="{PLOT_HEIGHT - 6}" text-anchor="middle" '
        'font-size="13" fill="#333">threshold (a PASS needs this score)</text>'
        f'<line class="alpha" x1="{_LEFT}" x2="{PLOT_WIDTH - _RIGHT}" y1="{_py(report.alpha):.1f}" '
        f'y2="{_py(report.alpha):.1f}" stroke="#c0392b" stroke-dasharray="6 4"/>'
    )
    if report.threshold is not None:
        parts.append(
            f'<line class="threshold" x1="{_px(report.threshold):.1f}" '
            f'x2="{_px(report.threshold):.1f}" y1="{_TOP}" y2="{PLOT_HEIGHT - _BOTTOM}" '
            'stroke="#27ae60" stroke-width="2"/>'
        )
    elif report.best_threshold is not None:  # not met: where it came closest
        parts.append(
            f'<line class="best" x1="{_px(report.best_threshold):.1f}" '
            f'x2="{_px(report.best_threshold):.1f}" y1="{_TOP}" y2="{PLOT_HEIGHT - _BOTTOM}" '
            'stroke="#c0392b" stroke-width="1" stroke-dasharray="2 3"/>'
        )
    if points:
        parts.append(
            '<polyline class="bound" fill="none" stroke="#8e44ad" stroke-width="2" '
            f'stroke-dasharray="3 3" points="{bound}"/>'
            f'<polyline class="rate" fill="none" stroke="#2c3e50" stroke-width="2" '
            f'points="{rate}"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def calibration_section(report: CalibrationReport, checks: str) -> str:
    """The HTML section of a calibration: its figures and the false-PASS plot."""
    threshold = "none (alpha not met)" if report.threshold is None else f"{report.threshold:.3f}"
    kind = "held-out" if report.bound_held_out else "in-sample"
    at = "" if report.best_threshold is None else f" at threshold {report.best_threshold:.3f}"
    rows = [
        ("checks", checks),
        ("labels", f"{report.n} ({report.tasks} tasks)"),
        ("threshold", threshold),
        (
            f"best {kind} false-PASS bound",
            f"{report.bound:.3f}{at} (alpha {report.alpha})",
        ),
        ("accuracy / kappa", f"{report.accuracy:.2f} / {report.kappa:.2f}"),
        ("false PASS / false FAIL", f"{report.false_pass:.2f} / {report.false_fail:.2f}"),
    ]
    if report.advice:
        rows.append(("advice", report.advice))
    table = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return (
        '<section id="calibration"><h2>Calibration</h2>'
        f'<table class="summary"><tbody>{table}</tbody></table>'
        + calibration_plot(report)
        + '<p class="legend">solid: the false-PASS rate at each threshold (in the labels); '
        "dotted: its upper confidence bound; dashed: alpha; green: the threshold chosen "
        "(on held-out folds); red dots, when alpha was not met: the threshold of the best "
        "bound reached</p></section>"
    )


def write_page(path: Path, report: CalibrationReport, checks: str) -> None:
    """A self-contained HTML page of a calibration (`calibrate --html`).

    Raises:
        CliError: (exit 2) if the file cannot be written (an old one is left whole).
    """
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>Calibration</title><style>body{font-family:sans-serif;margin:2rem}"
        "th{text-align:left;padding-right:1rem}</style></head><body>"
        + calibration_section(report, checks)
        + "</body></html>\n"
    )
    from langgraph_refine.cli._files import write_whole

    write_whole(path, page, option="--html")
