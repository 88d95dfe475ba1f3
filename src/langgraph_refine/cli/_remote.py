"""`batch --server URL`: every task runs as a run on its own thread of a LangGraph Server.

The command line is only a client here: the server's workers run the loops, with the
model the server was configured with (`REFINE_MODEL`), and persist every step in the
server's checkpointer. Each task gets one thread whose id is derived from the output
file and the task id (`thread_id_for`), and is written in the task's row: a rerun finds
the same thread, so a run that finished after the client died is read back instead of
run again, and a run still in flight is joined. Rows have the same shape as a local
batch's; failed tasks are rows with an `error` field, retried on rerun.

Per-line options that a run can take as its `context` (`RUN_CONTEXT_KEYS`) are sent
with each run, the line's check (`evaluator` specs) included, so the same batch file gives
the same rows locally and on the server; `--judge-model` and `--max-tokens`, when given,
go in every run's context too. Options that shape the graph itself (memory,
on_budget_exhausted) belong to the server's assistant and are refused on the line.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from langgraph_refine._decisions._options import CONTEXT, LINE, declared, line_key
from langgraph_refine._result import RefineResult
from langgraph_refine.cli._batch import (
    BatchItem,
    BatchStats,
    LineWriter,
    Progress,
    id_key,
    run_rows,
)
from langgraph_refine.cli._errors import USAGE, CliError, cause_text, is_unreachable, one_line

RUN_CONTEXT_KEYS: tuple[str, ...] = tuple(
    line_key(name) for name in declared(LINE) if name in declared(CONTEXT)
)
"""Per-line options a run on the server takes in its `context` (a line's `model`: `models`),
from the options' declaration: the line's keys a run's context takes."""
GRAPH_ONLY_KEYS: tuple[str, ...] = tuple(
    line_key(name) for name in declared(LINE) if name not in declared(CONTEXT)
)
"""Per-line options the server's assistant fixes; a line that sets one is refused."""

_THREADS = uuid.UUID("8d5a7c1e-3f3b-4c55-9a0e-6f1f3c2b9d10")
"""Namespace of the thread ids derived from task ids."""


def thread_id_for(out: Path, item_id: str | int) -> str:
    """The thread of one task: the same output file and id always give the same thread."""
    return str(uuid.uuid5(_THREADS, f"{out.resolve()}\n{id_key(item_id)}"))


def run_context(item: BatchItem, models: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's `context`: the task's check, loop options and output schema (when given).

    Args:
        item: The task.
        models: `judge_model` / `max_tokens` given on the command line, for every run.
    """
    return item.options.run_context(models)


class RunFailedError(CliError):
    """A run on the server ended without a result.

    Its message is the server's own (`"<error type>: <message>"`, e.g. `"SpecError:
    evaluator spec ... is refused: ..."`), written as it is in the task's row.

    Args:
        message: What the server said.
        result: The best result of the thread's state so far, if it has attempts.
    """

    def __init__(self, message: str, result: RefineResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class ServerBatch:
    """Runs batch items on a LangGraph Server through `langgraph-sdk`.

    Args:
        url: The server's address.
        assistant: The assistant (or graph) id the runs use.
        out: The output file (it names the threads).
        models: `judge_model` / `max_tokens` sent in every run's context (when given).
    """

    def __init__(
        self, url: str, assistant: str, out: Path, models: dict[str, Any] | None = None
    ) -> None:
        from langgraph_sdk import get_client

        self.url = url
        self.assistant = assistant
        self.out = out
        self.models = dict(models or {})
        self.client = get_client(url=url)

    def unreachable(self, exc: BaseException) -> str | None:
        """The message that stops the batch if `exc` says the server cannot be reached."""
        if not is_unreachable(exc):
            return None
        return one_line(
            f"cannot reach the LangGraph Server at {self.url} ({cause_text(exc)}); "
            "check --server and that the server is running (e.g. `langgraph dev`)"
        )

    async def check_assistant(self) -> None:
        """Fail with one line unless the server answers and knows the assistant.

        Raises:
            CliError: If the server is unreachable or the assistant unknown.
        """
        try:
            if await self._known():
                return
            graphs = sorted({a["graph_id"] for a in await self.client.assistants.search(limit=100)})
        except Exception as exc:
            message = self.unreachable(exc)
            raise CliError(
                message or f"LangGraph Server at {self.url}: {one_line(str(exc))}"
            ) from None
        raise CliError(
            f"--assistant {self.assistant!r} is unknown to the LangGraph Server at {self.url}; "
            f"its graphs are: {', '.join(graphs) or 'none'}",
            USAGE,
        )

    async def _known(self) -> bool:
        """True if the assistant is a graph id or an assistant id the server knows."""
        from langgraph_sdk.errors import APIStatusError

        for lookup in (
            lambda: self.client.assistants.search(graph_id=self.assistant, limit=1),
            lambda: self.client.assistants.get(self.assistant),
        ):
            try:
                if await lookup():
                    return True
            except APIStatusError as exc:
                if exc.status_code not in (404, 422):
                    raise
        return False

    async def run_one(self, item: BatchItem) -> RefineResult:
        """Run (or finish, or read back) one task on its thread and return its result.

        Raises:
            RunFailedError: If the run ended with an error or paused for a human.
        """
        thread_id = thread_id_for(self.out, item.id)
        threads, runs = self.client.threads, self.client.runs
        await threads.create(
            thread_id=thread_id, if_exists="do_nothing", metadata={"task_id": str(item.id)}
        )
        values = await self._finished_values(thread_id, item)
        if values is None:
            active = [
                run
                for status in ("running", "pending")
                for run in await runs.list(thread_id, status=status)
            ]
            try:
                if active:  # a run left in flight by an earlier client: wait for it
                    await runs.join(thread_id, active[0]["run_id"])
                else:
                    await runs.wait(
                        thread_id,
                        self.assistant,
                        input={"task": item.task},
                        context=run_context(item, self.models),
                        raise_error=True,
                    )
            except Exception as exc:
                if is_unreachable(exc):
                    raise
                raise RunFailedError(str(exc), await self._partial(thread_id)) from exc
            values = await self._finished_values(thread_id, item)
        if values is None:
            raise RunFailedError(
                "the run ended without a result (it may be paused for a human review: "
                "batch runs need an assistant without review, such as 'refine')",
                await self._partial(thread_id),
            )
        return RefineResult.from_state(values)

    async def _finished_values(self, thread_id: str, item: BatchItem) -> dict[str, Any] | None:
        state = await self.client.threads.get_state(thread_id)
        values = state.get("values")
        if (
            isinstance(values, dict)
            and values.get("task") == item.task
            and values.get("stop_reason")
            and not state.get("next")
        ):
            return values
        return None

    async def _partial(self, thread_id: str) -> RefineResult | None:
        try:
            values = (await self.client.threads.get_state(thread_id)).get("values")
        except Exception:
            return None
        if isinstance(values, dict) and values.get("attempts"):
            return RefineResult.from_state(values)
        return None


def check_server_items(items: list[BatchItem], errors: list[str], path: Path) -> list[BatchItem]:
    """Drop (and report) lines that set options only the server's assistant can set."""
    kept = []
    for item in items:
        fixed = [key for key in GRAPH_ONLY_KEYS if key in item.given]
        if fixed:
            errors.append(
                f"{path}:{item.line}: {', '.join(fixed)} cannot be set per run on a server "
                f"(the assistant fixes them; a run takes {', '.join(RUN_CONTEXT_KEYS)}); skipped"
            )
        else:
            kept.append(item)
    return kept


async def run_on_server(
    items: list[BatchItem],
    batch: ServerBatch,
    *,
    concurrency: int,
    progress: Callable[[], AbstractContextManager[Progress]],
) -> BatchStats:
    """Check the server, then run `items` on it, `concurrency` runs in flight.

    The output file is opened, and the progress shown, only once the server has answered
    and knows the assistant.

    Args:
        items: The tasks to run.
        batch: The server and assistant.
        concurrency: The most runs in flight.
        progress: Makes the progress display.

    Raises:
        CliError: If the server is unreachable or the assistant unknown.
    """
    if items:
        await batch.check_assistant()
    writer = LineWriter(batch.out)
    try:
        with progress() as shown:
            return await run_rows(
                items,
                batch.run_one,
                writer,
                concurrency=concurrency,
                progress=shown,
                fatal=batch.unreachable,
                row_extra=lambda item: {"thread_id": thread_id_for(batch.out, item.id)},
            )
    finally:
        writer.close()
