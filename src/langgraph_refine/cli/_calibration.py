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
from langgraph_refine.cli._errors import CliError
from langgraph_refine.evaluators._calibrate import (
    CalibratedEvaluator,
    CalibrationReport,
    calibrate,
    read_calibration,
)
from langgraph_refine.evaluators._labels import Label, read_labels, store_labels

_SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Calibration:
    """A calibration file read for a run: the checks it was made for, and its report.

    Attributes:
        path: The file.
        judge: The checks it was made for, as written (`-e` specs, or `judge`).
        report: The calibration.
    """

    path: Path
    judge: str
    report: CalibrationReport

    def wrap(self, evaluator: Any, specs: Sequence[EvaluatorSpec]) -> CalibratedEvaluator:
        """The run's evaluator, calibrated.

        Raises:
            CliError: If the run's checks are not the ones the file was made for.
        """
        given = checks_text(specs)
        if given != self.judge:
            raise CliError(
                f"--calibration {self.path} was made for the checks {self.judge!r}, but this run "
                f"judges with {given!r}: a calibration is only valid for its own judge; run with "
                f"the same -e specs, or calibrate these checks (langgraph-refine calibrate "
                f"LABELS -e ...)",
                exit_code=2,
            )
        return CalibratedEvaluator(evaluator, self.report)


def checks_text(specs: Sequence[EvaluatorSpec]) -> str:
    """The checks as the file names them: the specs as written, or `judge`."""
    return ", ".join(spec.text for spec in specs) or "judge"


def read_for_run(path: Path) -> Calibration:
    """The calibration `--calibration FILE` names.

    Raises:
        CliError: (exit 2) if the file is missing or not a calibration.
    """
    try:
        judge, report = read_calibration(path)
    except ValueError as exc:
        raise CliError(f"--calibration: {exc}", exit_code=2) from None
    return Calibration(path, judge, report)


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
        raise CliError(f"--store {path} is not a usable SQLite database: {exc}") from None


def run_calibration(
    labels: list[Label],
    evaluator: Any,
    *,
    alpha: float,
    confidence: float,
) -> CalibratedEvaluator:
    """Calibrate, the warning of an unmet `alpha` kept for the table (not printed twice).

    Raises:
        CliError: (exit 2) for an `alpha` or `confidence` out of range.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return calibrate(evaluator, labels, alpha=alpha, confidence=confidence)
    except ValueError as exc:
        raise CliError(str(exc).replace("alpha must", "--alpha must"), exit_code=2) from None


def show_report(console: Console, report: CalibrationReport, checks: str) -> None:
    """The agreement table (calibrated judge beside the judge alone) and the threshold."""
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
                f"{report.confidence:.0%} confidence",
                style="bold green",
            )
        )
    else:
        console.print(
            Text(
                f"alpha {report.alpha} not met: the held-out false-PASS bound is "
                f"{report.bound:.3f} with these {report.n} labels; the calibrated judge passes "
                "nothing. Add labels, or allow a larger --alpha",
                style="bold red",
            )
        )
    if report.unjudged:
        console.print(Text(f"{report.unjudged} label(s) could not be judged", style="yellow"))


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


JudgeFactory = Callable[[], Any]
