"""The same provider faults on the graph and on an agent, sync and async (scripted).

A scripted provider answers each call (the generator's and the judge's) as a seeded
fault schedule says: a normal reply, or, at the fault rate, one of the faults a real
provider shows — HTTP 500, 429 with `Retry-After`, a connection reset wrapped by the
client library (`__cause__`), a 200 reply whose body is not JSON, a 401 (not transient)
and, for the judge, a garbage verdict. The same schedule runs through `refine` /
`arefine` and through `create_agent` + `RefineMiddleware` (`invoke` / `ainvoke`), each
with `max_calls` and the default policy's tries (fast waits). Per path and mode:

- runs finished; runs raised, and of those how many carried `.result` once a paid
  attempt existed (a raised run without it loses paid work);
- lost paid calls: requests the provider received that no result or error reports;
- budget overruns: runs whose provider received more than `max_calls` requests;
- repeated calls per kill: the run is crashed inside a random call (an exception that
  nothing catches, as a kill leaves nothing of the step it cuts), then resumed from its
  checkpoint; a repeat is a call made again for work already paid;
- a hung call under `max_seconds`: the run's wall time past the budget.

The goal is parity with the graph: no raised run without `.result`, no lost paid call,
at most one repeated call per kill, no budget overrun.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine import Budget, RefineMiddleware, RefineResult, arefine, refine
from langgraph_refine._calls._retry import DEFAULT_RETRY_POLICY
from langgraph_refine.evaluators import llm_judge

TASK = "Write one line about the sea."
MAX_CALLS = 10
POLICY = DEFAULT_RETRY_POLICY._replace(  # the default's tries and rule, without its waits
    initial_interval=0.001, backoff_factor=1.0, max_interval=0.01, jitter=False
)
FAULTS = ("500", "429", "reset", "malformed", "401")
HANG = 4.0


class ProviderError(Exception):
    """An HTTP error as a client library raises it: a status, the response's headers."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"Error code: {status}")
        self.status_code = status
        self.response = SimpleNamespace(status_code=status, headers=headers or {})


class Crash(BaseException):
    """Stands for `kill -9` inside a call: nothing of the step it cuts is written."""


def raise_fault(fault: str) -> None:
    if fault == "500":
        raise ProviderError(500)
    if fault == "429":
        raise ProviderError(429, {"retry-after-ms": "1"})
    if fault == "reset":
        try:
            raise ConnectionResetError("connection reset by peer")
        except ConnectionResetError as cause:
            raise RuntimeError("the client could not read the reply") from cause
    if fault == "malformed":
        json.loads('{"id": "chatcmpl", "choi')  # a truncated body, read by the client
    if fault == "401":
        raise ProviderError(401)


@dataclass
class Provider:
    """The scripted provider: every request counted, each answered by the schedule."""

    rate: float
    seed: int
    crash_at: int | None = None  # the request inside which the process "dies"
    hang_at: int | None = None  # the request that hangs for `HANG` seconds
    requests: int = 0
    log: list[str] = field(default_factory=list)  # what each request was for

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def answer(self, what: str, reply: Callable[[], str]) -> str:
        """One request: counted, then crashed, failed or answered as the schedule says."""
        self.requests += 1
        self.log.append(what)
        if self.crash_at is not None and self.requests == self.crash_at:
            self.crash_at = None
            raise Crash
        if self.rng.random() < self.rate:
            raise_fault(self.rng.choice(FAULTS))
        return reply()


class Scripted(BaseChatModel):
    """A chat model on the scripted provider: drafts, or (as the judge) JSON verdicts."""

    provider: Any
    judge: bool = False

    @property
    def _llm_type(self) -> str:
        return "scripted-faults"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:  # type: ignore[override]
        """No tools to bind: the agents here have none."""
        return self

    def with_structured_output(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported: the judge reads the JSON text."""
        raise NotImplementedError

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.provider.hang_at == self.provider.requests + 1:
            time.sleep(HANG)  # a sync client blocks: the loop abandons the call's thread
        return self._answer(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.provider.hang_at == self.provider.requests + 1:
            await asyncio.sleep(HANG)  # an async client's hang: cancelled by the deadline
        return self._answer(messages)

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        prompt = str(messages[-1].content)
        text = self.provider.answer(
            "judge" if self.judge else "draft", lambda: self._reply(prompt, messages)
        )
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    def _reply(self, prompt: str, messages: list[BaseMessage]) -> str:
        if not self.judge:
            done = sum(1 for m in messages if isinstance(m, AIMessage) and m.text)
            return f"The sea, version {done}: waves under a grey sky."
        if self.provider.rng.random() < self.provider.rate / 2:
            return "I think it is quite good overall."  # garbage: no verdict to read
        score = 0.5 + 0.1 * prompt.count("version")
        return json.dumps(
            {"verdict": "NEEDS_IMPROVEMENT", "score": min(score, 0.8), "feedback": "Name a colour."}
        )


def options() -> dict[str, Any]:
    return {
        "max_iterations": 3,
        "retry_policy": POLICY,
        "on_evaluator_error": "skip",
        "budget": Budget(max_calls=MAX_CALLS),
    }


@dataclass
class Outcome:
    """One run: its result or error, and what its provider received."""

    result: RefineResult | None
    error: BaseException | None
    requests: int
    seconds: float


def run_once(
    path: str, mode: str, provider: Provider, extra: dict[str, Any] | None = None
) -> Outcome:
    model, judge = Scripted(provider=provider), Scripted(provider=provider, judge=True)
    settings = {**options(), **(extra or {})}
    started = time.perf_counter()
    try:
        if path == "graph":
            call = refine if mode == "sync" else None
            if call is not None:
                result = call(model, TASK, llm_judge(judge), **settings)
            else:
                result = asyncio.run(arefine(model, TASK, llm_judge(judge), **settings))
        else:
            middleware = RefineMiddleware(llm_judge(judge), **settings)
            agent = create_agent(model, tools=[], middleware=[middleware])
            request = {"messages": [HumanMessage(TASK)]}
            state = agent.invoke(request) if mode == "sync" else asyncio.run(agent.ainvoke(request))
            result = middleware.result(state)
        error = None
    except Exception as exc:
        result, error = getattr(exc, "result", None), exc
    return Outcome(result, error, provider.requests, time.perf_counter() - started)


def crash_and_resume(path: str, mode: str, seed: int) -> int:
    """Calls repeated after a crash inside a random call and a resume from the checkpoint."""
    clean = Provider(rate=0.0, seed=seed)
    run_once(path, mode, clean)
    provider = Provider(
        rate=0.0, seed=seed, crash_at=random.Random(seed).randint(1, clean.requests)
    )
    model, judge = Scripted(provider=provider), Scripted(provider=provider, judge=True)
    settings = {**options(), "budget": None}
    saver, config = InMemorySaver(), {"configurable": {"thread_id": f"{path}-{mode}-{seed}"}}
    if path == "graph":
        from langgraph_refine import create_refine_graph

        runner: Any = create_refine_graph(model, llm_judge(judge), **settings).compile(
            checkpointer=saver
        )
        first: Any = {"task": TASK}
    else:
        middleware = RefineMiddleware(llm_judge(judge), **settings)
        runner = create_agent(model, tools=[], middleware=[middleware], checkpointer=saver)
        first = {"messages": [HumanMessage(TASK)]}
    for given in (first, None):
        try:
            if mode == "sync":
                runner.invoke(given, config)
            else:
                asyncio.run(runner.ainvoke(given, config))
            break
        except Crash:
            continue
    # Every request past an uninterrupted run's count was made again (the one cut off
    # by the crash is the one allowed).
    return max(provider.requests - clean.requests, 0)


def hung_call(path: str, mode: str) -> float:
    """Seconds past `max_seconds=1` of a run whose second call hangs for `HANG` seconds."""
    provider = Provider(rate=0.0, seed=0, hang_at=2)
    outcome = run_once(path, mode, provider, {"budget": Budget(max_seconds=1.0)})
    return max(outcome.seconds - 1.0, 0.0)


def tally(outcomes: list[Outcome]) -> dict[str, float]:
    raised = [o for o in outcomes if o.error is not None]
    paid = [o for o in raised if o.requests > 0]
    with_result = [o for o in paid if o.result is not None and o.result.attempts]
    # A raised run with no attempt yet has no result to carry: only the first call failed.
    lost_runs = [
        o for o in paid if (o.result is None or not o.result.attempts) and not _first_call_only(o)
    ]
    reported = [o.result.usage.calls for o in outcomes if o.result is not None]
    lost_calls = sum(
        max(o.requests - (o.result.usage.calls if o.result is not None else 0), 0)
        for o in outcomes
        if not _first_call_only(o)
    )
    return {
        "runs": len(outcomes),
        "finished": len(outcomes) - len(raised),
        "raised": len(raised),
        "raised with .result": len(with_result),
        "raised without .result after paid work": len(lost_runs),
        "lost paid calls": lost_calls,
        "over max_calls": sum(1 for o in outcomes if o.requests > MAX_CALLS),
        "calls reported": sum(reported),
    }


def _first_call_only(outcome: Outcome) -> bool:
    """A run that failed on its first draft: nothing was bought, nothing to carry."""
    return (
        outcome.error is not None
        and (outcome.result is None or not outcome.result.attempts)
        and outcome.requests <= POLICY.max_attempts
    )


def run(quick: bool = False) -> BenchResult:
    result = BenchResult(
        name="faults",
        title="The same provider faults on the graph and on an agent, sync and async (scripted)",
    )
    runs, kills = (10, 4) if quick else (30, 10)
    rates = (0.1, 0.3)
    rows = []
    worst: dict[str, float] = {
        "raised without .result after paid work": 0,
        "lost paid calls": 0,
        "over max_calls": 0,
        "repeats per kill": 0.0,
        "past max_seconds": 0.0,
    }
    for path in ("graph", "agent"):
        for mode in ("sync", "async"):
            for rate in rates:
                counts = tally([run_once(path, mode, Provider(rate, seed)) for seed in range(runs)])
                repeats = [crash_and_resume(path, mode, seed) for seed in range(kills)]
                per_kill = max(repeats)
                late = hung_call(path, mode)
                rows.append(
                    [
                        path,
                        mode,
                        f"{rate:.0%}",
                        counts["runs"],
                        counts["finished"],
                        counts["raised"],
                        counts["raised with .result"],
                        counts["raised without .result after paid work"],
                        counts["lost paid calls"],
                        counts["over max_calls"],
                        f"{sum(repeats) / len(repeats):.2f} (max {per_kill})",
                        f"{late:.2f}",
                    ]
                )
                for key in (
                    "raised without .result after paid work",
                    "lost paid calls",
                    "over max_calls",
                ):
                    worst[key] = max(worst[key], counts[key])
                worst["repeats per kill"] = max(worst["repeats per kill"], per_kill)
                worst["past max_seconds"] = max(worst["past max_seconds"], late)
    limits = (  # (figure, worst key, unit, the most allowed)
        (
            "raised runs without .result after paid work (worst path)",
            "raised without .result after paid work",
            "",
            0,
        ),
        ("lost paid calls (worst path)", "lost paid calls", "", 0),
        ("runs over max_calls (worst path)", "over max_calls", "", 0),
        ("repeated calls per kill (worst run)", "repeats per kill", "", 1),
        ("seconds past max_seconds with a hung call (worst path)", "past max_seconds", "s", 0.5),
    )
    result.figures += [
        Figure(
            name,
            worst[key],
            unit=unit,
            target=f"<= {most}" if most else "0",
            passed=worst[key] <= most,
        )
        for name, key, unit, most in limits
    ]
    result.tables.append(
        md_table(
            [
                "path",
                "mode",
                "fault rate",
                "runs",
                "finished",
                "raised",
                "raised with .result",
                "raised without .result (paid)",
                "lost paid calls",
                "over max_calls",
                "repeats per kill",
                "s past max_seconds",
            ],
            rows,
        )
    )
    result.notes.append(
        f"{runs} runs per path, mode and fault rate ({', '.join(f'{r:.0%}' for r in rates)} of "
        f"requests fail: {', '.join(FAULTS)}, and garbage judge verdicts at half the rate), "
        f"max_iterations=3, max_calls={MAX_CALLS}, the default policy's 4 tries with 1-10 ms "
        "waits, on_evaluator_error='skip'. A run that failed on its very first draft has no "
        "paid attempt to carry and is not counted as losing work. Kills: a crash inside a "
        f"random call of the run ({kills} per path and mode), then a resume from an "
        "InMemorySaver checkpoint; a repeat is a request beyond the uninterrupted run's. "
        "Hung call: the second request sleeps 4 s under max_seconds=1."
    )
    return result
