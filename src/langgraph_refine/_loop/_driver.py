"""How a run is driven: one flow of steps, driven by a thin sync loop and a thin async loop.

`run_flow` is a generator that says what to do next: run the graph (`Run`), read the
thread's state (`ReadState`), or ask the reviewer (`AskReviewer`), and receives each
answer. `run_through` and `arun_through` carry the steps out (`Driver.do`) with the one flow
driver (`_decisions._flows`), as httpx drives one auth flow from both its sync and async
clients. `refine`, `arefine` and the command line all run
through them, so continuing an unfinished thread, answering reviews and reading the
result are written once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from langgraph_refine._decisions._flows import adrive, drive
from langgraph_refine._errors import ReviewInputError, attach_result
from langgraph_refine._loop._claim import aclaim_thread, claim_thread
from langgraph_refine._loop._thread import check_same_run, settings_metadata
from langgraph_refine._result import RESULT_KEYS, RefineResult, loop_schema
from langgraph_refine._typed import OutputSchema

Graph = CompiledStateGraph[Any, Any, Any, Any]
Reviewer = Callable[[dict[str, Any]], Mapping[str, Any]]
"""Answers a human-review payload with a resume value such as `{"action": "approve"}`."""
AsyncReviewer = Callable[[dict[str, Any]], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
EventSink = Callable[[dict[str, Any]], None]
"""Receives the loop's custom stream events (`round`, `stop`) as they happen."""


@dataclass(frozen=True)
class Run:
    """Run the graph with this input (a fresh input, None to continue, or a `Command`)."""

    input: Any


@dataclass(frozen=True)
class ReadState:
    """Read the thread's current state snapshot."""


@dataclass(frozen=True)
class AskReviewer:
    """Ask the reviewer to answer this review payload."""

    payload: dict[str, Any]


FlowStep = Run | ReadState | AskReviewer


def run_flow(
    task: str,
    *,
    durable: bool,
    output_schema: OutputSchema | None = None,
    settings: Mapping[str, str] | None = None,
    restart: bool = False,
) -> Generator[FlowStep, Any, RefineResult]:
    """The steps of one run, from the first invocation to the result.

    The result is built from the loop's final state (the run's values, or the thread's),
    which the finalize step completed: nothing else passes from the graph to the driver.

    With a checkpointer (`durable`), an unfinished run on the thread is continued rather
    than restarted (a pending review too: the reviewer is asked again and no model call
    is repeated) when it has the same task and settings, and every review is answered
    until the loop ends. A finished thread starts a new run.

    Args:
        task: The task to run.
        durable: Whether the graph has a checkpointer (a thread to read and resume).
        output_schema: The loop's typed output, so the result's `output` has its type.
        settings: This run's settings (`_thread.thread_settings`), the same the run
            config saves with each checkpoint; None: only the task is compared.
        restart: Start over even when the thread holds an unfinished run.

    Returns:
        The loop's result (as the generator's return value).

    Raises:
        ThreadSettingsError: If the thread's unfinished run had another task or other
            settings (and not `restart`), before any model call.
        ReviewInputError: If the reviewer's answer was rejected and it answers again
            with the same mistake; the review stays pending on the thread.
    """
    if not durable:
        values = yield Run({"task": task})
        return RefineResult.from_state(values, output_schema=output_schema)
    snapshot = yield ReadState()
    resume = unfinished(snapshot) and not restart
    if resume:
        check_same_run(snapshot, task, settings)
    yield Run(None if resume else {"task": task})
    answered = False
    while True:
        snapshot = yield ReadState()
        if not snapshot.interrupts:
            return RefineResult.from_state(snapshot.values, output_schema=output_schema)
        payload = snapshot.interrupts[0].value
        if answered and payload.get("error"):
            # The last answer was rejected: asking the same reviewer again would loop.
            raise ReviewInputError(
                f"the reviewer's answer was rejected: {payload['error']}; the review is still "
                "pending on this thread (pass the same checkpointer and thread_id to continue)"
            )
        answer = yield AskReviewer(payload)
        yield Run(Command(resume=review_answer(answer)))
        answered = True


def unfinished(snapshot: Any) -> bool:
    """True if the thread holds a run that has not ended.

    A run stopped between a node's end and the next checkpoint (Ctrl-C while the step's
    writes were being saved) has no task left in `next`, since the step's one task has
    its writes; it still has that step's `tasks`, and a continued run applies their writes
    rather than paying for the call again. A finished run's last checkpoint has neither.
    """
    return bool(snapshot.next or snapshot.tasks)


def review_answer(answer: object) -> dict[str, Any]:
    """Check a reviewer's answer before resuming with it.

    Raises:
        ReviewInputError: If the answer is not a non-empty dict.
    """
    # LangGraph cannot resume with None, and reads an empty dict as an empty
    # interrupt-id map (nothing answered), so both would leave the review hanging.
    if not isinstance(answer, Mapping) or not answer:
        raise ReviewInputError(
            f"reviewer returned {answer!r}; return a dict such as {{'action': 'approve'}}, "
            "{'action': 'edit', 'response': ...} or {'action': 'revise', 'feedback': ...}"
        )
    return dict(answer)


@dataclass
class Driver:
    """What the sync and async loops need to carry out a flow's steps.

    Args:
        graph: The compiled loop.
        config: The run config (thread id, recursion limit, callbacks).
        reviewer: Answers review payloads (None when the loop has no human review).
        on_event: Receives the custom stream events, if given.
        durability: LangGraph's checkpoint durability for the runs.
        settings: What the thread keeps of this run (`_thread.thread_settings`), also
            in `config`'s metadata.
        on_step: Receives the name of each node of the loop as it starts (`generate`,
            `evaluate`, ...), if given: what a live view says the loop is doing.
    """

    graph: Graph
    config: RunnableConfig
    reviewer: Any = None
    on_event: EventSink | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    settings: Mapping[str, str] | None = None
    on_step: Callable[[str], None] | None = None

    def on_thread(self, thread_id: str) -> Driver:
        """This driver, running on the checkpoint thread `thread_id`."""
        configurable = {**(self.config.get("configurable") or {}), "thread_id": thread_id}
        return dataclasses.replace(self, config={**self.config, "configurable": configurable})

    def _kwargs(self) -> dict[str, Any]:
        # Custom events only when someone receives them: LangGraph streams a run with
        # custom events concurrently (a waiter task per step), which costs every step.
        # Without that mode, a loop run inside a streaming parent run sends them there.
        modes = ["custom", "values"] if self.on_event is not None else ["values"]
        if self.on_step is not None:
            modes.append("tasks")
        kwargs: dict[str, Any] = {"stream_mode": modes}
        if self.graph.checkpointer is None:
            kwargs["output_keys"] = RESULT_KEYS
        if self.durability is not None:
            kwargs["durability"] = self.durability
        return kwargs

    def _take(self, chunk: tuple[str, Any], values: Any) -> Any:
        mode, data = chunk
        if mode == "values":
            return data
        if mode == "tasks":
            if self.on_step is not None and "input" in data:  # a node starts (not its result)
                self.on_step(str(data.get("name")))
            return values
        if self.on_event is not None:
            self.on_event(data)
        return values

    def attach(self, exc: BaseException, values: Any) -> None:
        """Attach the best result so far, read from the run's last `values`, to `exc`."""
        if not isinstance(values, Mapping) or not (values.get("attempts") or values.get("pending")):
            return
        try:
            state = {"attempts": [], **values}
            result = RefineResult.from_state(state, output_schema=loop_schema(self.graph))
        except Exception:  # never hide the run's own error behind this one
            return
        attach_result(exc, result)

    def stream(self, input: Any) -> Any:
        """Run the graph on `input`; the last values it wrote (None if none).

        Raises:
            Exception: The run's error, carrying the work paid for so far (`attach`).
        """
        reply = None
        try:
            for chunk in self.graph.stream(input, self.config, **self._kwargs()):
                reply = self._take(chunk, reply)
        except Exception as exc:  # the work paid for so far goes with the error
            self.attach(exc, reply if reply is not None else self.saved())
            raise
        return reply

    async def astream(self, input: Any) -> Any:
        """Async `stream`."""
        reply = None
        try:
            async for chunk in self.graph.astream(input, self.config, **self._kwargs()):
                reply = self._take(chunk, reply)
        except Exception as exc:
            self.attach(exc, reply if reply is not None else await self.asaved())
            raise
        return reply

    def saved(self) -> Any:
        """The thread's saved values, to carry with an error (None without a checkpointer)."""
        with contextlib.suppress(Exception):  # never hide the run's own error behind this one
            if self.graph.checkpointer is not None:
                return self.graph.get_state(self.config).values
        return None

    async def asaved(self) -> Any:
        """Async `saved`."""
        with contextlib.suppress(Exception):
            if self.graph.checkpointer is not None:
                return (await self.graph.aget_state(self.config)).values
        return None

    def do(self, step: FlowStep) -> Any:
        """The reply to one of a run flow's steps (sync)."""
        if isinstance(step, Run):
            return self.stream(step.input)
        if isinstance(step, ReadState):
            return self.graph.get_state(self.config)
        return self._reviewer()(step.payload)

    async def ado(self, step: FlowStep) -> Any:
        """The reply to one of a run flow's steps (async; the reviewer may be async too)."""
        if isinstance(step, Run):
            return await self.astream(step.input)
        if isinstance(step, ReadState):
            return await self.graph.aget_state(self.config)
        reply = self._reviewer()(step.payload)
        return await reply if inspect.isawaitable(reply) else reply

    def _reviewer(self) -> Any:
        if self.reviewer is None:
            raise ReviewInputError(
                "the loop paused for a human review, but no reviewer was given: pass "
                "reviewer=callable(payload) -> {'action': ...}, or resume with Command"
            )
        return self.reviewer


def run_through(flow: Generator[FlowStep, Any, RefineResult], driver: Driver) -> RefineResult:
    """Carry out a flow's steps synchronously and return its result.

    The run holds its checkpoint thread throughout (`_claim`): a second run on it is
    refused with `ThreadBusyError` before any step.
    """
    with claim_thread(driver.graph.checkpointer, driver.config):
        return drive(flow, driver.do)


async def arun_through(
    flow: Generator[FlowStep, Any, RefineResult], driver: Driver
) -> RefineResult:
    """Carry out a flow's steps asynchronously (the reviewer may be async too)."""
    async with aclaim_thread(driver.graph.checkpointer, driver.config):
        return await adrive(flow, driver.ado)


def run_config(
    config: RunnableConfig | None,
    *,
    durable: bool,
    thread_id: str | None,
    max_iterations: int,
    settings: Mapping[str, str] | None = None,
) -> RunnableConfig:
    """The run config: the caller's, with a thread id (when durable) and a recursion limit.

    The limit is derived from the options, so no valid `max_iterations` runs into
    LangGraph's default limit (25 steps on older releases). A durable run's `settings`
    go into its metadata, which the checkpointer saves with every checkpoint (so a
    rerun on the thread can be compared with them: `run_flow`).
    """
    merged: RunnableConfig = dict(config or {})  # type: ignore[assignment]
    if durable:
        configurable = dict(merged.get("configurable") or {})
        configurable.setdefault("thread_id", thread_id or str(uuid.uuid4()))
        merged["configurable"] = configurable
        if settings is not None:
            merged["metadata"] = {**(merged.get("metadata") or {}), **settings_metadata(settings)}
    merged.setdefault("recursion_limit", recursion_limit(max_iterations))
    return merged


def recursion_limit(max_iterations: int) -> int:
    """Graph steps enough for one invocation: three per round (with review) plus the ends."""
    return 3 * (max_iterations + 1) + 10


def strict_serde() -> JsonPlusSerializer:
    """A checkpoint serializer that revives only LangGraph's safe types and the loop's own.

    LangGraph's default serializer revives any type (with an "unregistered type" warning
    per object) unless LANGGRAPH_STRICT_MSGPACK is set; naming the loop's state models
    keeps checkpoints strict and free of those warnings.
    """
    from pydantic import BaseModel

    from langgraph_refine import _state

    models = [
        obj
        for obj in vars(_state).values()
        if isinstance(obj, type)
        and issubclass(obj, BaseModel)
        and obj.__module__ == _state.__name__
    ]
    return JsonPlusSerializer(allowed_msgpack_modules=models)
