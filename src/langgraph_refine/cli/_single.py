"""The `run` verb: one loop in the terminal, with live rounds, durable threads and review.

The loop runs on the async path (`astream` / `aget_state`), so Ctrl-C and SIGTERM cancel
the model call in flight, always with a checkpointer: the SQLite file or PostgreSQL
database of `--checkpoint` (so `--thread` can resume an interrupted run), else an
in-memory one, which the human review needs to pause and resume, and from which an
interrupted run's best answer so far is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from rich.console import Console
from rich.text import Text

from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._errors import (
    ThreadBusyError,
    ThreadSettingsError,
    UnknownPriceError,
    describe_differences,
)
from langgraph_refine._loop._driver import (
    Driver,
    arun_through,
    run_config,
    run_flow,
    strict_serde,
    unfinished,
)
from langgraph_refine._loop._graph import create_refine_graph
from langgraph_refine._loop._thread import thread_settings
from langgraph_refine._loop._tracing import traced
from langgraph_refine._result import RefineResult, loop_schema
from langgraph_refine._typed import plain
from langgraph_refine.cli._calibration import open_review_store
from langgraph_refine.cli._checkpoint import open_saver, shown
from langgraph_refine.cli._errors import FAILED, USAGE, CliError, Terminated
from langgraph_refine.cli._ladder_view import per_model
from langgraph_refine.cli._models import ModelSettings
from langgraph_refine.cli._options import CommandOptions
from langgraph_refine.cli._review import Reviewer
from langgraph_refine.cli._view import RoundView, show_result

T = TypeVar("T")
Graph = CompiledStateGraph[Any, Any, Any, Any]


@dataclass(frozen=True)
class RunRequest:
    """Everything the `run` verb was asked to do.

    Attributes:
        task: The task text.
        options: Loop options.
        checkpoint: `--checkpoint` as given (a SQLite path or a PostgreSQL URI) for
            durable runs, if any.
        thread: Checkpoint thread to continue, if any.
        review: Whether to ask the human before the loop ends.
        restart: Start the thread over even if it holds an unfinished run.
        store: SQLite file of a LangGraph store the run's reviews are kept in (as labels
            for `calibrate`), if any.
        argv: The command line's arguments, for the command that resumes an interrupted
            run.
    """

    task: str
    options: CommandOptions
    checkpoint: str | Path | None = None
    thread: str | None = None
    review: bool = False
    restart: bool = False
    store: Path | None = None
    argv: tuple[str, ...] | None = None


def check_task(task: str) -> str:
    """Reject an empty task before anything else happens.

    Raises:
        CliError: If the task is empty or whitespace.
    """
    if not task.strip():
        raise CliError(
            f"the task is empty ({task!r}); pass it as text, e.g. "
            "langgraph-refine run 'Write a haiku about rain.'",
            exit_code=2,
        )
    return task


def result_json(result: RefineResult) -> dict[str, Any]:
    """The `--json` object of a finished loop (with `selection` after a pairwise choice).

    `models` holds the attempts, calls and cost of each model that wrote attempts (see
    `cli._ladder_view.per_model`).
    """
    attempts = [attempt.model_dump(mode="json") for attempt in result.attempts]
    data: dict[str, Any] = {
        "value": result.value,
        "score": result.score,
        "verdict": result.verdict,
        "stop_reason": result.stop_reason,
        "iterations": result.iterations,
        "score_history": list(result.score_history),
        "usage": result.usage.model_dump(mode="json"),
        "output": plain(result.output),
        "attempts": attempts,
        "models": per_model(attempts),  # calls and cost by the model that wrote each attempt
    }
    if result.metadata.get("selection"):
        data["selection"] = result.metadata["selection"]
    for key in ("calibration", "untrusted_pass"):  # whether the PASS was calibrated
        if key in result.metadata:
            data[key] = result.metadata[key]
    return data


def show_lost_work(
    exc: BaseException,
    message: str,
    out: Console,
    *,
    json_output: bool,
    show_reasoning: bool = False,
) -> None:
    """Print the best result a failed or interrupted run carries (`.result`) before its error line.

    Whatever paid work the run did (its attempts and usage) is shown as a finished run's
    result is; with `--json`, it is the result's JSON object, with an `error` field (as a
    batch's failed row) unless the run was interrupted (its `stop_reason` says so).
    Nothing is printed when the error carries no result, or one without an attempt (a
    run whose first call failed: the error line says it all).
    """
    result = getattr(exc, "result", None)
    if not isinstance(result, RefineResult) or not result.attempts:
        return
    if json_output:
        data = result_json(result)
        if result.stop_reason != "interrupted":
            data["error"] = message
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    else:
        interrupted = result.stop_reason == "interrupted"
        show_result(out, result, show_reasoning=show_reasoning, failed=not interrupted)


@contextlib.asynccontextmanager
async def open_checkpointer(path: Path | None) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """The SQLite checkpointer on `path` (see `cli._sqlite_saver`), or an in-memory one.

    Raises:
        CliError: If the file's folder is missing or the file is not a SQLite database.
    """
    if path is None:
        yield InMemorySaver(serde=strict_serde())
        return
    check_checkpoint_path(path)
    try:
        from langgraph_refine.cli._sqlite_saver import open_sqlite_saver
    except ImportError:
        raise CliError(
            "--checkpoint needs the SQLite checkpointer: pip install 'langgraph-refine[sqlite]'"
        ) from None
    with open_sqlite_saver(path) as saver:
        yield saver


def check_checkpoint_path(path: Path) -> None:
    """Refuse a `--checkpoint` path whose folder is missing or that is a folder.

    Raises:
        CliError: Naming the path and what to give instead.
    """
    if not path.parent.exists():
        raise CliError(f"--checkpoint {path}: the folder {path.parent} does not exist", exit_code=2)
    if path.is_dir():
        raise CliError(
            f"--checkpoint {path} is a folder; give a file name, e.g. {path / 'runs.sqlite'}",
            exit_code=2,
        )


async def _check_pending_review(graph: Graph, config: RunnableConfig, request: RunRequest) -> None:
    """Refuse to continue a thread paused in a review without `--review` to answer it."""
    if request.thread is None or request.review:
        return
    same_task = (await graph.aget_state(config)).values.get("task") == request.task
    if same_task and await _review_pending(graph, config):
        raise CliError(
            f"thread {request.thread!r} is waiting for a human review; "
            "rerun with --review to answer it"
        )


async def _review_pending(graph: Graph, config: RunnableConfig) -> bool:
    """True if the thread is paused in a review, even when this graph has no review node.

    Read from the checkpoint's pending interrupt writes rather than `get_state()`, which
    only reports interrupts of nodes the current graph has.
    """
    saver = graph.checkpointer
    if not isinstance(saver, BaseCheckpointSaver):  # no checkpoint: nothing can be paused
        return False
    saved = await saver.aget_tuple(config)
    return bool(saved and any(w[1] == "__interrupt__" for w in saved.pending_writes or ()))


def execute(
    request: RunRequest,
    settings: ModelSettings,
    *,
    view: RoundView,
    reviewer: Reviewer | None,
    notes: Console,
) -> RefineResult:
    """Run the loop to its end, showing rounds and asking for reviews.

    The loop runs on the async path, so Ctrl-C and SIGTERM cancel the model call in
    flight at once, rather than waiting for its reply: what the checkpoint holds is kept,
    and a rerun of the same command repeats at most that call.

    Args:
        request: Task and options.
        settings: How to build the models.
        view: Live view of the rounds.
        reviewer: Answers review interrupts (needed with `request.review`).
        notes: Where to print notes such as the thread id.

    Returns:
        The loop's result.

    Raises:
        CliError: On a usage error, a refused thread, or an interrupt (exit code 130, or
            143 for SIGTERM), saying what is saved and the command that resumes.
    """
    check_task(request.task)
    check_thread_flags(request)
    thread = request.thread or str(uuid.uuid4())
    stopped = Stopped()
    try:
        return run_stoppable(_arun(request, thread, settings, view, reviewer, notes, stopped))
    except KeyboardInterrupt as exc:
        raise interrupted(request, thread, stopped, isinstance(exc, Terminated)) from None


def check_thread_flags(request: RunRequest) -> None:
    """Refuse `--thread` without `--checkpoint`, and `--restart` without `--thread`.

    Raises:
        CliError: A usage error (exit code 2) naming the flag the other one needs.
    """
    if request.thread is not None and request.checkpoint is None:
        raise CliError(
            "--thread needs --checkpoint PATH (the SQLite file or PostgreSQL URI that holds "
            "the thread)",
            exit_code=USAGE,
        )
    if request.restart and request.thread is None:
        raise CliError(
            "--restart needs --thread ID (the thread whose interrupted run to discard); "
            "without --thread every run starts on a new thread anyway",
            exit_code=USAGE,
        )


@dataclass
class Stopped:
    """What an interrupted run's thread holds, read as the interrupt goes by.

    Attributes:
        attempts: The attempts the thread holds (None if they could not be read).
        result: The best result so far, `stop_reason` "interrupted" (None before the
            first attempt).
    """

    attempts: int | None = None
    result: RefineResult | None = None

    def read(self, values: Any, output_schema: Any) -> None:
        """Take the attempts and the best result so far from the thread's `values`."""
        attempts = values.get("attempts") or ()
        self.attempts = len(attempts)
        if attempts:
            result = RefineResult.from_state(dict(values), output_schema=output_schema)
            self.result = result.model_copy(update={"stop_reason": "interrupted"})


async def _arun(
    request: RunRequest,
    thread: str,
    settings: ModelSettings,
    view: RoundView,
    reviewer: Reviewer | None,
    notes: Console,
    stopped: Stopped,
) -> RefineResult:
    """Build the loop, open its checkpointer and run it on `thread` (see `execute`).

    Interrupted, it reads what the thread holds into `stopped` before the interrupt goes
    on.
    """
    generator = settings.generator()
    kwargs = request.options.graph_kwargs(settings.judge)
    evaluator = kwargs.pop("evaluator")
    try:
        builder = create_refine_graph(
            generator,
            evaluator,
            human_review="final" if request.review else None,
            **kwargs,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    # What the thread keeps of this run: the checks as written, and the options.
    checks = ", ".join(spec.text for spec in request.options.specs) or "judge"
    loop = LoopOptions.build(None, **kwargs)
    kept = thread_settings(loop, checks)
    try:
        async with open_saver(request.checkpoint) as saver:
            with open_review_store(request.store) as store:
                graph = builder.compile(checkpointer=saver, store=store)
                config = run_config(
                    None,
                    durable=True,
                    thread_id=thread,
                    max_iterations=loop.rules.max_iterations,
                    settings=kept,
                )
                if request.checkpoint is not None and request.thread is None:
                    notes.print(
                        Text(
                            f"thread {thread} (resume an interrupted run with --thread {thread})",
                            style="dim",
                        )
                    )
                if not request.restart:
                    await _check_pending_review(graph, config, request)
                try:
                    return await _run_in_task(
                        request, graph, config, kept, evaluator, view, reviewer, notes
                    )
                except (asyncio.CancelledError, KeyboardInterrupt):
                    with contextlib.suppress(Exception):  # never hide the interrupt
                        state = await graph.aget_state(config)
                        stopped.read(state.values, loop_schema(graph))
                    raise
    finally:
        await settings.http.aclose()


async def _run_in_task(
    request: RunRequest,
    graph: Graph,
    config: RunnableConfig,
    kept: dict[str, str],
    evaluator: Any,
    view: RoundView,
    reviewer: Reviewer | None,
    notes: Console,
) -> RefineResult:
    """Drive the compiled loop to its end, showing its phases and asking for reviews."""

    def ask(payload: dict[str, Any]) -> Any:
        view.stop()  # the prompt needs the terminal
        if reviewer is None:  # pragma: no cover - only reviewed graphs interrupt
            raise CliError("the loop paused for a review, but --review was not given")
        with interruptible_prompt():
            answer = reviewer(payload)
        view.start("revising…")
        return answer

    # "sync" writes each step's checkpoint before the next step starts, so a killed
    # run resumes without repeating a completed model call.
    driver = Driver(
        graph,
        config,
        reviewer=ask,
        on_event=view.event,
        durability="sync" if request.checkpoint is not None else "async",
        on_step=view.step,
    )
    driver = traced(driver, name="refine", evaluator=evaluator)
    snapshot = await graph.aget_state(config)
    if unfinished(snapshot) and not request.restart:  # a new --thread starts, not resumes
        view.resume(len(snapshot.values.get("attempts") or ()))
    elif snapshot.values and not unfinished(snapshot):
        notes.print(Text(finished_thread_note(request.thread), style="dim"), soft_wrap=True)
    flow = run_flow(
        request.task,
        durable=True,
        output_schema=loop_schema(graph),
        settings=kept,
        restart=request.restart,
    )
    try:
        return await arun_through(flow, driver)
    except ThreadSettingsError as exc:
        raise CliError(_thread_refusal(config, exc), exit_code=2) from None
    except ThreadBusyError as exc:
        raise CliError(str(exc)) from None
    finally:
        view.stop()


def finished_thread_note(thread: str | None) -> str:
    """What a rerun on a thread whose run finished says on stderr before it pays again."""
    return (
        f"thread {thread} holds a finished run: this starts a new run on it, whose calls are "
        "paid again (the finished run's checkpoints stay); give another --thread to keep "
        "them apart"
    )


def run_stoppable(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to its end; Ctrl-C and SIGTERM cancel it, and with it the call in flight.

    `asyncio.run` turns Ctrl-C into cancelling the running work (an HTTP request is
    dropped at once, where a thread pool would wait for its reply) and raises
    `KeyboardInterrupt` once it is undone; SIGTERM is made to do the same.

    Raises:
        KeyboardInterrupt: On Ctrl-C; `Terminated` (a `KeyboardInterrupt`) on SIGTERM.
    """

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        terminated: list[bool] = []

        def terminate() -> None:
            terminated.append(True)
            if task is not None:
                task.cancel()

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, terminate)  # fails where no signals are
        try:
            return await main
        except asyncio.CancelledError:
            if terminated:
                raise Terminated from None
            raise
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGTERM)

    return asyncio.run(guarded())


@contextlib.contextmanager
def interruptible_prompt() -> Iterator[None]:
    """Let Ctrl-C end a prompt at once.

    Under `asyncio.run`, Ctrl-C only asks the running work to cancel, which a prompt
    blocked on its input never sees; while it waits, nothing else runs, so the plain
    `KeyboardInterrupt` is safe to raise there.
    """
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: the handler cannot change
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted(request: RunRequest, thread: str, stopped: Stopped, terminated: bool) -> CliError:
    """What an interrupted `run` says: what is saved, and the exact command that resumes.

    The error carries the best result so far (`stopped.result`), which `run` prints (or
    writes as JSON, `stop_reason` "interrupted") before this line, with or without a
    checkpoint.

    Args:
        request: What the run was asked to do.
        thread: Its checkpoint thread.
        stopped: What the thread held when the interrupt came.
        terminated: SIGTERM (exit code 143) rather than Ctrl-C (130).
    """
    code = 143 if terminated else 130
    shown_best = " (the best answer so far is on stdout)" if stopped.result is not None else ""
    if request.checkpoint is None:
        return CliError(
            f"interrupted: nothing is saved (no --checkpoint){shown_best}; add --checkpoint "
            "FILE to make a run resumable",
            code,
            result=stopped.result,
        )
    what = (
        "the attempts so far are"
        if stopped.attempts is None
        else f"{stopped.attempts} attempt(s) are"
    )
    return CliError(
        f"interrupted: {what} saved on thread {thread} in {shown(request.checkpoint)}"
        f"{shown_best}; resume with:",
        code,
        command=resume_command(request.argv, thread),
        result=stopped.result,
    )


def resume_command(argv: Sequence[str] | None, thread: str) -> str:
    r"""The command line that continues `thread`: this one, with `--thread` if it had none.

    Each argument is quoted for a POSIX shell (`shlex.join`): a task's line breaks,
    quotes and other characters stay as they were inside single quotes, so the command
    pasted as printed runs the same run. `--restart` is dropped: it would discard what
    the interrupted run saved.

    Example:
        >>> print(resume_command(["run", "Line one.\nIt's two.", "--restart"], "t1"))
        langgraph-refine run 'Line one.
        It'"'"'s two.' --thread t1
    """
    args = [arg for arg in argv or () if arg != "--restart"]
    if "--thread" not in args and not any(a.startswith("--thread=") for a in args):
        args += ["--thread", thread]
    return shlex.join(["langgraph-refine", *args])


def exit_code_of(exc: BaseException) -> int:
    """The exit code of a run that raised `exc`: 2 when it was refused before any call.

    A model the price data cannot price under `--max-cost` is refused before anything is
    sent (a usage error, fixed with `--price`); once a call was paid, the error carries
    the result so far and the run failed (1).
    """
    refused = isinstance(exc, UnknownPriceError) and getattr(exc, "result", None) is None
    return USAGE if refused else FAILED


def failed_result(result: RefineResult) -> str | None:
    """Why a run that ended counts as failed, or None when it did not fail.

    A run the evaluator stopped by leaving two attempts in a row unjudged (`stop_reason`
    "unjudged"), or none of whose attempts could be judged, has no score to trust: `run`
    shows its result and exits 1 with this message, and `batch` writes it as a failed
    row (its `error`), which a rerun runs again. A run stopped before any judgment was
    tried (a budget spent on the first draft) says why in its stop reason instead.
    """
    reason = next((a.error for a in reversed(result.attempts) if a.error), None)
    if result.stop_reason == "unjudged":
        judged = any(a.score is not None for a in result.attempts)
        return (
            "unjudged: the evaluator could not judge two attempts in a row (the last: "
            f"{reason or 'no reason given'}), so the loop stopped; the response shown is "
            f"{'the best judged one' if judged else 'unscored'}. Check the judge "
            "(--judge-model, --base-url) or the checks (-e)"
        )
    if any(a.score is not None for a in result.attempts):
        return None
    if reason is None:
        return None
    return (
        f"nothing was judged: none of the {len(result.attempts)} attempt(s) could be scored "
        f"(the last: {reason}); the response shown is unscored. Check the judge "
        "(--judge-model, --base-url) or the checks (-e), or retry the judgments with "
        "--on-evaluator-error retry"
    )


def _thread_refusal(config: RunnableConfig, exc: ThreadSettingsError) -> str:
    """The command line's words for a rerun that differs from the thread's unfinished run."""
    thread = config.get("configurable", {}).get("thread_id")
    return (
        f"thread {thread!r} holds an interrupted run started differently "
        f"({describe_differences(exc.differences)}); rerun with the same task and options to "
        "continue it, use a new --thread to start another run, or add --restart to discard "
        "it and start over on this thread"
    )
