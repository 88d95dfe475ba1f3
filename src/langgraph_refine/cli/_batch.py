"""The `batch` verb: refine every task of a JSONL file, a bounded number at a time.

Input lines are `{"id": ..., "task": ...}`, optionally with their own `evaluator` spec(s)
and loop options. Each finished task becomes one output line, written whole, flushed and
fsynced before the next, to a file that is only ever appended to: an interrupted batch
keeps every finished line, and a rerun with the same output skips the ids already there.
A task that fails becomes a line with an `error` field; a rerun retries it.

Loops run on the async path (`arefine`), so up to `concurrency` loops overlap their model
calls; the command line's entry point is the only place an event loop is started. What
the tasks can share is built once per batch: the models and their HTTP clients, and one
compiled loop per distinct set of loop options.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from rich.console import Console
from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgressBar
from rich.table import Column
from rich.text import Text

from langgraph_refine._display import cost_text
from langgraph_refine._errors import ThreadBusyError, ThreadSettingsError, describe_differences
from langgraph_refine._loop._claim import aclaim_thread
from langgraph_refine._loop._run import CompiledLoop
from langgraph_refine._result import RefineResult
from langgraph_refine.cli._checkpoint import shown
from langgraph_refine.cli._errors import (
    USAGE,
    CliError,
    Terminated,
    describe_error,
    given,
    is_unreachable,
    one_line,
)
from langgraph_refine.cli._http import LANE
from langgraph_refine.cli._ladder_view import LineGenerators, merge, models_text, per_model
from langgraph_refine.cli._models import ModelSettings
from langgraph_refine.cli._options import PER_LINE_OPTIONS, CommandOptions
from langgraph_refine.cli._single import failed_result, result_json

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: --out is not locked
    fcntl = None  # type: ignore[assignment]

OUTPUT_KEYS = (
    "id",
    "task",
    "value",
    "score",
    "verdict",
    "stop_reason",
    "iterations",
    "score_history",
    "usage",
    "output",
)


@dataclass(frozen=True)
class BatchItem:
    """One task read from the input file.

    Attributes:
        line: Its line number (from 1).
        id: The line's `id` (a string or an integer).
        task: The task text.
        options: The loop options for this task (defaults plus the line's own).
        given: The option keys the line set itself.
        problem: Why the task cannot run (its text is no UTF-8): it becomes a failed row.
    """

    line: int
    id: str | int
    task: str
    options: CommandOptions
    given: frozenset[str] = frozenset()
    problem: str | None = None


@dataclass
class BatchInput:
    """What `read_input` found: runnable items, one message per bad line, and warnings.

    A warning (a key that looks like a misspelt option) does not stop its line.
    """

    items: list[BatchItem] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def id_key(value: Any) -> str:
    """The key that identifies an id across input and output (`1` and `"1"` differ)."""
    return json.dumps(value)


def read_jsonl(path: Path, *, what: str) -> Iterable[tuple[int, str]]:
    """Yield `(line number, text)` for the non-blank lines of a JSONL file.

    Raises:
        CliError: A usage error (exit code 2) if the file is missing, a folder, unreadable
            or not UTF-8.
    """
    if not path.exists():
        raise CliError(f"{what} {path} does not exist", USAGE)
    if path.is_dir():
        raise CliError(f"{what} {path} is a folder, not a JSONL file", USAGE)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {what} {path}: {exc.strerror or exc}", USAGE) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(not_utf8(path, what, data, exc), USAGE) from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield number, line


def not_utf8(path: Path, what: str, data: bytes, exc: UnicodeDecodeError) -> str:
    """The refusal of a file that is not UTF-8: its first bad line, column and byte."""
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return (
        f"{what} {path} is not UTF-8 text: line {line} holds the byte "
        f"0x{data[exc.start]:02x} at column {column}; save the file as UTF-8"
    )


def unwritable(text: str) -> str | None:
    r"""Why `text` cannot be written as UTF-8 (a lone surrogate), or None if it can.

    A JSON line may spell one (`"\ud800"`); it is valid JSON but no text, so neither a
    model request nor the output file could hold it.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ascii(text[exc.start])[1:-1]
        return f"it holds a lone surrogate ({code}) at character {exc.start + 1}, which is no text"
    return None


def read_input(path: Path, defaults: CommandOptions, *, on_server: bool = False) -> BatchInput:
    """Read and check every input line; a bad line is reported and skipped.

    Args:
        path: The input file.
        defaults: The batch's options, which a line's own override.
        on_server: The tasks run on a server, which reads the files their checks name.

    Raises:
        CliError: If the file itself cannot be read.
    """
    found = BatchInput()
    seen: dict[str, int] = {}
    for number, text in read_jsonl(path, what="input file"):
        where = f"{path}:{number}"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            found.errors.append(
                f"{where}: malformed JSON line ({exc.msg} at column {exc.colno}); skipped"
            )
            continue
        try:
            item = _item(data, number, defaults, on_server)
        except CliError as exc:
            found.errors.append(f"{where}: {exc}; skipped")
            continue
        key = id_key(item.id)
        if key in seen:
            found.errors.append(
                f"{where}: duplicate id {item.id!r} (first on line {seen[key]}); skipped"
            )
            continue
        seen[key] = number
        found.items.append(item)
        found.warnings += [f"{where}: {message}" for message in near_misses(data)]
    return found


def near_misses(line: dict[str, Any]) -> list[str]:
    """A warning per key of a line that is no option but looks like a misspelt one.

    A dataset's own fields are allowed (and kept out of the loop's options), so an
    unknown key is not an error; one close to an option's name (`"selct"`) most likely
    meant it, and would otherwise be ignored without a word.
    """
    known = (*PER_LINE_OPTIONS, "id", "task")
    found = []
    for key in line:
        if key in known or not isinstance(key, str):
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
        if close:
            found.append(
                f"key {key!r} is no option and is ignored; did you mean {close[0]!r}? "
                f"(the options a line may set: {', '.join(PER_LINE_OPTIONS)})"
            )
    return found


def _item(data: Any, number: int, defaults: CommandOptions, on_server: bool) -> BatchItem:
    if not isinstance(data, dict):
        raise CliError(
            f'expected a JSON object like {{"id": "1", "task": "..."}}, got {type(data).__name__}'
        )
    for key in ("id", "task"):
        if key not in data:
            raise CliError(f"missing {key!r}")
    item_id = data["id"]
    if isinstance(item_id, bool) or not isinstance(item_id, str | int) or item_id == "":
        raise CliError(f"'id' must be a non-empty string or an integer, got {given(item_id)}")
    task = data["task"]
    if not isinstance(task, str) or not task.strip():
        raise CliError(f"'task' must be a non-empty string, got {given(task)}")
    problem = unwritable(task)
    return BatchItem(
        line=number,
        id=item_id,
        task=task,
        options=defaults.override(data, on_server=on_server),
        given=frozenset(data) & frozenset(PER_LINE_OPTIONS),
        problem=None if problem is None else f"the task was not run: {problem}",
    )


def done_ids(path: Path, warn: Callable[[str], None]) -> set[str]:
    """The id keys finished in the output file: rows without an `error` field.

    A task whose rows all carry an `error` is not done, so a rerun retries it (and appends
    a new row). An unreadable line is warned about and ignored.
    """
    if not path.exists():
        return set()
    done: set[str] = set()
    for number, text in read_jsonl(path, what="output file"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            warn(f"{path}:{number}: not a complete JSON line (an interrupted write?); ignored")
            continue
        if isinstance(data, dict) and "id" in data and not data.get("error"):
            done.add(id_key(data["id"]))
    return done


class LineWriter:
    """Appends one JSON object per line; each line is written whole, flushed and fsynced.

    The file is held for this writer until it is closed (`hold_output`): a second batch on
    it is refused.

    Args:
        path: The output file (created if missing, never truncated).
    """

    def __init__(self, path: Path) -> None:
        check_out_path(path)
        try:
            self._file: IO[str] = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise CliError(
                f"cannot open --out {path} for appending: {exc.strerror or exc}", USAGE
            ) from None
        hold_output(self._file, path)
        # A line cut short by a crash must not swallow the next one.
        if path.stat().st_size and not _ends_with_newline(path):
            self._commit("\n")

        self._pending: list[str] = []
        self._lock: asyncio.Lock | None = None

    def _commit(self, text: str) -> None:
        self._file.write(text)
        self._file.flush()
        os.fsync(self._file.fileno())

    def write(self, record: dict[str, Any]) -> None:
        """Append `record` as one line and make it durable before returning."""
        self._commit(json_line(record))

    async def awrite(self, record: dict[str, Any]) -> None:
        """Append `record` as one line and make it durable before returning (async).

        The write and its fsync run in a worker thread, so the event loop keeps serving
        the other tasks meanwhile; lines finished while one fsync runs are written
        together and share the next one (each still durable before its call returns).
        """
        self._pending.append(json_line(record))
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._pending:  # else an earlier holder already committed this line
                text, self._pending = "".join(self._pending), []
                await asyncio.to_thread(self._commit, text)

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def check_out_path(path: Path) -> None:
    """Refuse an `--out` in a missing folder, or that is a folder (exit code 2).

    Raises:
        CliError: Naming the path and what to give instead.
    """
    if not path.parent.is_dir():
        raise CliError(f"--out {path}: the folder {path.parent} does not exist", USAGE)
    if path.is_dir():
        raise CliError(
            f"--out {path} is a folder; give a file name, e.g. {path / 'results.jsonl'}", USAGE
        )


def hold_output(file: IO[str], path: Path) -> None:
    """Hold `--out` for one batch at a time, whatever the checkpoints of the batches.

    Two batches appending to one output file would both run every task missing from it
    and write it twice. The hold is an exclusive `flock` on the open file, which the
    system drops when the file is closed or its process ends, however it ends (`kill -9`
    too); it is taken before any task runs.

    Raises:
        CliError: If another batch holds the file, naming its process (exit code 1).
    """
    if fcntl is None:  # pragma: no cover - not POSIX
        return
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        raise CliError(
            f"--out {path} is being written by another batch ({output_holder(path)}); "
            "wait for it to end, or give this batch another --out"
        ) from None


def output_holder(path: Path) -> str:
    """The process holding `path`'s `flock` (read from /proc/locks, on Linux).

    "another process" where the system does not say.
    """
    try:
        info = path.stat()
        with open("/proc/locks", encoding="ascii") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return "another process"
    wanted = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for line in lines:  # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:1474578 0 EOF"
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == wanted:
            return f"process {fields[4]}"
    return "another process"


def json_line(record: dict[str, Any]) -> str:
    r"""`record` as one JSON line, readable text; escaped to ASCII if it holds no-text.

    A string holding a lone surrogate cannot be written as UTF-8; its `\u` escape is
    the same JSON value, so such a row (a failed one) is written, never the end of the
    batch.
    """
    text = json.dumps(record, ensure_ascii=False)
    if unwritable(text) is not None:
        text = json.dumps(record)
    return text + "\n"


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def output_record(item: BatchItem, result: RefineResult) -> dict[str, Any]:
    """The output line of a finished task."""
    data = result_json(result)
    return {
        "id": item.id,
        "task": item.task,
        **{k: data[k] for k in OUTPUT_KEYS[2:]},
        "attempts": data["attempts"],
        "models": data["models"],
        **({"selection": data["selection"]} if "selection" in data else {}),
    }


def error_record(item: BatchItem, exc: BaseException, message: str) -> dict[str, Any]:
    """The output line of a failed task: its `error`, and the attempts it had, if known.

    `BudgetExhaustedError` and `ContextLengthError` carry the best result so far in
    `.result`; its fields (attempts, scores) are kept, so no finished model call is lost
    from the record.
    """
    result = getattr(exc, "result", None)
    record = (
        output_record(item, result)
        if isinstance(result, RefineResult)
        else {"id": item.id, "task": item.task, "attempts": []}
    )
    record["error"] = message
    return record


@dataclass
class BatchStats:
    """Running totals, shown in the progress bar and the final summary."""

    total: int = 0
    done: int = 0
    failed: int = 0
    first_scores: list[float] = field(default_factory=list)
    best_scores: list[float] = field(default_factory=list)
    stop_reasons: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    unpriced: int = 0  # finished tasks whose cost is unknown
    invalid: int = 0  # input lines not run (malformed, refused), each reported
    cache_hits: int = 0  # replies the model cache gave: no calls, no cost
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # see `per_model`

    def fail(self) -> None:
        """Count one failed task."""
        self.failed += 1

    def add(self, result: RefineResult) -> None:
        """Count one finished task."""
        self.done += 1
        if result.score_history:
            self.first_scores.append(result.score_history[0])
        if result.score is not None:
            self.best_scores.append(result.score)
        reason = result.stop_reason or "unfinished"
        self.stop_reasons[reason] = self.stop_reasons.get(reason, 0) + 1
        merge(self.models, per_model(result.attempts))
        self.cache_hits += result.usage.cache_hits
        if result.usage.cost is None:
            self.unpriced += 1
        else:
            self.cost += result.usage.cost

    def describe(self) -> str:
        """`done 3/10, failed 0, mean score 0.42 → 0.81` style summary."""
        text = f"done {self.done}/{self.total}, failed {self.failed}"
        if self.invalid:
            text += f", invalid {self.invalid} line(s) not run (reported above)"
        if self.best_scores:
            text += f", mean score {_mean(self.first_scores):.2f} → {_mean(self.best_scores):.2f}"
        if self.done == self.unpriced:
            text += ", cost unknown" if self.done else ""
        else:
            text += f", cost {cost_text(self.cost)}"
            if self.unpriced:
                text += f" + {self.unpriced} task(s) with an unknown price"
        if self.cache_hits:
            text += f", {self.cache_hits} cache hit(s)"
        return text


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class Progress:
    """What the batch reports as it goes (the rich progress bar implements it)."""

    def started(self, stats: BatchStats) -> None:
        """The batch starts; `stats.total` tasks will run."""

    def finished(self, stats: BatchStats) -> None:
        """A task finished (or failed); `stats` holds the new totals."""

    def error(self, message: str) -> None:
        """Report one problem (a bad line, a failed task) as one line."""


class RichProgress(Progress):
    """A rich progress bar with counts and scores; problems are printed above it.

    The counts come first and the bar takes only the width left over, so a narrow
    terminal (80 columns) shrinks the bar, then cuts the scores, before the counts.

    Args:
        console: Where to draw (stderr, so stdout stays for results).
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.bar = RichProgressBar(
            BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=4)),
            TextColumn("{task.description}", table_column=Column(no_wrap=True)),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            expand=True,
        )
        self.task_id = self.bar.add_task("", total=None)

    def __enter__(self) -> RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def started(self, stats: BatchStats) -> None:
        """Set the bar's total."""
        self.bar.update(self.task_id, total=stats.total, completed=0, description=stats.describe())

    def finished(self, stats: BatchStats) -> None:
        """Advance the bar and show the new counts and mean scores."""
        self.bar.update(
            self.task_id, completed=stats.done + stats.failed, description=stats.describe()
        )

    def error(self, message: str) -> None:
        """Print one problem above the bar."""
        self.bar.console.print(Text(f"langgraph-refine: {one_line(message)}"), soft_wrap=True)


class LineProgress(Progress):
    """Progress as plain lines, for a stderr that is no terminal (a file, a CI log).

    A bar redrawn in place means nothing there, and rich draws it only when the batch
    ends; a line with the counts is written as tasks finish instead, at most one per
    `every` seconds (the first and the last always).

    Args:
        console: Where to write.
        every: The least seconds between two lines.
    """

    def __init__(self, console: Console, every: float = 1.0) -> None:
        self.console = console
        self.every = every
        self._last = -float("inf")
        self._stats: BatchStats | None = None
        self._shown = ""

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stats is not None:  # the final counts, as a bar would end on them
            self._counts(self._stats)

    def started(self, stats: BatchStats) -> None:
        """Say how many tasks will run."""
        self._stats = stats
        self._line(f"refining {stats.total} task(s)")

    def finished(self, stats: BatchStats) -> None:
        """Write the counts, unless a line was written less than `every` seconds ago."""
        self._stats = stats
        now = time.monotonic()
        if now - self._last >= self.every or stats.done + stats.failed == stats.total:
            self._counts(stats)
            self._last = now

    def _counts(self, stats: BatchStats) -> None:
        text = f"refining: {stats.describe()}"
        if text != self._shown:
            self._shown = text
            self._line(text)

    def error(self, message: str) -> None:
        """Write one problem as one line."""
        self._line(f"langgraph-refine: {one_line(message)}")

    def _line(self, text: str) -> None:
        self.console.print(Text(text), soft_wrap=True)
        self.console.file.flush()


def progress_for(console: Console) -> RichProgress | LineProgress:
    """A progress bar on a terminal, plain lines elsewhere."""
    return RichProgress(console) if console.is_terminal else LineProgress(console)


RunOne = Callable[[BatchItem], Awaitable[RefineResult]]
"""Runs one task to its end and returns its result (locally, or on a server)."""


async def run_items(
    items: list[BatchItem],
    settings: ModelSettings,
    writer: LineWriter,
    *,
    concurrency: int,
    progress: Progress,
    generator: BaseChatModel | list[BaseChatModel] | None = None,
    store: BaseStore | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> BatchStats:
    """Refine `items` locally with at most `concurrency` loops at a time (see `run_rows`).

    With a `checkpointer`, each task runs on a thread of its own (`task_thread`), so a
    batch killed and rerun continues its unfinished tasks from their last completed call.

    Args:
        items: The tasks to run.
        settings: How to build the models.
        writer: Where finished and failed tasks are appended.
        concurrency: The most loops running at once.
        progress: Receives the counts as tasks finish, and the problems.
        generator: The generator's model (built from `settings` if not given).
        store: The store every loop shares (the strategy record), or None.
        checkpointer: Where each task's run is checkpointed, or None.

    Raises:
        CliError: If the model server is unreachable, or a task's thread is being
            written by another process (after the running tasks end).
    """
    if not items:
        return await run_rows(items, _never, writer, concurrency=concurrency, progress=progress)
    loops = _Loops(generator or batch_generator(items, settings), settings, store, checkpointer)

    async def run_one(item: BatchItem) -> RefineResult:
        loop = loops.get(item.options)
        if checkpointer is None:
            return await loop.arun(item.task)
        thread = task_thread(item)
        try:
            return await loop.arun(item.task, thread_id=thread)
        except ThreadSettingsError as exc:  # the line changed since its run was stopped
            progress.error(
                f"id {item.id!r} (line {item.line}): its unfinished run was started "
                f"differently ({describe_differences(exc.differences)}); starting it over"
            )
            return await loop.arun(item.task, thread_id=thread, restart=True)

    def fatal(exc: BaseException) -> str | None:
        if isinstance(exc, ThreadBusyError):
            return str(exc)
        if not is_unreachable(exc):
            return None
        return describe_error(exc, settings.describe_endpoint(), settings.timeout)

    try:
        return await run_rows(
            items, run_one, writer, concurrency=concurrency, progress=progress, fatal=fatal
        )
    finally:
        await settings.http.aclose()


def task_thread(item: BatchItem) -> str:
    """The checkpoint thread of a task: its id's, so a rerun finds it again."""
    return f"batch task {id_key(item.id)}"


def default_checkpoint(out: Path) -> Path:
    """Where a batch checkpoints its tasks' runs without `--checkpoint`: beside `--out`."""
    return out.with_name(out.name + ".checkpoint.sqlite")


def batch_generator(
    items: list[BatchItem], settings: ModelSettings
) -> BaseChatModel | list[BaseChatModel] | None:
    """The batch's own generator (`--model`), built before any output; None when unused.

    A line's `model` replaces `--model` for that line, so a batch whose every line names
    its models needs no `--model`.

    Raises:
        CliError: If a line relies on `--model` and none is given (or it cannot be built).
    """
    if items and all(item.options.models for item in items) and not settings.model:
        return None
    return settings.generator() if items else None


class _Loops:
    """The batch's compiled loops, one per `CommandOptions` object the tasks share.

    Building and compiling a loop costs about as much CPU as a model call. Every line
    without options of its own shares the batch's defaults (one object), so a batch
    compiles its loop once; a line with its own options gets its own loop. The models are
    built once for the batch, by `ModelSettings`, when a loop first needs them.
    """

    KEEP = 16
    """Compiled loops kept: the defaults' and the most recent lines' own."""

    def __init__(
        self,
        model: BaseChatModel | list[BaseChatModel] | None,
        settings: ModelSettings,
        store: BaseStore | None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
    ) -> None:
        self.checkpointer = checkpointer
        self.model = model
        self.generators = LineGenerators(settings, model)  # a line's own `model`, else this
        self.settings = settings
        self.store = store
        # By the options object's id; the object is kept with its loop, so the id stays its.
        self._loops: dict[int, tuple[CommandOptions, CompiledLoop]] = {}

    def get(self, options: CommandOptions) -> CompiledLoop:
        """The compiled loop for `options` (compiled on first use)."""
        found = self._loops.get(id(options))
        if found is not None:
            return found[1]
        generator = self.generators(options.models)
        judge = self.settings.judge  # built on first use, once for the batch
        if self.model is None and not self.settings.judge_model:
            # No --model: the judge runs on the line's own first model (as `run` judges
            # with its first rung).
            first = generator[0] if isinstance(generator, list) else generator
            judge = lambda: first  # noqa: E731 - a one-line factory
        loop = CompiledLoop(
            generator,
            store=self.store,
            checkpointer=self.checkpointer,
            **options.graph_kwargs(judge),
        )
        if len(self._loops) >= self.KEEP:
            del self._loops[next(iter(self._loops))]
        self._loops[id(options)] = (options, loop)
        return loop


async def _never(item: BatchItem) -> RefineResult:  # pragma: no cover - no item to run
    raise AssertionError(item)


async def run_rows(
    items: list[BatchItem],
    run_one: RunOne,
    writer: LineWriter,
    *,
    concurrency: int,
    progress: Progress,
    fatal: Callable[[BaseException], str | None] = lambda exc: None,
    row_extra: Callable[[BatchItem], dict[str, Any]] = lambda item: {},
) -> BatchStats:
    """Run `items` with at most `concurrency` in flight, appending one row per task.

    A task that fails is written as a row with an `error` field (a rerun retries it) and
    reported. An error `fatal` names (the server cannot be reached at all) starts no
    further task, writes no row, and is raised once the running tasks end.

    Args:
        items: The tasks to run.
        run_one: Runs one task.
        writer: Where rows are appended.
        concurrency: The most tasks in flight.
        progress: Receives the counts as tasks finish, and the problems.
        fatal: Returns the message of an error that must stop the batch, else None.
        row_extra: Extra fields for a task's row (e.g. its server thread).

    Raises:
        CliError: With `fatal`'s message, if such an error happened.
    """
    stats = BatchStats(total=len(items))
    progress.started(stats)
    queue = list(reversed(items))
    stopped: list[str] = []

    async def worker(number: int) -> None:
        LANE.set(number)  # this task's context only: its requests use its lane's pool
        while queue and not stopped:
            item = queue.pop()
            try:
                if item.problem is not None:  # a failed row, as a task that failed is
                    raise CliError(f"{item.problem}; fix line {item.line} of the input file")
                result = await run_one(item)
                failure = failed_result(result)
                if failure is not None:  # ended, but judged nothing to trust: a failed row
                    raise CliError(failure, result=result)
            except Exception as exc:
                stop = fatal(exc)
                if stop is not None:  # not the task's failure: no row, and a rerun runs it
                    stopped.append(stop)
                    continue
                message = describe_error(exc)
                await writer.awrite({**error_record(item, exc, message), **row_extra(item)})
                stats.fail()
                progress.error(f"id {item.id!r} (line {item.line}) failed: {message}")
            else:
                await writer.awrite({**output_record(item, result), **row_extra(item)})
                stats.add(result)
            progress.finished(stats)

    await asyncio.gather(*(worker(n) for n in range(max(1, min(concurrency, len(items))))))
    if stopped:
        saved = stats.done + stats.failed
        raise CliError(
            f"{stopped[0]} ({saved} task(s) saved before that: {stats.done} finished, "
            f"{stats.failed} failed; rerun the same command to run the other "
            f"{stats.total - saved})"
        )
    return stats


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


@contextlib.contextmanager
def saved_on_interrupt(
    out: Path, todo: list[BatchItem], checkpoint: str | Path | None = None
) -> Iterator[None]:
    """Turn Ctrl-C and SIGTERM during the block into one line: what is saved, how to go on.

    The block's own exits run first (the progress bar stops and shows the cursor again);
    the count is read back from the output file, so it is what a rerun will skip.

    Raises:
        CliError: On an interrupt (exit code 130, or 143 for SIGTERM).
    """
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: SIGTERM keeps its handler
        previous = None
    try:
        yield
    except KeyboardInterrupt as exc:
        keys = {id_key(item.id) for item in todo}
        saved = len(done_ids(out, lambda message: None) & keys)
        unfinished = (
            ", unfinished ones continue from their last completed call (kept in "
            f"{shown(checkpoint)})"
            if checkpoint is not None
            else ""
        )
        raise CliError(
            f"interrupted: {saved} of {len(todo)} task(s) finished and saved in {out}; rerun "
            f"the same command to continue (saved tasks are skipped{unfinished})",
            exit_code=143 if isinstance(exc, Terminated) else 130,
        ) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


BATCH_CLAIM = "batch"
"""The name a batch claims in its checkpoint, as a run claims its thread (`_loop._claim`)."""


@contextlib.asynccontextmanager
async def batch_claim(
    checkpoint: str | Path, saver: BaseCheckpointSaver[Any]
) -> AsyncIterator[None]:
    """Hold the batch's checkpoint (a SQLite file or a PostgreSQL database) for one batch.

    Two batches on one checkpoint would run the same tasks' threads; the second is
    refused before any task starts. The claim is the one a run takes on its thread
    (a renewed row in a SQLite file, a session advisory lock in PostgreSQL): a batch
    that was killed holds nothing (see `_loop._claim`).

    Raises:
        CliError: If another batch is running on `checkpoint`.
    """
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(
                aclaim_thread(saver, {"configurable": {"thread_id": BATCH_CLAIM}})
            )
        except ThreadBusyError as exc:
            holder = str(exc).split(": ", 1)[1].split(";")[0]
            raise CliError(
                f"--checkpoint {shown(checkpoint)} is in use by another batch ({holder}); "
                "wait for it to end, or give this batch another --out or --checkpoint"
            ) from None
        yield


def summary_line(stats: BatchStats, skipped: int, out: Path, invalid: int = 0) -> str:
    """The line printed when the batch ends.

    Args:
        stats: The batch's totals.
        skipped: Tasks not run because the output file already holds them.
        out: The output file.
        invalid: Input lines that were not run (malformed, refused), each reported above.
    """
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(stats.stop_reasons.items()))
    text = replace(stats, invalid=invalid).describe() + f"; skipped {skipped} already in {out}"
    if stats.failed:
        text += " (failed tasks are rows with an 'error' field; rerun to retry them)"
    if len(stats.models) > 1:  # a ladder: which model did how much
        text += f"; by model: {models_text(stats.models)}"
    return one_line(text + (f"; stop reasons: {reasons}" if reasons else ""))
