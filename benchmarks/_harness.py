"""The benchmark harness: interleaved timing, statistics, machine facts, and RESULTS.md.

Every figure is a ratio of variants measured side by side in one run: the variants are
interleaved (their order rotates every repetition), each repetition yields one ratio, and
the report gives the median ratio with its spread (the 25th-75th percentile range).
"""

from __future__ import annotations

import asyncio
import atexit
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS_JSON = HERE / "results.json"
RESULTS_MD = HERE / "RESULTS.md"


@dataclass
class Figure:
    """One reported number.

    Attributes:
        name: What was measured.
        value: The median (or the single measured value).
        unit: `"x"` for ratios, `"%"`, `"s"`, `"B"`, `""`.
        target: The goal in words (`"<= 1.2x"`), or `""` for context figures.
        passed: True/False against the target, None for context figures.
        spread: The spread over repetitions, in words (`"1.05-1.12"`), or `""`.
    """

    name: str
    value: float
    unit: str = "x"
    target: str = ""
    passed: bool | None = None
    spread: str = ""


@dataclass
class BenchResult:
    """What one benchmark reports.

    Attributes:
        name: The benchmark's name (as given on the command line).
        title: A one-line description.
        figures: The numbers, headline first.
        notes: Markdown paragraphs: method, why a target was missed, where time goes.
        tables: Extra markdown tables (raw timings, per-variant details).
        date: When it ran (UTC, ISO 8601).
        seconds: How long it took.
        machine: The machine it ran on.
    """

    name: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    date: str = ""
    seconds: float = 0.0
    machine: dict[str, Any] = field(default_factory=dict)


# -- one event loop -----------------------------------------------------------------------

_loop: asyncio.AbstractEventLoop | None = None


def run_async(coro: Any) -> Any:
    """Run `coro` on the process's one benchmark event loop.

    Every benchmark shares one loop: LangChain's OpenAI client keeps its async connection
    pool bound to the loop that first used it, so a second `asyncio.run` would break it.
    """
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
        atexit.register(_loop.close)
    return _loop.run_until_complete(coro)


def tutorial_graph(state: Any, generate: Any, evaluate: Any, route: Callable[[Any], str]) -> Any:
    """LangGraph's evaluator-optimizer tutorial loop, compiled: the benchmarks' yardstick.

    generate -> evaluate -> a conditional edge back to generate (`route` says
    "rejected") or to the end ("accepted").
    """
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(state)
    builder.add_node("generate", generate)
    builder.add_node("evaluate", evaluate)
    builder.add_edge(START, "generate")
    builder.add_edge("generate", "evaluate")
    builder.add_conditional_edges("evaluate", route, {"accepted": END, "rejected": "generate"})
    return builder.compile()


# -- statistics ---------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """The 25th and 75th percentiles (both the value itself for one sample)."""
    if len(values) < 2:
        return float(values[0]), float(values[0])
    q = statistics.quantiles(values, n=4, method="inclusive")
    return float(q[0]), float(q[2])


def spread_text(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """`"p25-p75 (n=N)"` for the report."""
    low, high = quartiles(values)
    return f"{fmt.format(low)}-{fmt.format(high)} (n={len(values)})"


def ratio_figure(
    name: str, ratios: Sequence[float], *, target: float | None, fmt: str = "{:.2f}"
) -> Figure:
    """A ratio figure: the median of per-repetition ratios against an upper-bound target."""
    value = median(ratios)
    return Figure(
        name=name,
        value=value,
        unit="x",
        target=f"<= {target}x" if target is not None else "",
        passed=None if target is None else value <= target,
        spread=spread_text(ratios, fmt),
    )


# -- timing -------------------------------------------------------------------------------


def interleave(
    variants: Mapping[str, Callable[[], Any]], repeats: int, *, warmup: int = 1
) -> dict[str, list[float]]:
    """Time each variant `repeats` times, rotating their order every repetition.

    Rotating the order spreads drifts of the machine (other processes, CPU frequency)
    evenly over the variants, so the ratios of one repetition compare like with like.
    A variant that returns a float reports its own measurement (e.g. the fastest of
    several calls); otherwise the call's wall time is used.

    Returns:
        Seconds for each variant, one entry per repetition, in repetition order.
    """
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(repeats):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            start = time.perf_counter()
            value = variants[name]()
            elapsed = time.perf_counter() - start
            times[name].append(value if isinstance(value, float) else elapsed)
    return times


# -- machine ------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    """The facts that make a figure comparable: cores, CPU, RAM, versions."""
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "ram_gb": _ram_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "langgraph": _version("langgraph"),
        "langgraph-checkpoint": _version("langgraph-checkpoint"),
        "langchain-core": _version("langchain-core"),
        "langgraph-refine": _version("langgraph-refine"),
    }


def now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


# -- results ------------------------------------------------------------------------------


def load_results(path: Path = RESULTS_JSON) -> dict[str, BenchResult]:
    """The stored results, by benchmark name (empty if none yet)."""
    if not path.exists():
        return {}
    raw = json.loads(path.read_text())
    out: dict[str, BenchResult] = {}
    for name, item in raw.items():
        figures = [Figure(**f) for f in item.pop("figures", [])]
        out[name] = BenchResult(figures=figures, **item)
    return out


def save_results(results: Mapping[str, BenchResult], path: Path = RESULTS_JSON) -> None:
    path.write_text(json.dumps({k: asdict(v) for k, v in results.items()}, indent=2) + "\n")


def _fmt_value(figure: Figure) -> str:
    if figure.unit == "x":
        return f"{figure.value:.2f}x"
    if figure.unit == "%":
        return f"{figure.value:.2f}%"
    if figure.unit == "s":
        return f"{figure.value:.3f} s"
    if figure.unit == "B":
        return f"{figure.value:,.0f} B"
    return f"{figure.value:.3g}{figure.unit}"


def _status(figure: Figure) -> str:
    if figure.passed is None:
        return "(context)"
    return "**pass**" if figure.passed else "**MISS**"


def render(results: Mapping[str, BenchResult], order: Sequence[str]) -> str:
    """The RESULTS.md text: summary table, machine, then one section per benchmark."""
    names = [n for n in order if n in results] + [n for n in results if n not in order]
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`python -m benchmarks`); run one benchmark with "
        "`make bench BENCH=name`. Every ratio compares variants measured side by side in one "
        "run, interleaved; the value is the median over repetitions and the spread is the "
        "25th-75th percentile range of the per-repetition figures.",
        "",
        "## Summary",
        "",
        "| benchmark | figure | value | spread | target | result |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in names:
        for fig in results[name].figures:
            lines.append(
                f"| `{name}` | {fig.name} | {_fmt_value(fig)} | {fig.spread or '-'} | "
                f"{fig.target or '-'} | {_status(fig)} |"
            )
    lines += ["", "## Machine", ""]
    machines = {json.dumps(results[n].machine, sort_keys=True) for n in names}
    latest = max(names, key=lambda n: results[n].date) if names else None
    if latest is not None:
        lines.append("| fact | value |")
        lines.append("| --- | --- |")
        for key, value in results[latest].machine.items():
            lines.append(f"| {key} | {value} |")
        if len(machines) > 1:
            lines += [
                "",
                "Some benchmarks ran on a different machine or package set; "
                "each section below names its own.",
            ]
    lines += ["", "| benchmark | date (UTC) | run time |", "| --- | --- | --- |"]
    for name in names:
        r = results[name]
        lines.append(f"| `{name}` | {r.date} | {r.seconds:.0f} s |")
    for name in names:
        r = results[name]
        lines += ["", f"## `{name}`: {r.title}", ""]
        if len(machines) > 1:
            m = r.machine
            lines += [
                f"Machine: {m.get('cores')} cores, {m.get('cpu')}, {m.get('ram_gb')} GB, "
                f"Python {m.get('python')}, langgraph {m.get('langgraph')}.",
                "",
            ]
        for note in r.notes:
            lines += [note.strip(), ""]
        for table in r.tables:
            lines += [table.strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
