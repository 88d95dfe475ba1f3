"""The `report` verb: a self-contained HTML page about a batch's output file.

The page needs no network and no script: a summary table (stop reasons, mean first and
best score), an inline SVG plot of the score per round of every task plus the mean best
score so far over all tasks, and per-task details with every attempt. All text from the
file is HTML-escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeGuard

from langgraph_refine._decisions._strategy import MoveStats, round_stats
from langgraph_refine._display import cost_text
from langgraph_refine._records._record import StrategyRecord
from langgraph_refine._state import Attempt
from langgraph_refine.cli._batch import read_jsonl
from langgraph_refine.cli._errors import USAGE, CliError, cli_words, one_line
from langgraph_refine.cli._ladder_view import (
    DEFAULT_COLOR,
    merge,
    model_colors,
    model_legend,
    models_table,
    per_model,
)
from langgraph_refine.cli._svg import svg_start

PLOT_WIDTH, PLOT_HEIGHT = 760, 380
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 24, 20, 44
MEAN_COLOR = "#d62728"
TASK_COLORS = (
    "#1f77b4",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#e377c2",
)


@dataclass
class TaskRecord:
    """One output line, read leniently (missing fields get neutral values).

    Attributes:
        id: The task's id.
        task: The task text.
        value: The best response.
        score: The best score, if any attempt was evaluated.
        verdict: The best attempt's verdict.
        stop_reason: Why its loop stopped.
        iterations: Refinement rounds run.
        score_history: One score per evaluated attempt.
        attempts: The attempts as dicts (`index`, `response`, `evaluation`, `output`,
            `reasoning`).
        error: Why the task failed (a row written by a failed task), else None.
        calls: Model calls the task made, if the row says.
        cache_hits: Replies the model cache gave the task (not calls), if the row says.
        cost: US dollars the task spent, if the row says and its price was known.
        output: A typed run's best object (plain JSON), else None.
        selection: With `--select pairwise`, how the result was chosen: the candidates,
            each comparison (`pair`, `verdicts`, `outcome`) and the `chosen` index.
    """

    id: Any
    task: str
    value: str
    score: float | None
    verdict: str | None
    stop_reason: str
    iterations: int
    score_history: list[float]
    attempts: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    calls: int | None = None
    cache_hits: int | None = None
    cost: float | None = None
    output: Any = None
    selection: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskRecord:
        """Build from one output line's object.

        Raises:
            ValueError: If a field has the wrong type.
        """
        attempts = data.get("attempts") or []
        if not isinstance(attempts, list):
            raise ValueError(f"'attempts' must be a list, got {type(attempts).__name__}")
        history = data.get("score_history")
        if history is None:
            history = [
                a["evaluation"]["score"]
                for a in attempts
                if isinstance(a, dict) and a.get("evaluation")
            ]
        if not isinstance(history, list) or not all(_is_number(s) for s in history):
            raise ValueError(f"'score_history' must be a list of numbers, got {history!r:.80}")
        usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
        score = data.get("score")
        if score is not None and not _is_number(score):
            raise ValueError(f"'score' must be a number or null, got {score!r:.80}")
        return cls(
            id=data.get("id"),
            task=str(data.get("task", "")),
            value=str(data.get("value", "")),
            score=float(score) if score is not None else None,
            verdict=data.get("verdict"),
            stop_reason=str(data.get("stop_reason", "unknown")),
            iterations=int(data.get("iterations") or max(len(attempts) - 1, 0)),
            score_history=[float(s) for s in history],
            attempts=[a for a in attempts if isinstance(a, dict)],
            error=cli_words(str(data["error"])) if data.get("error") else None,
            calls=_count(usage.get("calls")),
            cache_hits=_count(usage.get("cache_hits")),
            cost=float(usage["cost"]) if _is_number(usage.get("cost")) else None,
            output=data.get("output"),
            selection=data["selection"] if isinstance(data.get("selection"), dict) else None,
        )

    @property
    def first_score(self) -> float | None:
        """The first attempt's score."""
        return self.score_history[0] if self.score_history else None

    @property
    def best_score(self) -> float | None:
        """The best score (the loop's reported one, else the history's maximum)."""
        if self.score is not None:
            return self.score
        return max(self.score_history) if self.score_history else None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cost_summary(records: Sequence[TaskRecord]) -> str:
    """The batch's total cost, and how many tasks' cost is unknown."""
    known = [r.cost for r in records if r.cost is not None]
    unknown = len(records) - len(known)
    if not known:
        return "unknown (no row holds a priced usage)"
    text = cost_text(sum(known))
    return text + (f" + {unknown} task(s) with an unknown cost" if unknown else "")


RESULT_FIELDS = frozenset(
    {"value", "score", "attempts", "error", "score_history", "stop_reason", "usage"}
)
"""A batch row holds at least one of these; an input line (`id`, `task`, options) none."""


def read_records(path: Path, warn: Callable[[str], None]) -> list[TaskRecord]:
    """Read a batch output file; a bad line is warned about (with its number) and skipped.

    Reruns append, so a task may have several rows (an error, then its retry): the last
    row of each id counts, in the place of its first row.

    Raises:
        CliError: If the file cannot be read or holds no usable line.
    """
    records: dict[str, TaskRecord] = {}
    inputs: list[int] = []  # lines that hold a task but no result: a batch's input lines
    for number, text in read_jsonl(path, what="input file (a batch's --out)"):
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, got {type(data).__name__}")
            if not RESULT_FIELDS & data.keys():
                inputs.append(number)
                continue
            record = TaskRecord.from_json(data)
            records[json.dumps(record.id)] = record
        except json.JSONDecodeError as exc:
            warn(f"{path}:{number}: malformed JSON line ({exc.msg} at column {exc.colno}); skipped")
        except (ValueError, TypeError, KeyError) as exc:
            warn(f"{path}:{number}: {exc}; skipped")
    if not records and inputs:
        raise CliError(
            f"{path} holds no results: its lines are tasks without a value, attempts or "
            "error (a batch's input file?); pass the file `langgraph-refine batch` wrote "
            "with --out",
            USAGE,
        )
    if not records:
        raise CliError(
            f"{path} holds no task results; write one with langgraph-refine batch ... --out {path}",
            USAGE,
        )
    for number in inputs:
        warn(f"{path}:{number}: a task without a result (no value, attempts or error); skipped")
    return list(records.values())


def failure_lines(records: Sequence[TaskRecord]) -> list[str]:
    """One line per failed task, `id X: error`, for the terminal."""
    return [f"failed: id {r.id!r}: {one_line(r.error)}" for r in records if r.error]


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def mean_best_so_far(records: Sequence[TaskRecord]) -> list[float]:
    """Per round, the mean over tasks of the best score reached so far.

    A task that stopped earlier keeps its final best, so the curve shows where the whole
    batch stood after each round.
    """
    histories = [r.score_history for r in records if r.score_history]
    if not histories:
        return []
    rounds = max(len(h) for h in histories)
    curve = []
    for k in range(rounds):
        bests = [max(h[: k + 1]) for h in histories]
        curve.append(sum(bests) / len(bests))
    return curve


def _x(k: int, rounds: int) -> float:
    inner = PLOT_WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    if rounds <= 1:
        return MARGIN_LEFT + inner / 2
    return MARGIN_LEFT + inner * k / (rounds - 1)


def _y(score: float) -> float:
    inner = PLOT_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    return MARGIN_TOP + inner * (1.0 - max(0.0, min(1.0, score)))


def _points(scores: Sequence[float], rounds: int) -> str:
    return " ".join(f"{_x(k, rounds):.1f},{_y(s):.1f}" for k, s in enumerate(scores))


def _dots(scores: Sequence[float], rounds: int, radius: float, color: str) -> str:
    return "".join(
        f'<circle class="point" cx="{_x(k, rounds):.1f}" cy="{_y(s):.1f}" r="{radius}" '
        f'fill="{color}"/>'
        for k, s in enumerate(scores)
    )


def score_plot(records: Sequence[TaskRecord]) -> str:
    """The SVG plot: one line per task, and the batch's mean best score so far."""
    mean = mean_best_so_far(records)
    rounds = max(len(mean), 1)
    parts = svg_start("score-plot", "score per round", PLOT_WIDTH, PLOT_HEIGHT)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = _y(tick)
        parts.append(
            f'<line class="grid" x1="{MARGIN_LEFT}" x2="{PLOT_WIDTH - MARGIN_RIGHT}" y1="{y:.1f}" '
            f'y2="{y:.1f}" stroke="#e4e4e4" stroke-width="1"/>'
            f'<text x="{MARGIN_LEFT - 8}" y="{y + 4:.1f}" text-anchor="end" font-size="12" '
            f'fill="#555">{tick:.2f}</text>'
        )
    for k in range(rounds):
        parts.append(
            f'<text x="{_x(k, rounds):.1f}" y="{PLOT_HEIGHT - MARGIN_BOTTOM + 18}" '
            f'text-anchor="middle" font-size="12" fill="#555">{k}</text>'
        )
    parts.append(
        f'<text x="{(PLOT_WIDTH + MARGIN_LEFT) / 2:.1f}" y="{PLOT_HEIGHT - 6}" '
        'text-anchor="middle" font-size="13" fill="#333">round (0 = first attempt)</text>'
    )
    for i, record in enumerate(records):
        if not record.score_history:
            continue
        color = TASK_COLORS[i % len(TASK_COLORS)]
        label = html.escape(f"{record.id}: {' → '.join(_fmt(s) for s in record.score_history)}")
        parts.append(
            f'<g class="task-series" data-id="{html.escape(str(record.id), quote=True)}">'
            f"<title>{label}</title>"
            f'<polyline class="task-line" fill="none" stroke="{color}" stroke-opacity="0.75" '
            f'stroke-width="2" points="{_points(record.score_history, rounds)}"/>'
            + _dots(record.score_history, rounds, 3.5, color)
            + "</g>"
        )
    if mean:
        parts.append(
            '<g class="mean-series"><title>mean best score so far, all tasks</title>'
            f'<polyline class="mean-line" fill="none" stroke="{MEAN_COLOR}" stroke-width="4" '
            f'points="{_points(mean, rounds)}"/>' + _dots(mean, rounds, 5, MEAN_COLOR) + "</g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def sparkline(scores: Sequence[float], color: str) -> str:
    """A small SVG of one task's scores, for its details row."""
    width, height, pad = 140, 32, 4
    if not scores:
        return ""
    n = len(scores)

    def point(k: int, s: float) -> str:
        x = pad + (width - 2 * pad) * (k / (n - 1) if n > 1 else 0.5)
        y = pad + (height - 2 * pad) * (1.0 - max(0.0, min(1.0, s)))
        return f"{x:.1f},{y:.1f}"

    points = " ".join(point(k, s) for k, s in enumerate(scores))
    dots = "".join(
        f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2.5" fill="{color}"/>'
        for p in points.split()
    )
    return (
        f'<svg class="sparkline" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>'
        f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>{dots}</svg>'
    )


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:60rem;
color:#222;padding:0 1rem;background:#fff}
h1{margin-bottom:.2rem}.meta{color:#666;margin-top:0}
table{border-collapse:collapse;margin:1rem 0}th,td{border:1px solid #ddd;padding:.35rem .6rem;
text-align:left;vertical-align:top}th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
details.task{border:1px solid #ddd;border-radius:6px;margin:.6rem 0;padding:.4rem .8rem}
details.task>summary{cursor:pointer;display:flex;gap:1rem;align-items:center;flex-wrap:wrap}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:.6rem;
border-radius:4px;margin:.3rem 0}
.legend span{display:inline-block;margin-right:1.2rem}
.swatch{display:inline-block;width:1.4rem;height:.3rem;vertical-align:middle;margin-right:.4rem}.verdict-PASS{color:#1a7f37}.verdict-FAIL{color:#b42318}
.verdict-NEEDS_IMPROVEMENT{color:#9a6700}.verdict-unjudged{color:#6e7781;font-style:italic}
.error{color:#b42318}
pre.object{background:#f6f8fa}details.reasoning summary{color:#777;cursor:pointer;font-size:.85em}
caption{caption-side:top;text-align:left;font-weight:600;padding:0 0 .3rem;white-space:nowrap}
table.attempts{width:100%;table-layout:fixed}
table.attempts col.index{width:2.6rem}table.attempts col.origin{width:6.5rem}
table.attempts col.score{width:3.8rem}table.attempts col.verdict{width:7.5rem}
table.attempts col.feedback{width:28%}
table.attempts td{overflow-wrap:anywhere}table.attempts pre{max-height:18rem;overflow:auto}
table.attempts td[class^=verdict]{overflow-wrap:normal}
.legend.tree span{margin-right:1rem}.legend.tree svg{vertical-align:middle;margin-right:.3rem}
"""


def render_report(
    records: Sequence[TaskRecord],
    *,
    source: str,
    kept: Mapping[str, StrategyRecord] | None = None,
    extra: str = "",
) -> str:
    """The whole HTML page for `records` read from `source` (and strategy records `kept`).

    `extra` is HTML added after the score plot (`report --calibration`: the judge's
    calibration and its false-PASS plot).
    """
    firsts = [r.first_score for r in records]
    bests = [r.best_score for r in records]
    gains = [b - f for f, b in zip(firsts, bests, strict=True) if f is not None and b is not None]
    reasons: dict[str, int] = {}
    for record in records:
        reasons[record.stop_reason] = reasons.get(record.stop_reason, 0) + 1
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")  # noqa: UP017 - clearer
    failed = [r for r in records if r.error]
    summary_rows = [
        ("tasks", str(len(records))),
        ("failed tasks", str(len(failed))),
        ("mean first score", _fmt(_mean(firsts))),
        ("mean best score", _fmt(_mean(bests))),
        ("mean gain (best - first)", _fmt(_mean(gains))),
        ("mean refinement rounds", _fmt(_mean([float(r.iterations) for r in records]))),
        ("model calls", str(sum(r.calls or 0 for r in records))),
        ("cache hits (no call, no cost)", str(sum(r.cache_hits or 0 for r in records))),
        ("cost (USD)", html.escape(cost_summary(records))),
    ]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Refinement report — {html.escape(source)}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Refinement report</h1>",
        f'<p class="meta">{len(records)} task(s) from <code>{html.escape(source)}</code>, '
        f"generated {now} by langgraph-refine</p>",
        '<section id="summary"><h2>Summary</h2><table class="summary"><tbody>',
        *(f'<tr><th>{html.escape(k)}</th><td class="num">{v}</td></tr>' for k, v in summary_rows),
        "</tbody></table>",
        models_table(_batch_models(records)),
        '<table class="stop-reasons"><thead><tr><th>stop reason</th><th>tasks</th><th>share</th>'
        "<th>mean first</th><th>mean best</th></tr></thead><tbody>",
    ]
    for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        group = [r for r in records if r.stop_reason == reason]
        out.append(
            f'<tr><td>{html.escape(reason)}</td><td class="num">{count}</td>'
            f'<td class="num">{count / len(records):.0%}</td>'
            f'<td class="num">{_fmt(_mean([r.first_score for r in group]))}</td>'
            f'<td class="num">{_fmt(_mean([r.best_score for r in group]))}</td></tr>'
        )
    out.append("</tbody></table></section>")
    out.append(moves_section(records, kept))
    if failed:
        out.append(_failed_section(failed))
    out += [
        '<section id="plot"><h2>Score per round</h2>',
        score_plot(records),
        '<p class="legend">'
        f'<span><i class="swatch" style="background:{MEAN_COLOR}"></i>mean best score so far '
        "(all tasks)</span>"
        f"<span>{_task_swatches(records)}one line per task, each in its own colour "
        "(hover a line for its task's id)</span></p></section>",
        extra,
        '<section id="tasks"><h2>Tasks</h2>',
    ]
    for i, record in enumerate(records):
        out.append(_task_details(record, TASK_COLORS[i % len(TASK_COLORS)]))
    out.append("</section></body></html>")
    return "\n".join(out) + "\n"


def _task_swatches(records: Sequence[TaskRecord]) -> str:
    """A swatch per colour the task lines are drawn in (each colour once)."""
    drawn = [TASK_COLORS[i % len(TASK_COLORS)] for i, r in enumerate(records) if r.score_history]
    colors = list(dict.fromkeys(drawn)) or [TASK_COLORS[0]]
    return "".join(
        f'<i class="swatch task-swatch" style="background:{c};width:.6rem"></i>' for c in colors
    )


def _task_models(record: TaskRecord) -> str:
    """Calls and cost by model of one task, when several models wrote its attempts."""
    models = per_model(record.attempts)
    return models_table(models) if len(models) > 1 else ""


def _batch_models(records: Sequence[TaskRecord]) -> dict[str, dict[str, Any]]:
    """Attempts, calls and cost by model over every task of the batch."""
    totals: dict[str, dict[str, Any]] = {}
    for record in records:
        merge(totals, per_model(record.attempts))
    return totals


def _failed_section(failed: Sequence[TaskRecord]) -> str:
    esc = html.escape
    rows = "".join(
        f'<tr class="failed-task" data-id="{esc(str(r.id), quote=True)}">'
        f"<td>{esc(str(r.id))}</td><td><pre>{esc(r.error or '')}</pre></td>"
        f'<td class="num">{len(r.attempts)}</td></tr>'
        for r in failed
    )
    return (
        '<section id="failed"><h2>Failed tasks</h2>'
        "<p>These tasks ended with an error; rerun the batch with the same output to retry "
        "them.</p>"
        '<table class="failed"><thead><tr><th>id</th><th>error</th><th>attempts</th></tr>'
        f"</thead><tbody>{rows}</tbody></table></section>"
    )


def attempt_tree(attempts: Sequence[dict[str, Any]], best: Any = None) -> str:
    """An SVG of which attempt refined which, with a legend saying how to read it.

    One dot per attempt (x: order, y: score), an arrow from each refined attempt to its
    refinement; fresh attempts (refined from none) are hollow, refinements filled; the
    attempt of index `best` (the task's result) has a ring around its dot.
    """
    if not attempts:
        return ""
    colors = model_colors(attempts)  # a ladder: each model's attempts in its own color
    width, height, pad = max(160, 60 * len(attempts)), 120, 20
    where: dict[Any, tuple[float, float]] = {}
    for k, attempt in enumerate(attempts):
        score = (attempt.get("evaluation") or {}).get("score")
        value = float(score) if score is not None and _is_number(score) else 0.0
        y = height - pad - value * (height - 2 * pad)
        where[attempt.get("index", k)] = (pad + k * 60.0, y)
    parts = [
        f'<svg class="attempt-tree" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker>'
        "</defs>"
    ]
    for attempt in attempts:
        parent = attempt.get("parent")
        if parent in where:
            (x1, y1), (x2, y2) = where[parent], where[attempt.get("index")]
            parts.append(
                f'<line class="refines" data-from="{parent}" data-to="{attempt.get("index")}" '
                f'x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2 - 6:.1f}" y2="{y2:.1f}" stroke="#555" '
                'marker-end="url(#arrow)"/>'
            )
    for attempt in attempts:
        x, y = where[attempt.get("index")]
        fresh = attempt.get("parent") is None
        model = attempt.get("model")
        color = colors.get(model, DEFAULT_COLOR) if isinstance(model, str) else DEFAULT_COLOR
        by = f" by {html.escape(model)}" if isinstance(model, str) and model else ""
        chosen = best is not None and attempt.get("index") == best
        if chosen:
            parts.append(
                f'<circle class="best-ring" cx="{x:.1f}" cy="{y:.1f}" r="10" fill="none" '
                f'stroke="{color}" stroke-width="1.5"/>'
            )
        kind = "fresh attempt" if fresh else f"refines #{attempt.get('parent')}"
        parts.append(
            f'<circle class="attempt" cx="{x:.1f}" cy="{y:.1f}" r="6" stroke="{color}" '
            f'stroke-width="2" data-model="{html.escape(str(model or ""), quote=True)}" '
            f'fill="{"#ffffff" if fresh else color}"><title>attempt '
            f"{attempt.get('index')}{by}: {kind}{', the result' if chosen else ''}</title></circle>"
            f'<text x="{x:.1f}" y="{height - 4}" text-anchor="middle" font-size="11">'
            f"#{attempt.get('index')}</text>"
        )
    parts.append("</svg>")
    return "".join(parts) + _tree_legend(best is not None) + model_legend(colors)


def _tree_legend(ringed: bool) -> str:
    """How to read the attempt tree: filled, hollow and ringed dots, arrows, height."""

    def dot(fill: str, ring: bool = False) -> str:
        extra = '<circle cx="9" cy="9" r="8" fill="none" stroke="#555" stroke-width="1.2"/>'
        return (
            '<svg width="18" height="18" viewBox="0 0 18 18">'
            + (extra if ring else "")
            + f'<circle cx="9" cy="9" r="5" fill="{fill}" stroke="#555" stroke-width="2"/></svg>'
        )

    items = [
        f"<span>{dot('#555')}a refinement (the arrow comes from the attempt it refines)</span>",
        f"<span>{dot('#ffffff')}a fresh attempt (written anew, refining none)</span>",
    ]
    if ringed:
        items.append(f"<span>{dot('#ffffff', ring=True)}the result (the best response)</span>")
    items.append("<span>height: the attempt's score</span>")
    return f'<p class="legend tree">{"".join(items)}</p>'


def best_index(record: TaskRecord) -> Any:
    """The index of the attempt that is the task's result, or None.

    The selection's choice, else the best-scored attempt whose response is the result.
    """
    chosen = (record.selection or {}).get("chosen")
    if chosen is not None:
        return chosen
    matching = [a for a in record.attempts if a.get("response") == record.value]
    if not matching:
        return None

    def score(attempt: dict[str, Any]) -> float:
        value = (attempt.get("evaluation") or {}).get("score")
        return float(value) if _is_number(value) else -1.0

    return max(matching, key=score).get("index")  # max keeps the first of equal scores


def _task_details(record: TaskRecord, color: str) -> str:
    esc = html.escape
    history = " → ".join(_fmt(s) for s in record.score_history) or "no evaluated attempt"
    rows = []
    for attempt in record.attempts:
        evaluation = attempt.get("evaluation") or {}
        verdict = evaluation.get("verdict") or ""
        score = evaluation.get("score")
        feedback = str(evaluation.get("feedback", ""))
        if attempt.get("error") and not evaluation:  # the judge could not judge it
            verdict, feedback = "unjudged", f"not judged: {attempt['error']}"
        shown = esc(str(verdict)).replace("_", "_<wbr>")  # NEEDS_IMPROVEMENT breaks at its _
        rows.append(
            f'<tr><td class="num">{esc(str(attempt.get("index", "")))}</td>'
            f"<td>{_origin(attempt)}</td>"
            f'<td class="num">{_fmt(score if _is_number(score) else None)}</td>'
            f'<td class="verdict-{esc(str(verdict))}">{shown}</td>'
            f"<td><pre>{esc(feedback)}</pre></td>"
            f"<td>{_reasoning(attempt.get('reasoning'))}{_answer(attempt)}</td></tr>"
        )
    attempts = (
        attempt_tree(record.attempts, best_index(record))
        + '<table class="attempts"><colgroup><col class="index"><col class="origin">'
        '<col class="score"><col class="verdict"><col class="feedback"><col class="response">'
        "</colgroup><thead><tr><th>#</th><th>from</th><th>score</th><th>verdict</th>"
        "<th>feedback</th><th>response</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        if rows
        else "<p>No attempts were recorded in this line.</p>"
    )
    error = record.error
    summary_error = (
        f'<span class="error">failed: {esc(one_line(error, 120))}</span>' if error else ""
    )
    error_block = f"<h4>Error</h4><pre>{esc(error)}</pre>" if error else ""
    return (
        f'<details class="task" data-id="{esc(str(record.id), quote=True)}"><summary>'
        f"<strong>{esc(str(record.id))}</strong>{sparkline(record.score_history, color)}"
        f"<span>{esc(history)}</span><span>stop: {esc(record.stop_reason)}</span>"
        f"<span>{esc(cost_text(record.cost))}</span>"
        f"{summary_error}</summary>{error_block}"
        f"<h4>Task</h4><pre>{esc(record.task)}</pre>"
        f"<h4>Best response (score {_fmt(record.best_score)})</h4>{_best(record)}"
        f"{selection_section(record.selection)}"
        f"<h4>Attempts</h4>{attempts}{_task_models(record)}</details>"
    )


def selection_section(selection: Mapping[str, Any] | None) -> str:
    """How a pairwise selection chose the result: every comparison, both orders, the winner."""
    if not selection:
        return ""
    esc = html.escape
    chosen = selection.get("chosen")
    method = str(selection.get("method", ""))
    rows = []
    for comparison in selection.get("comparisons") or []:
        if not isinstance(comparison, Mapping):
            continue
        pair = comparison.get("pair") or []
        verdicts = comparison.get("verdicts") or []
        outcome = comparison.get("outcome")
        rows.append(
            f"<tr><td>#{esc(str(pair[0] if pair else ''))} vs #"
            f"{esc(str(pair[1] if len(pair) > 1 else ''))}</td>"
            f"<td>{esc(str(verdicts[0] if verdicts else ''))}</td>"
            f"<td>{esc(str(verdicts[1] if len(verdicts) > 1 else ''))}</td>"
            f"<td>{'tie' if outcome == 'tie' else '#' + esc(str(outcome))}</td></tr>"
        )
    table = (
        '<table class="selection"><thead><tr><th>pair</th><th>in order</th>'
        "<th>swapped</th><th>outcome</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        if rows
        else ""
    )
    candidates = ", ".join(f"#{c}" for c in selection.get("candidates") or [])
    note = selection.get("note")
    return (
        f"<h4>Selection ({esc(method)})</h4><p>Compared {esc(candidates) or 'nothing'}; "
        f"chosen: #{esc(str(chosen))}.{(' ' + esc(str(note))) if note else ''}</p>{table}"
    )


def batch_moves(records: Sequence[TaskRecord]) -> dict[str, MoveStats]:
    """The rounds of every task, counted by kind of move (as the strategy record counts them).

    A row whose attempts cannot be read is left out.
    """
    total: dict[str, MoveStats] = {}
    for record in records:
        try:
            attempts = [Attempt.model_validate(a) for a in record.attempts]
        except ValueError:
            continue
        for kind, stats in round_stats(attempts).items():
            total[kind] = total[kind] + stats if kind in total else stats
    return total


def moves_section(
    records: Sequence[TaskRecord], kept: Mapping[str, StrategyRecord] | None = None
) -> str:
    """The moves the batch made and how often each raised the best; the stored record too."""
    out = [
        '<section id="moves"><h2>Moves</h2>',
        "<p>Each refinement round is a kind of move. <em>Raised</em>: it beat every attempt "
        "before it; <em>fell</em>: it scored below the attempt it started from.</p>",
        _moves_table("this batch", batch_moves(records)),
    ]
    for key, record in (kept or {}).items():
        out.append(_moves_table(f"strategy record {key}", record.moves))
    out.append("</section>")
    return "".join(out)


def _moves_table(title: str, moves: Mapping[str, MoveStats]) -> str:
    esc = html.escape
    rows = (
        "".join(
            f'<tr data-move="{esc(kind, quote=True)}"><td>{esc(kind)}</td>'
            f'<td class="num">{stats.rounds}</td><td class="num">{stats.raised}</td>'
            f'<td class="num">{_share(stats.raised, stats.rounds)}</td>'
            f'<td class="num">{stats.fell}</td></tr>'
            for kind, stats in sorted(moves.items())
        )
        or '<tr><td colspan="5">no refinement rounds</td></tr>'
    )
    return (
        f'<table class="moves" data-title="{esc(title, quote=True)}"><caption>{esc(title)}'
        "</caption><thead><tr><th>move</th><th>rounds</th><th>raised the best</th>"
        f"<th>share</th><th>fell</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def _formatted(value: Any) -> str:
    """A typed run's object as formatted JSON, in a `<pre class="object">`."""
    text = json.dumps(value, ensure_ascii=False, indent=2)
    return f'<pre class="object">{html.escape(text)}</pre>'


def _best(record: TaskRecord) -> str:
    if record.output is not None:
        return _formatted(record.output)
    return f"<pre>{html.escape(record.value)}</pre>"


def _origin(attempt: dict[str, Any]) -> str:
    """Where an attempt came from (fresh, a rewrite, edits), and by which model."""
    origin = _refined(attempt)
    model = attempt.get("model")
    if isinstance(model, str) and model:
        origin += f'<br><span class="model">by {html.escape(model)}</span>'
    return origin


def _refined(attempt: dict[str, Any]) -> str:
    parent = attempt.get("parent")
    if parent is None:
        return "fresh"
    edits = attempt.get("edits")
    origin = f"refines #{html.escape(str(parent))}"
    if isinstance(edits, int) and not isinstance(edits, bool):
        shown = f"{edits} edit(s)" if edits else "edits did not apply"
        origin += f'<br><span class="edits" data-edits="{edits}">{shown}</span>'
    return origin


def _answer(attempt: dict[str, Any]) -> str:
    """An attempt's response: its object as formatted JSON when it is a valid one."""
    if attempt.get("output") is not None:
        return _formatted(attempt["output"])
    return f"<pre>{html.escape(str(attempt.get('response', '')))}</pre>"


def _reasoning(reasoning: Any) -> str:
    """The model's reasoning beside its answer, collapsed (it was never judged)."""
    if not reasoning:
        return ""
    return (
        '<details class="reasoning"><summary>reasoning</summary>'
        f"<pre>{html.escape(str(reasoning))}</pre></details>"
    )


def write_report(
    source: Path,
    target: Path,
    warn: Callable[[str], None],
    *,
    kept: Mapping[str, StrategyRecord] | None = None,
    extra: str = "",
) -> list[TaskRecord]:
    """Read `source` and write the HTML report to `target`.

    Args:
        source: The batch's output file.
        target: The HTML file to write.
        warn: Receives one message per unreadable line.
        kept: Strategy records from a store to show beside the batch's own moves.
        extra: HTML added after the score plot (see `render_report`).

    Returns:
        The tasks in the report.

    Raises:
        CliError: If the source cannot be read or the target cannot be written (exit
            code 2; an old report is left whole).
    """
    from langgraph_refine.cli._files import write_whole

    records = read_records(source, warn)
    if target.is_dir():
        raise CliError(
            f"--html {target} is a folder; give a file name, e.g. {target / 'report.html'}",
            USAGE,
        )
    page = render_report(records, source=source.name, kept=kept, extra=extra)
    write_whole(target, page, option="--html")  # a failure leaves an old report whole
    return records
