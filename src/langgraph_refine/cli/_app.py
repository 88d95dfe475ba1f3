"""The typer application: the `run`, `batch`, `report` and `mcp` verbs and their options.

Every error reaches the user as one line on stderr with a non-zero exit code, never as a
traceback: `run_app` turns `CliError`, click's usage errors and anything unexpected into
`langgraph-refine: <message>`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from langgraph_refine._decisions._options import BATCH, RUN
from langgraph_refine.cli._errors import CliError, describe_error, one_line
from langgraph_refine.cli._models import ModelSettings
from langgraph_refine.cli._options import PER_LINE_OPTIONS
from langgraph_refine.cli._shared import SharedFlags, with_shared_flags

PROG = "langgraph-refine"

ARGV: ContextVar[tuple[str, ...] | None] = ContextVar("ARGV", default=None)
"""The arguments of the command being run (for the command an interrupted run resumes with)."""

app = typer.Typer(
    name=PROG,
    help="Refine LLM answers with an evaluator-optimizer loop: one task, a JSONL dataset, "
    "an HTML report of a batch, or a tool for MCP hosts.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _show_version(value: bool) -> None:
    if value:
        from langgraph_refine._version import __version__

        _stdout().print(Text(f"{PROG} {__version__}"))
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_show_version
        ),
    ] = False,
) -> None:
    """The options of the command itself, before its verb."""


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _stdout() -> Console:
    return Console(highlight=False)


@app.command()
@with_shared_flags(RUN)
def run(
    task: Annotated[
        str, typer.Argument(metavar="TASK", help="What to do, e.g. 'Write a haiku about rain.'")
    ],
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            metavar="PATH|URI",
            help="SQLite file, or PostgreSQL database (postgresql://...), that makes the run "
            "durable (see --thread).",
        ),
    ] = None,
    thread: Annotated[
        str | None,
        typer.Option(
            "--thread",
            metavar="ID",
            help="Checkpoint thread id: continues that thread's interrupted run (same task "
            "and options).",
        ),
    ] = None,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart",
            help="With --thread: discard its interrupted run and start over on that thread.",
        ),
    ] = False,
    review: Annotated[
        bool,
        typer.Option("--review", help="Ask you to approve, edit, reject or revise before the end."),
    ] = False,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            metavar="PATH",
            help="SQLite file of a LangGraph store: the reviews you give (--review) are kept "
            "there as labels (langgraph-refine calibrate PATH -e ...).",
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the result as one JSON object, nothing else.")
    ] = False,
    show_reasoning: Annotated[
        bool,
        typer.Option(
            "--show-reasoning",
            help="Also show the reasoning a model gave beside each answer (kept apart from "
            "the answer: never judged, never fed back).",
        ),
    ] = False,
    flags: SharedFlags | None = None,
) -> None:
    """Refine one task, showing each round's score, verdict and feedback."""
    from langgraph_refine.cli._review import TerminalReviewer
    from langgraph_refine.cli._single import (
        RunRequest,
        check_task,
        execute,
        exit_code_of,
        failed_result,
        result_json,
        show_lost_work,
    )
    from langgraph_refine.cli._view import RoundView, show_result

    check_task(task)
    flags = flags or SharedFlags()
    options = flags.options()
    settings = flags.model_settings()
    out, err = _stdout(), _stderr()
    screen = err if json_output else out
    request = RunRequest(
        task,
        options,
        checkpoint=checkpoint,
        thread=thread,
        review=review,
        restart=restart,
        store=store,
        argv=ARGV.get(),
    )
    try:
        result = execute(
            request,
            settings,
            view=RoundView(screen, enabled=not json_output, show_reasoning=show_reasoning),
            reviewer=TerminalReviewer(screen) if review else None,
            notes=err,
        )
    except CliError as exc:  # an interrupt carries the best result so far
        show_lost_work(exc, str(exc), out, json_output=json_output, show_reasoning=show_reasoning)
        raise
    except Exception as exc:
        message = describe_error(exc, settings.describe_endpoint(), settings.timeout)
        show_lost_work(exc, message, out, json_output=json_output, show_reasoning=show_reasoning)
        raise CliError(message, exit_code_of(exc)) from None
    if json_output:
        sys.stdout.write(json.dumps(result_json(result), ensure_ascii=False) + "\n")
        sys.stdout.flush()
    else:
        show_result(out, result, show_reasoning=show_reasoning)
    failure = failed_result(result)
    if failure is not None:
        raise CliError(failure)


BATCH_HELP = (
    "Refine every task of a JSONL file; rerun with the same --out to finish an interrupted "
    "batch.\n\nA line may set its own "
    + ", ".join(PER_LINE_OPTIONS)
    + " (evaluator: a spec or a list of specs; model: a name or a ladder). Bad lines are "
    "reported with their line number and skipped; the exit code is 1 if any line or task "
    "failed. The tasks share a strategy record (in memory, or in the --store file), so "
    "explore learns from the tasks before."
)
"""`batch --help`: the keys a line may set come from the options' declaration."""


@app.command(help=BATCH_HELP)
@with_shared_flags(BATCH)
def batch(
    input_file: Annotated[
        Path,
        typer.Argument(metavar="INPUT.jsonl", help='One task per line: {"id": ..., "task": ...}.'),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            metavar="OUTPUT.jsonl",
            help="Output JSONL, appended to; ids already in it are skipped.",
        ),
    ],
    concurrency: Annotated[
        int,
        typer.Option("--concurrency", "-c", metavar="N", help="Loops running at the same time."),
    ] = 4,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            metavar="URL",
            help="Run each task on its own thread of the LangGraph Server at URL (the server's "
            "model is used unless --model or a line's model names others; each line's "
            "evaluator, model and loop options, --model, --judge-model and --max-tokens go in "
            "its run's context).",
        ),
    ] = None,
    assistant: Annotated[
        str,
        typer.Option(
            "--assistant", metavar="ID", help="With --server: the assistant or graph id to run."
        ),
    ] = "refine",
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            metavar="PATH",
            help="SQLite file that keeps the strategy record across batches (explore learns "
            "which moves help this model). Default: one in-memory record per batch.",
        ),
    ] = None,
    no_store: Annotated[
        bool,
        typer.Option("--no-store", help="Keep no strategy record: every task starts cold."),
    ] = False,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            metavar="PATH|URI",
            help="SQLite file, or PostgreSQL database (postgresql://...), where each task's "
            "run is checkpointed, so a rerun continues unfinished tasks from their last "
            "completed call. Default: OUTPUT.jsonl.checkpoint.sqlite beside --out.",
        ),
    ] = None,
    flags: SharedFlags | None = None,
) -> int:
    """Refine every task of a JSONL file (its help: `BATCH_HELP`)."""
    from langgraph_refine.cli._batch import (
        LineWriter,
        done_ids,
        id_key,
        progress_for,
        read_input,
        saved_on_interrupt,
        summary_line,
    )
    from langgraph_refine.cli._store import StoreChoice

    if concurrency < 1:
        raise CliError(f"--concurrency must be >= 1, got {concurrency}", exit_code=2)
    if server is not None and checkpoint is not None:
        raise CliError(
            "--checkpoint does not apply with --server (the server checkpoints its runs)",
            exit_code=2,
        )
    kept = StoreChoice.from_cli(store, no_store, server)
    flags = flags or SharedFlags()
    if server is not None and flags.calibration is not None:
        raise CliError(
            f"--calibration {flags.calibration} does not apply with --server: the server's "
            "judge is calibrated by its REFINE_CALIBRATION file",
            exit_code=2,
        )
    defaults = flags.options(on_server=server is not None)
    err = _stderr()
    found = read_input(input_file, defaults, on_server=server is not None)
    if server is not None:
        from langgraph_refine.cli._remote import check_server_items

        found.items = check_server_items(found.items, found.errors, input_file)
    for message in found.errors + found.warnings:
        _error(err, message)
    done = done_ids(out, lambda message: _error(err, message))
    todo = [item for item in found.items if id_key(item.id) not in done]
    skipped = len(found.items) - len(todo)
    learned: list[str] = []
    if server is not None:
        models = flags.server_models()
        with saved_on_interrupt(out, todo):
            stats = _batch_on_server(todo, server, assistant, out, concurrency, err, models)
    else:
        settings = flags.model_settings()
        from langgraph_refine.cli._batch import batch_generator, default_checkpoint
        from langgraph_refine.cli._single import run_stoppable

        generator = batch_generator(todo, settings)  # a bad model fails before output
        writer = LineWriter(out)
        saved = checkpoint or default_checkpoint(out)
        try:
            with saved_on_interrupt(out, todo, saved), progress_for(err) as progress:
                stats, learned = run_stoppable(  # SIGTERM cancels the tasks, as Ctrl-C does
                    _run_local(
                        todo, settings, writer, concurrency, progress, generator, kept, saved
                    )
                )
        finally:
            writer.close()
    _stdout().print(Text(summary_line(stats, skipped, out, len(found.errors))), soft_wrap=True)
    for line in learned:
        _stdout().print(Text(line), soft_wrap=True)
    return 1 if found.errors or stats.failed else 0


async def _run_local(
    todo: list[Any],
    settings: ModelSettings,
    writer: Any,
    concurrency: int,
    progress: Any,
    generator: Any,
    kept: Any,
    checkpoint: str | Path,
) -> tuple[Any, list[str]]:
    """Run the batch's tasks locally; the stats and the strategy record's lines.

    The tasks share one store, and each task's run is checkpointed in `checkpoint` (a
    SQLite path or a PostgreSQL URI).
    """
    from langgraph_refine.cli._batch import batch_claim, run_items
    from langgraph_refine.cli._checkpoint import open_saver
    from langgraph_refine.cli._store import store_summary

    async with kept.open() as store, open_saver(checkpoint) as saver:
        async with batch_claim(checkpoint, saver):
            stats = await run_items(
                todo,
                settings,
                writer,
                concurrency=concurrency,
                progress=progress,
                generator=generator,
                store=store,
                checkpointer=saver,
            )
        return stats, await store_summary(store)


def _batch_on_server(
    todo: list[Any],
    url: str,
    assistant: str,
    out: Path,
    concurrency: int,
    err: Console,
    models: dict[str, Any],
) -> Any:
    from langgraph_refine.cli._batch import progress_for
    from langgraph_refine.cli._remote import ServerBatch, run_on_server
    from langgraph_refine.cli._single import run_stoppable

    return run_stoppable(
        run_on_server(
            todo,
            ServerBatch(url, assistant, out, models),
            concurrency=concurrency,
            progress=lambda: progress_for(err),
        )
    )


@app.command()
@with_shared_flags(RUN, skip=("human_review",))
def mcp(
    transport: Annotated[
        str,
        typer.Option(
            "--transport",
            metavar="NAME",
            help="stdio (an MCP host starts this command and talks over its stdin and "
            "stdout) or streamable-http (a server at http://HOST:PORT/mcp).",
        ),
    ] = "stdio",
    port: Annotated[
        int, typer.Option("--port", metavar="N", help="With streamable-http: the port.")
    ] = 8000,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="ADDRESS",
            help="With streamable-http: the address to bind; requests must name it (or "
            "localhost, for a loopback address) in their Host and Origin headers.",
        ),
    ] = "127.0.0.1",
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-origin",
            metavar="ORIGIN",
            help="With streamable-http: also take requests from web pages of this origin "
            "(e.g. http://localhost:6274); repeatable.",
        ),
    ] = None,
    flags: SharedFlags | None = None,
) -> None:
    """Serve the loop as an MCP tool, `refine`, to an MCP host (stdio by default).

    The host's call gives the task and the run options a host model can use
    (max_iterations, budget, criteria, ...); the models, the default check and the other
    options are this command's flags, as for `run`. With a progress token, the host hears
    the loop's phase from the call's first moment and every few seconds; a cancelled call
    stops the loop.
    """
    try:
        import mcp as _  # noqa: F401
    except ImportError:
        raise CliError(
            f"the mcp command needs the MCP SDK: {MCP_INSTALL_HINT}", exit_code=1
        ) from None
    from langgraph_refine.cli._mcp import build_server, build_tool, serve, transport_named, warn
    from langgraph_refine.cli._mcp_http import origin_of

    chosen = transport_named(transport)
    if not 0 < port < 65536:
        raise CliError(f"--port must be a port number (1-65535), got {port}", exit_code=2)
    try:
        origins = [origin_of(origin) for origin in allow_origin or ()]
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None
    flags = flags or SharedFlags()
    tool = build_tool(flags.options(), flags.model_settings())
    if tool.unavailable:
        warn(tool.unavailable)
    asyncio.run(serve(build_server(tool), chosen, host=host, port=port, origins=origins))


MCP_INSTALL_HINT = "pip install 'langgraph-refine[mcp]'"


@app.command()
def report(
    output_file: Annotated[
        Path, typer.Argument(metavar="OUTPUT.jsonl", help="A batch's output file.")
    ],
    html: Annotated[Path, typer.Option("--html", metavar="FILE", help="The HTML file to write.")],
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            metavar="PATH",
            help="Also show the strategy record a batch kept in this SQLite file (--store).",
        ),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            metavar="FILE",
            help="Also show this calibration (calibrate --out): its figures and a plot of the "
            "false-PASS rate against the threshold.",
        ),
    ] = None,
) -> int:
    """Write a self-contained HTML report: summary, moves, failed tasks, score plot, attempts.

    The moves section shows the kinds of move the batch's loops made and how often each
    raised the best score; with --store, also the strategy record kept in that file.
    """
    from langgraph_refine.cli._report import batch_moves, failure_lines, write_report
    from langgraph_refine.cli._store import describe_moves, read_store_records

    err = _stderr()
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        _error(err, message)

    kept = read_store_records(store) if store is not None else None
    extra = ""
    if calibration is not None:
        from langgraph_refine.cli._calibration import calibration_section, read_for_run

        read = read_for_run(calibration)
        extra = calibration_section(read.report, read.judge)
    records = write_report(output_file, html, warn, kept=kept, extra=extra)
    out = _stdout()
    failures = failure_lines(records)
    out.print(
        Text(f"wrote {html} ({len(records)} task(s), {len(failures)} failed)"), soft_wrap=True
    )
    out.print(Text(f"moves in this batch: {describe_moves(batch_moves(records))}"), soft_wrap=True)
    for key, record in (kept or {}).items():
        out.print(Text(f"strategy record {key}: {describe_moves(record.moves)}"), soft_wrap=True)
    for line in failures:
        out.print(Text(line), soft_wrap=True)
    return 1 if warnings or failures else 0  # docs/cli.md: a skipped line or a failed task


@app.command()
def calibrate(
    labels: Annotated[
        Path,
        typer.Argument(
            metavar="LABELS.jsonl",
            help='People\'s verdicts, one JSON label a line: {"task", "response", '
            '"passed", "criteria"?}; or the SQLite store file of run --review --store.',
        ),
    ],
    evaluator: Annotated[
        list[str] | None,
        typer.Option(
            "--evaluator", "-e", metavar="SPEC", help="The checks to calibrate (as run's -e)."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", metavar="NAME", help="The judge's model unless --judge-model."
        ),
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option("--judge-model", metavar="NAME", help="The LLM judge's model.")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", metavar="URL", help="OpenAI-compatible server URL.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", help="Seconds one call may take.")
    ] = 120.0,
    cache: Annotated[
        Path | None,
        typer.Option("--cache", metavar="PATH", help="SQLite file of LangChain's model cache."),
    ] = None,
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha",
            metavar="A",
            help="False-PASS rate allowed: judge passes people would not pass.",
        ),
    ] = 0.1,
    confidence: Annotated[
        float, typer.Option("--confidence", metavar="C", help="Confidence of the bound.")
    ] = 0.9,
    out: Annotated[
        Path,
        typer.Option("--out", metavar="FILE", help="Where to write the calibration (JSON)."),
    ] = Path("calibration.json"),
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Also write an HTML page with the figures and a plot of the false-PASS rate "
            "against the threshold.",
        ),
    ] = None,
    criterion: Annotated[
        list[str] | None,
        typer.Option(
            "--criterion",
            metavar="TEXT",
            help="A criterion every judgment adds, as run's --criterion (repeat for more); "
            "the calibration then holds for runs with these criteria only.",
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option("--concurrency", metavar="N", help="Labels judged at a time."),
    ] = 4,
) -> int:
    """Calibrate a judge against people's labels: print the agreement table and threshold.

    The threshold is the lowest score whose false-PASS rate (a judge PASS a person would
    not pass) has an upper confidence bound, on held-out folds, at most --alpha. Writes
    the calibration to --out for run/batch --calibration FILE (with the same -e checks).
    Exit 0 when --alpha is met, 1 when these labels cannot show it (the file is still
    written; its judge passes nothing), 2 for a usage error.
    """
    from langgraph_refine.cli._calibration import (
        checks_text,
        read_label_file,
        run_calibration,
        show_report,
    )
    from langgraph_refine.cli._shared import SharedFlags
    from langgraph_refine.cli._specs import build_evaluators, parse_specs

    read = read_label_file(labels)
    specs = parse_specs(list(evaluator or []))
    flags = SharedFlags(
        model=[model] if model else None,
        base_url=base_url,
        judge_model=judge_model,
        timeout=timeout,
        cache=cache,
    )
    settings = flags.model_settings()
    checks = build_evaluators(specs, settings.judge)
    if checks is None:
        from langgraph_refine.evaluators import llm_judge

        checks = llm_judge(settings.judge())
    try:
        calibrated = run_calibration(
            read,
            checks,
            alpha=alpha,
            confidence=confidence,
            criteria=list(criterion or ()),
            concurrency=concurrency,
        )
    except CliError:
        raise
    except Exception as exc:
        raise CliError(
            describe_error(exc, settings.describe_endpoint(), settings.timeout)
        ) from None
    console = _stdout()
    show_report(console, calibrated.report, checks_text(specs))
    from langgraph_refine.cli._files import replace_whole

    replace_whole(
        out, lambda path: calibrated.save(path, judge_spec=checks_text(specs)), option="--out"
    )
    console.print(Text(f"wrote {out} (run with --calibration {out})"), soft_wrap=True)
    if html is not None:
        from langgraph_refine.cli._calibration import write_page

        write_page(html, calibrated.report, checks_text(specs))
        console.print(Text(f"wrote {html}"), soft_wrap=True)
    return 0 if calibrated.report.met else 1


def _error(console: Console, message: str, command: str = "") -> None:
    """One line, `langgraph-refine: <message>`, then `command` as it is (see `CliError`)."""
    if not command:
        console.print(Text(f"{PROG}: {one_line(message)}"), soft_wrap=True)
        return
    console.print(Text(f"{PROG}: {one_line(message)}"), soft_wrap=True, end=" ")
    console.file.write(command + "\n")  # not through rich, which would expand its tabs
    console.file.flush()


def _no_such_option(exc: Any, ctx: Any) -> str:
    """An unknown flag's message, suggesting only the command's flags near the word typed."""
    typed = str(exc.option_name)
    flags = [
        flag
        for param in ctx.command.params
        for flag in (*param.opts, *param.secondary_opts)
        if flag.startswith("--")
    ]
    near = near_flags(typed, flags)
    return f"No such option: {typed}" + (f"; did you mean {' or '.join(near)}?" if near else "")


def near_flags(typed: str, flags: Sequence[str]) -> list[str]:
    """The flags a mistyped one most likely meant: a typo or two away, or a part of it.

    A flag is near when its name is at most one edit (a letter added, dropped, changed,
    or two swapped) from the word typed, for every three letters typed; or when one of
    its dash-separated parts is (`--bugdet` for `--budget-calls`); or when one is the
    other's beginning (`--max-iter`, `--model-name`). Flags that merely share letters
    are not suggested.

    Example:
        >>> flags = ["--price", "--patience", "--max-iterations", "--max-cost", "--store"]
        >>> [near_flags(typed, flags) for typed in ("--pirce", "--max-iter", "--foo")]
        [['--price'], ['--max-iterations'], []]
    """
    word = typed.lstrip("-").lower()
    limit = max(1, len(word) // 3)

    def near(flag: str) -> bool:
        name = flag.lstrip("-")
        if min(len(word), len(name)) >= 4 and (name.startswith(word) or word.startswith(name)):
            return True
        return any(_edits(word, part) <= limit for part in (name, *name.split("-")))

    return sorted({flag for flag in flags if near(flag)})


def _edits(a: str, b: str) -> int:
    """The edit distance of `a` and `b`, a swap of two neighbours counting as one edit."""
    rows = [list(range(len(b) + 1))]
    for i, x in enumerate(a, start=1):
        row = [i]
        for j, y in enumerate(b, start=1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def run_app(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default: `sys.argv[1:]`) and return the exit code."""
    command = typer.main.get_command(app)
    err = _stderr()
    ARGV.set(tuple(argv if argv is not None else sys.argv[1:]))
    try:
        result = command.main(
            args=list(argv) if argv is not None else None, prog_name=PROG, standalone_mode=False
        )
    except CliError as exc:
        _error(err, str(exc), exc.command)
        return exc.exit_code
    except KeyboardInterrupt:
        _error(err, "interrupted")
        return 130
    except Exception as exc:
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        # typer may bundle its own copy of click, so its exceptions are matched by name.
        if "NoArgsIsHelpError" in kinds and getattr(exc, "ctx", None) is not None:
            _stdout().print(Text(exc.ctx.get_help()))  # type: ignore[attr-defined]
            return 2
        if "ClickException" in kinds:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if "UsageError" in kinds and ctx else ""
            message = exc.format_message()  # type: ignore[attr-defined]
            if "NoSuchOption" in kinds and ctx is not None:
                message = _no_such_option(exc, ctx)
            _error(err, message + hint)
            return int(getattr(exc, "exit_code", 2))
        if "Abort" in kinds:
            _error(err, "aborted")
            return 130
        _error(err, describe_error(exc))
        return 1
    return result if isinstance(result, int) else 0
