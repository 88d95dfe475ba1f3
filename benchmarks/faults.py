"""Provider faults on the client stack users run: a fault-injecting server, ChatOpenAI, both paths.

Every model is built as users build it: `ChatOpenAI(model=..., base_url=..., api_key=...)`
with its defaults (its own retries and timeout included), talking over a real socket to
an OpenAI-compatible server on loopback (`benchmarks/_fault_proxy.py`) that fails requests
on a seeded schedule: HTTP 500, 429 with `Retry-After`, 408, hangs, connection resets,
malformed and truncated bodies, and unreadable judge replies. The server records every
request it receives, when, and when its exchange ended, so the benchmark counts what the
provider received, not what the library reports.

The same seeds run through the graph (`refine` / `arefine`) and through an agent
(`create_agent` + `RefineMiddleware`, `invoke` / `ainvoke`), under
`Budget(max_calls=10, max_seconds=4)`, several runs at a time. After the last run the
benchmark keeps watching the server, so requests a run sends after it returned are seen.
Per path, mode and fault rate:

- requests over `max_calls`: requests the server received past the budget's 10;
- requests missing from `usage.calls`: requests received that the run's result (or its
  error's `.result`) does not report;
- requests after return: requests that arrived after the run returned or raised; and
  requests still open (neither answered nor closed by the client) 0.5 s after it;
- overshoot: the run's wall time past `max_seconds`;
- `.result` kept: raised runs carrying `.result`; lost: raised without it after a paid reply.

Then kill -9: a child process runs a checkpointed loop (SQLite, PostgreSQL) on `ChatOpenAI`,
is killed while the server holds one of its requests, and is resumed by a new process; a
repeated call is a request beyond an uninterrupted run's (the one cut off is allowed).

Goals: 0 for each count, overshoot <= 0.5 s, at most one repeated call per kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from benchmarks._fault_proxy import FAULTS, HANG, FaultProxy, Received, Schedule
from benchmarks._fault_worker import CLIENTS, build
from benchmarks._harness import BenchResult, Figure, md_table, run_async
from langgraph_refine import Budget, RefineResult

MAX_CALLS = 10
MAX_SECONDS = 4.0
RATES = (0.1, 0.3)
PATHS = ("graph", "agent")
MODES = ("sync", "async")
AT_ONCE = 6
"""Runs of one cell in flight together: the deadline is measured under load."""
AFTER = 0.3
"""Seconds of slack before a request counts as arriving after its run returned: the
server stamps a request once its thread has read it, which a loaded machine delays. A
client's own retry waits longer than this (OpenAI's and Anthropic's first wait >= 0.375 s)."""
OPEN_AFTER = 0.5
"""A request still open this long after its run returned was left open by the run."""
WATCH = HANG + 4.0
"""Seconds the server is watched after the last run returns (a hang, then a client retry)."""
POSTGRES = os.environ.get(
    "LANGGRAPH_REFINE_TEST_POSTGRES_URI", "postgresql://postgres@127.0.0.1:5432/test"
)
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    """One run: what it returned or raised, when, and (after the watch) what the server received.

    Attributes:
        run: The run's name (its model's name, the server's key).
        result: The result, or the raised error's `.result`; None if neither.
        error: The error raised, or None.
        seconds: Wall time from the call to its return.
        returned: `time.monotonic()` at the return.
        requests: The requests the server received for this run.
    """

    run: str
    result: RefineResult | None
    error: BaseException | None
    seconds: float
    returned: float
    requests: list[Received] = field(default_factory=list)


def settings() -> dict[str, Any]:
    """The loop's options: its defaults, under the budget."""
    return {"budget": Budget(max_calls=MAX_CALLS, max_seconds=MAX_SECONDS)}


def _finish(run: str, started: float, value: Any, read: Callable[[Any], Any]) -> Outcome:
    now = time.monotonic()
    if isinstance(value, BaseException):
        result = getattr(value, "result", None)
        return Outcome(run, result, value, now - started, now)
    return Outcome(run, read(value), None, now - started, now)


def _calls(
    path: str, url: str, run: str, client: str, options: dict[str, Any]
) -> tuple[Callable[[], Any], Callable[[], Awaitable[Any]], Callable[[Any], Any]]:
    """A run's sync call, its async call, and how to read its result from what they return.

    The graph runs as `refine` / `arefine`; the agent as `invoke` / `ainvoke`.
    """
    if path == "graph":
        from benchmarks._fault_worker import TASK, chat_model
        from langgraph_refine import arefine, refine
        from langgraph_refine.evaluators import llm_judge

        model = chat_model(url, run, client)
        judge = llm_judge(model)
        return (
            lambda: refine(model, TASK, judge, **options),
            lambda: arefine(model, TASK, judge, **options),
            lambda result: result,
        )
    compile_with, first, read = build(path, url, run, client, **options)
    agent = compile_with(None)
    return lambda: agent.invoke(first), lambda: agent.ainvoke(first), read


def run_sync(
    path: str, url: str, run: str, options: dict[str, Any] | None = None, client: str = "openai"
) -> Outcome:
    """One run on `path`, driven with `refine` / `invoke` (`settings()` unless `options`)."""
    call, _, read = _calls(path, url, run, client, settings() if options is None else options)
    started = time.monotonic()
    try:
        value = call()
    except Exception as exc:
        value = exc
    return _finish(run, started, value, read)


async def run_async_once(path: str, url: str, run: str, client: str = "openai") -> Outcome:
    """One run on `path`, driven with `arefine` / `ainvoke`."""
    _, call, read = _calls(path, url, run, client, settings())
    started = time.monotonic()
    try:
        value = await call()
    except Exception as exc:
        value = exc
    return _finish(run, started, value, read)


def run_cell(
    proxy: FaultProxy, cell: tuple[str, str, str, float], seeds: Sequence[int]
) -> list[Outcome]:
    """Every seed's run of one cell (client, path, mode, fault rate), `AT_ONCE` at a time.

    The same seed gets the same faults in every cell.
    """
    client, path, mode, rate = cell
    names = [f"{client}-{path}-{mode}-{rate:.0%}-{seed}" for seed in seeds]
    for name, seed in zip(names, seeds, strict=True):
        proxy.schedules[name] = Schedule(rate=rate, seed=seed)
    if mode == "sync":
        with ThreadPoolExecutor(AT_ONCE) as pool:
            return list(
                pool.map(lambda name: run_sync(path, proxy.url, name, client=client), names)
            )
    gate = asyncio.Semaphore(AT_ONCE)

    async def one(name: str) -> Outcome:
        async with gate:
            return await run_async_once(path, proxy.url, name, client)

    async def every() -> list[Outcome]:
        return list(await asyncio.gather(*(one(name) for name in names)))

    outcomes: list[Outcome] = run_async(every())
    return outcomes


def watch(proxy: FaultProxy, outcomes: Sequence[Outcome]) -> None:
    """Watch the server `WATCH` s past the last return, then give each outcome its requests.

    The benchmark's event loop runs meanwhile, so async runs' leftover tasks go on too.
    """
    last = max(o.returned for o in outcomes)
    left = last + WATCH - time.monotonic()
    if left > 0:
        run_async(asyncio.sleep(left))  # async runs' leftover tasks go on meanwhile
    for outcome in outcomes:
        outcome.requests = proxy.of(outcome.run)


def paid_before_return(outcome: Outcome) -> bool:
    """Whether a reply was answered whole before the run returned (work that was paid)."""
    return any(r.outcome == "answered" and r.ended <= outcome.returned for r in outcome.requests)


def tally(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """The cell's counts (see the module's docstring)."""
    raised = [o for o in outcomes if o.error is not None]
    reported = [o for o in outcomes if o.result is not None]
    return {
        "runs": len(outcomes),
        "finished": len(outcomes) - len(raised),
        "raised": len(raised),
        "raised with .result": sum(1 for o in raised if o.result is not None),
        "raised without .result after a paid reply": sum(
            1 for o in raised if o.result is None and paid_before_return(o)
        ),
        "requests": sum(len(o.requests) for o in outcomes),
        "requests over max_calls": sum(max(len(o.requests) - MAX_CALLS, 0) for o in outcomes),
        "runs over max_calls": sum(1 for o in outcomes if len(o.requests) > MAX_CALLS),
        "most requests in a run": max((len(o.requests) for o in outcomes), default=0),
        "requests missing from usage": sum(
            max(len(o.requests) - o.result.usage.calls, 0) for o in reported if o.result
        ),
        "requests after return": sum(
            1 for o in outcomes for r in o.requests if r.at > o.returned + AFTER
        ),
        "replies paid after return": sum(
            1
            for o in outcomes
            for r in o.requests
            if r.outcome == "answered" and r.ended > o.returned + AFTER
        ),
        "requests left open": sum(
            1
            for o in outcomes
            for r in o.requests
            if r.at <= o.returned + AFTER and (not r.ended or r.ended > o.returned + OPEN_AFTER)
        ),
        "overshoot": max((max(o.seconds - MAX_SECONDS, 0.0) for o in outcomes), default=0.0),
        "median seconds": statistics.median(o.seconds for o in outcomes) if outcomes else 0.0,
    }


def worst_overshoot(outcomes: Sequence[Outcome]) -> str:
    """The run that ended latest past `max_seconds`, with its requests' timeline."""
    worst = max(outcomes, key=lambda o: o.seconds)
    start = worst.returned - worst.seconds
    timeline = ", ".join(
        f"{r.kind} {r.fault or 'ok'} at {r.at - start:.2f} s"
        + (f" ({r.outcome} at {r.ended - start:.2f} s)" if r.ended else " (never ended)")
        for r in worst.requests
    )
    ended = f"raised {type(worst.error).__name__}" if worst.error else "returned"
    stop = worst.result.stop_reason if worst.result is not None else None
    return (
        f"The run that ended latest: `{worst.run}` {ended} after {worst.seconds:.2f} s "
        f"(stop_reason {stop}); its requests: {timeline or 'none'}."
    )


# -- a judge that cannot judge, a budget's last call, LangChain's retry middleware --------


@dataclass(frozen=True)
class Scenario:
    """One focused case, run once per path.

    Attributes:
        name: What the case is.
        schedule: Its faults.
        options: The loop's options besides its defaults.
        goal: The goal in words.
        met: Whether an outcome meets the goal.
        paths: The paths it runs on.
        retry_middleware: Whether LangChain's `ModelRetryMiddleware` (2 retries,
            `on_failure="error"`) wraps the agent's model calls around `RefineMiddleware`.
    """

    name: str
    schedule: Callable[[], Schedule]
    options: Callable[[], dict[str, Any]]
    goal: str
    met: Callable[[Outcome], bool]
    paths: tuple[str, ...] = PATHS
    retry_middleware: bool = False


def _unjudged_within(most: int) -> Callable[[Outcome], bool]:
    def met(outcome: Outcome) -> bool:
        stop = outcome.result.stop_reason if outcome.result is not None else None
        return stop == "unjudged" and len(outcome.requests) <= most

    return met


def _unjudged_drafts(outcome: Outcome) -> int:
    """Drafts the server answered that no judge request followed (without faults)."""
    kinds = [r.kind for r in outcome.requests]
    return max(kinds.count("draft") - kinds.count("judge"), 0)


def _counted_model_error(outcome: Outcome) -> bool:
    result = outcome.result
    return (
        result is not None
        and result.stop_reason == "model_error"
        and len(outcome.requests) <= 2 * MAX_CALLS
        and result.usage.calls == len(outcome.requests)
    )


SCENARIOS = (
    Scenario(
        "every judge reply unreadable",
        lambda: Schedule(always={"judge": "unreadable"}),
        lambda: {"budget": Budget(max_seconds=30)},
        "stop_reason unjudged, <= 10 requests (2 drafts, 4 tries a judgment)",
        _unjudged_within(10),
    ),
    Scenario(
        "every judge request fails (HTTP 500)",
        lambda: Schedule(always={"judge": "500"}),
        lambda: {"budget": Budget(max_seconds=20)},
        "stop_reason unjudged, <= 10 requests (2 drafts, 4 tries a judgment)",
        _unjudged_within(10),
    ),
    Scenario(
        "Budget(max_calls=3), no faults",
        Schedule,
        lambda: {"budget": Budget(max_calls=3)},
        "no paid draft left unjudged",
        lambda outcome: _unjudged_drafts(outcome) == 0,
    ),
    Scenario(
        "ModelRetryMiddleware around RefineMiddleware, drafts fail after the first",
        lambda: Schedule(always={"draft": "500"}, after=2),
        lambda: {"budget": Budget(max_calls=2 * MAX_CALLS, max_seconds=30)},
        f"<= {2 * MAX_CALLS} requests (max_calls), all in usage; raises with .result, "
        "stop_reason model_error",
        _counted_model_error,
        paths=("agent",),
        retry_middleware=True,
    ),
)


def run_scenario(proxy: FaultProxy, scenario: Scenario, path: str) -> Outcome:
    """`scenario` once on `path` (sync), its requests read after a watch of its own."""
    from langchain.agents.middleware import ModelRetryMiddleware

    from benchmarks._fault_worker import TASK, chat_model
    from langgraph_refine import RefineMiddleware
    from langgraph_refine.evaluators import llm_judge

    name = f"scenario-{SCENARIOS.index(scenario)}-{path}"
    proxy.schedules[name] = scenario.schedule()
    if scenario.retry_middleware:
        from langchain.agents import create_agent

        model = chat_model(proxy.url, name)
        refine_mw = RefineMiddleware(llm_judge(model), **scenario.options())
        retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.1, on_failure="error")
        stack: list[Any] = [retry, refine_mw]  # the retry middleware around the loop's
        agent = create_agent(model, tools=[], middleware=stack)
        started = time.monotonic()
        try:
            value: Any = agent.invoke({"messages": [HumanMessage(TASK)]})
        except Exception as exc:
            value = exc
        outcome = _finish(name, started, value, refine_mw.result)
    else:
        outcome = run_sync(path, proxy.url, name, scenario.options())
    time.sleep(2.0)  # a request sent late shows here
    outcome.requests = proxy.of(name)
    return outcome


def scenarios(proxy: FaultProxy) -> list[tuple[Scenario, str, Outcome]]:
    """Every scenario on each of its paths, all at once."""
    cases = [(s, path) for s in SCENARIOS for path in s.paths]
    with ThreadPoolExecutor(len(cases)) as pool:
        outcomes = list(pool.map(lambda case: run_scenario(proxy, *case), cases))
    return [(s, path, o) for (s, path), o in zip(cases, outcomes, strict=True)]


def scenario_table(done: Sequence[tuple[Scenario, str, Outcome]]) -> str:
    rows = []
    for scenario, path, outcome in done:
        kinds = [r.kind for r in outcome.requests]
        result = outcome.result
        rows.append(
            [
                scenario.name,
                path,
                kinds.count("draft"),
                kinds.count("judge"),
                result.usage.calls if result is not None else "-",
                (result.stop_reason or "None") if result is not None else "no .result",
                type(outcome.error).__name__ if outcome.error is not None else "-",
                f"{outcome.seconds:.1f}",
                scenario.goal,
                "**pass**" if scenario.met(outcome) else "**MISS**",
            ]
        )
    return md_table(
        ["case", "path", "draft requests", "judge requests", "usage.calls", "stop_reason",
         "raised", "seconds", "goal", "result"],
        rows,
    )  # fmt: skip


# -- asyncio cancellation inside a request --------------------------------------------------

CANCEL_AT = 3
"""The request (the second draft) inside which a run is cancelled."""
CANCEL_WITHIN = 1.0
"""A cancelled run closes its request in flight within this many seconds."""


async def cancelled(proxy: FaultProxy, path: str, client: str) -> tuple[float, int]:
    """Seconds from an async run's `cancel()`, inside a request, to the request closed.

    The server holds the run's `CANCEL_AT`-th request; 0.1 s after it arrives the run's
    task is cancelled.

    Returns:
        The seconds (`math.inf` if the request is still open 3 s later), and the requests
        the run sent after the cancel (watched for a second after the close).
    """
    name = f"cancel-{client}-{path}"
    schedule = Schedule(hold_at=CANCEL_AT, hold_for=20.0)
    proxy.schedules[name] = schedule
    _, call, _ = _calls(path, proxy.url, name, client, {})
    task = asyncio.ensure_future(call())
    while not schedule.held.is_set() and not task.done():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    cut = time.monotonic()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    held = proxy.of(name)[CANCEL_AT - 1]
    while not held.ended and time.monotonic() < cut + 3.0:
        await asyncio.sleep(0.01)
    await asyncio.sleep(1.0)
    later = sum(1 for r in proxy.of(name) if r.at > cut)
    return (held.ended - cut if held.ended else math.inf), later


def cancels(proxy: FaultProxy, clients: Sequence[str]) -> list[tuple[str, str, float, int]]:
    """`cancelled` on each path for each client: (client, path, seconds, later requests)."""
    return [
        (client, path, *run_async(cancelled(proxy, path, client)))
        for client in clients
        for path in PATHS
    ]


def cancel_table(done: Sequence[tuple[str, str, float, int]]) -> str:
    rows = [
        [CLASSES[client], path, f"{seconds:.2f}" if math.isfinite(seconds) else "still open", later]
        for client, path, seconds, later in done
    ]
    return md_table(
        ["client", "path", "seconds from cancel() to the request closed", "requests after cancel"],
        rows,
    )


# -- kill -9 of a checkpointed run ---------------------------------------------------------


def clean_requests(proxy: FaultProxy, path: str) -> int:
    """Requests of an uninterrupted checkpointed run of the worker's loop on `path`."""
    from langgraph.checkpoint.memory import InMemorySaver

    run = f"clean-{path}-{uuid.uuid4().hex[:8]}"
    compile_with, first, _read = build(path, proxy.url, run)
    config = {"configurable": {"thread_id": run}}
    compile_with(InMemorySaver()).invoke(first, config, durability="sync")
    return len(proxy.of(run))


class Workers:
    """The warm process that forks a fresh process for each loop run (`_fault_worker`)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._fault_worker"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        if self._answer() != "ready":
            raise RuntimeError("the fault worker did not start")

    def _answer(self) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        return line if line == "ready" else json.loads(line)

    def _ask(self, command: dict[str, Any]) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer: int = self._answer()
        return answer

    def start(self, **command: str) -> int:
        """A new process running the loop as `command` says; its pid."""
        return self._ask({"run": command})

    def wait(self, pid: int) -> int:
        """The exit status of process `pid`, once it has ended (-9 for a SIGKILL)."""
        return self._ask({"wait": pid})

    def close(self) -> None:
        """End the warm process (its children have ended)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@dataclass
class Kill:
    """One kill -9 and its resume.

    Attributes:
        path: "graph" or "agent".
        saver: "sqlite" or "postgres".
        at: The request (1-based) inside which the process was killed.
        requests: Requests the server received from both processes.
        repeats: Requests beyond the uninterrupted run's.
        finished: Whether the resumed process finished the loop (a stop reason).
    """

    path: str
    saver: str
    at: int
    requests: int
    repeats: int
    finished: bool


def kill_and_resume(
    proxy: FaultProxy, workers: Workers, path: str, saver: str, seed: int, clean: int,
    folder: Path,
) -> Kill:  # fmt: skip
    """A process killed with SIGKILL while the server holds its `at`-th request, then resumed."""
    rng = random.Random(seed)
    at = rng.randint(1, clean)
    run = f"kill-{path}-{saver}-{seed}-{uuid.uuid4().hex[:8]}"
    spec = f"sqlite:{folder / (run + '.sqlite')}" if saver == "sqlite" else f"postgres:{POSTGRES}"
    schedule = Schedule(hold_at=at)
    proxy.schedules[run] = schedule
    command = {"path": path, "saver": spec, "thread": run, "url": proxy.url}
    pid = workers.start(mode="start", out=str(folder / f"{run}.start.json"), **command)
    held = schedule.held.wait(120)
    if held:
        time.sleep(rng.uniform(0.0, 0.2))  # somewhere inside the call
    os.kill(pid, signal.SIGKILL)
    workers.wait(pid)
    if not held:
        raise RuntimeError(
            f"{run}: request {at} never arrived ({_read(folder / f'{run}.start.json')})"
        )
    out = folder / f"{run}.resume.json"
    workers.wait(workers.start(mode="resume", out=str(out), **command))
    resumed = _read(out)
    if "error" in resumed:
        print(f"   {run}: the resume failed: {resumed['error']}", file=sys.stderr, flush=True)
    finished = bool(resumed.get("result", {}).get("stop_reason"))
    requests = len(proxy.of(run))
    return Kill(path, saver, at, requests, max(requests - clean, 0), finished)


def _read(out: Path) -> dict[str, Any]:
    try:
        answer: dict[str, Any] = json.loads(out.read_text())
    except (OSError, ValueError):
        return {"error": "no result written"}
    return answer


def kills(proxy: FaultProxy, per_saver: int) -> list[Kill]:
    """`per_saver` kills on SQLite and on PostgreSQL, for the graph and the agent."""
    done = []
    workers = Workers()
    try:
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            for path in PATHS:
                clean = clean_requests(proxy, path)
                for saver in ("sqlite", "postgres"):
                    for seed in range(per_saver):
                        done.append(
                            kill_and_resume(proxy, workers, path, saver, seed, clean, folder)
                        )
    finally:
        workers.close()
    return done


# -- the report ----------------------------------------------------------------------------

COLUMNS = (
    "runs",
    "finished",
    "raised",
    "raised with .result",
    "raised without .result after a paid reply",
    "requests",
    "requests over max_calls",
    "runs over max_calls",
    "most requests in a run",
    "requests missing from usage",
    "requests after return",
    "replies paid after return",
    "requests left open",
)
LIMITS = (  # (figure, count key or "overshoot"/"repeats", unit, the most allowed)
    ("requests over max_calls (all runs)", "requests over max_calls", "", 0),
    ("requests missing from usage.calls (all runs)", "requests missing from usage", "", 0),
    ("requests arriving after the run returned (all runs)", "requests after return", "", 0),
    ("requests still open 0.5 s after the run returned (all runs)", "requests left open", "", 0),
    (
        "raised runs without .result after a paid reply (all runs)",
        "raised without .result after a paid reply",
        "",
        0,
    ),
    ("overshoot of max_seconds (worst run)", "overshoot", "s", 0.5),
    ("repeated calls per kill (worst kill)", "repeats", "", 1),
)


def figures(counts: Sequence[dict[str, float]], done: Sequence[Kill]) -> list[Figure]:
    """The headline figures against their goals."""
    worst: dict[str, float] = {key: sum(c[key] for c in counts) for _, key, _, _ in LIMITS[:5]}
    worst["overshoot"] = max((c["overshoot"] for c in counts), default=0.0)
    worst["repeats"] = max((k.repeats for k in done), default=0)
    out = [
        Figure(name, worst[key], unit=unit, target=f"<= {most}" if most else "0",
               passed=worst[key] <= most)
        for name, key, unit, most in LIMITS
    ]  # fmt: skip
    if done:
        out.append(
            Figure(
                "kills resumed to the loop's end",
                sum(k.finished for k in done),
                unit="",
                target=f"{len(done)}",
                passed=all(k.finished for k in done),
            )
        )
    return out


def kill_table(done: Sequence[Kill]) -> str:
    rows = []
    for path in PATHS:
        for saver in ("sqlite", "postgres"):
            these = [k for k in done if k.path == path and k.saver == saver]
            if not these:
                continue
            repeats = [k.repeats for k in these]
            rows.append(
                [
                    path,
                    saver,
                    len(these),
                    " ".join(str(k.at) for k in these),
                    f"{statistics.mean(repeats):.2f}",
                    max(repeats),
                    sum(k.finished for k in these),
                ]
            )
    return md_table(
        ["path", "saver", "kills", "killed inside request", "repeats per kill (mean)",
         "repeats (worst)", "resumed to the end"],
        rows,
    )  # fmt: skip


CLASSES = {"openai": "ChatOpenAI", "anthropic": "ChatAnthropic"}


def installed_clients() -> list[str]:
    """`CLIENTS` whose LangChain package is installed (ChatAnthropic's is optional)."""
    present = [c for c in CLIENTS if importlib.util.find_spec(f"langchain_{c}") is not None]
    for client in set(CLIENTS) - set(present):
        print(f"   {CLASSES[client]} is not installed: its rows are left out", flush=True)
    return present


def run(quick: bool = False) -> BenchResult:
    result = BenchResult(
        name="faults",
        title="Provider faults on the client stack (ChatOpenAI and ChatAnthropic defaults, a "
        "real socket): graph and agent, sync and async",
    )
    runs, per_saver = (3, 1) if quick else (30, 10)
    seeds = range(runs)
    clients = installed_clients()
    cells: list[tuple[tuple[str, str, str, float], list[Outcome]]] = []
    with FaultProxy().serve() as proxy:
        for cell in itertools.product(clients, PATHS, MODES, RATES):
            began = time.monotonic()
            cells.append((cell, run_cell(proxy, cell, seeds)))
            took = time.monotonic() - began
            client, path, mode, rate = cell
            print(f"   {CLASSES[client]} {path} {mode} {rate:.0%}: {took:.0f} s", flush=True)
        watch(proxy, [o for _, outcomes in cells for o in outcomes])
        began = time.monotonic()
        focused = scenarios(proxy)
        print(f"   {len(focused)} focused cases: {time.monotonic() - began:.0f} s", flush=True)
        cut = cancels(proxy, clients)
        began = time.monotonic()
        done = kills(proxy, per_saver)
        print(f"   {len(done)} kills: {time.monotonic() - began:.0f} s", flush=True)
    counts = [tally(outcomes) for _, outcomes in cells]
    result.figures += figures(counts, done)
    result.tables.append(
        md_table(
            ["client", "path", "mode", "fault rate", *COLUMNS, "overshoot (worst, s)",
             "median run (s)"],
            [
                [CLASSES[client], path, mode, f"{rate:.0%}", *(int(c[k]) for k in COLUMNS),
                 f"{c['overshoot']:.2f}", f"{c['median seconds']:.2f}"]
                for ((client, path, mode, rate), _), c in zip(cells, counts, strict=True)
            ],
        )
    )  # fmt: skip
    result.figures.append(
        Figure(
            "focused cases meeting their goal (last table)",
            sum(s.met(o) for s, _, o in focused),
            unit="",
            target=f"{len(focused)}",
            passed=all(s.met(o) for s, _, o in focused),
        )
    )
    result.tables.append(kill_table(done))
    result.figures.append(
        Figure(
            "seconds from an asyncio cancel() to the request in flight closed (worst)",
            max(seconds for *_, seconds, _ in cut),
            unit="s",
            target=f"<= {CANCEL_WITHIN}",
            passed=all(seconds <= CANCEL_WITHIN for *_, seconds, _ in cut),
        )
    )
    result.figures.append(
        Figure(
            "requests sent after an asyncio cancel() (all cancels)",
            sum(later for *_, later in cut),
            unit="",
            target="0",
            passed=not any(later for *_, later in cut),
        )
    )
    result.tables.append(scenario_table(focused))
    result.tables.append(cancel_table(cut))
    result.notes.append(
        f"{runs} runs per path, mode and fault rate ({', '.join(f'{r:.0%}' for r in RATES)} of "
        f"requests get a fault, drawn per run from its seed: {', '.join(FAULTS)}; "
        f"`unreadable` for judge requests only; a hang is {HANG:.0f} s then a reset), "
        f"{AT_ONCE} runs at a time. Each run: "
        f"{' and '.join(f'`{CLASSES[c]}(model=..., base_url=..., api_key=...)`' for c in clients)}"
        " with its defaults, judged by `llm_judge` on the same model, the "
        f"loop's defaults (4 iterations, the default retry policy), `Budget(max_calls="
        f"{MAX_CALLS}, max_seconds={MAX_SECONDS:.0f})`; without faults a run makes exactly "
        f"10 requests. The server was watched {WATCH:.0f} s past the last return. A request "
        f"counts after return if it arrived more than {AFTER} s after the run returned, "
        f"open if it was neither answered nor closed by the client {OPEN_AFTER} s after."
    )
    result.notes.append(
        f"Cancels: an async run (`arefine`, `ainvoke`, the loop's defaults) whose task is "
        f"cancelled 0.1 s into its request {CANCEL_AT}, which the server holds; the time is "
        "until the server sees the client close that request."
    )
    result.notes.append(worst_overshoot([o for _, outcomes in cells for o in outcomes]))
    result.notes.append(
        f"Kills: {per_saver} per path and saver (SQLite, PostgreSQL): a child process runs "
        'the checkpointed loop (`durability="sync"`) on `ChatOpenAI`, is killed with SIGKILL '
        "0-0.2 s into a request the server holds (the request drawn from the seed), and a new "
        "process resumes the thread with `invoke(None)`. A repeat is a request beyond the "
        "uninterrupted run's; the one cut off by the kill is allowed."
    )
    return result
