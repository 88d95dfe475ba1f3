"""The typer application: the `run`, `batch` and `report` verbs and their options.

Every error reaches the user as one line on stderr with a non-zero exit code, never as a
traceback: `run_app` turns `CliError`, click's usage errors and anything unexpected into
`langgraph-refine: <message>`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from langgraph_refine._calls._models import DEFAULT_MAX_TOKENS, MAX_TOKENS_ENV
from langgraph_refine._decisions._edits import EDITS_AUTO_MIN_CHARS
from langgraph_refine._decisions._options import BATCH, RUN
from langgraph_refine.cli._errors import CliError, describe_error, one_line
from langgraph_refine.cli._flags import with_loop_flags
from langgraph_refine.cli._ladder_view import parse_models
from langgraph_refine.cli._models import ModelSettings
from langgraph_refine.cli._options import MEMORY_CHOICES, PER_LINE_OPTIONS, CommandOptions
from langgraph_refine.cli._specs import SPEC_FORMS

PROG = "langgraph-refine"

app = typer.Typer(
    name=PROG,
    help="Refine LLM answers with an evaluator-optimizer loop: one task, a JSONL dataset, "
    "or an HTML report of a batch.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Flags shared by `run` and `batch`. The loop's options are declared in `LoopOptions`, whose
# defaults the flags take (`DEFAULTS`); a test checks each flag against the declaration.
ModelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--model",
        "-m",
        metavar="NAME",
        help="Generator model: 'provider:model' (e.g. openai:gpt-4o-mini) or a model name served "
        "over the OpenAI protocol. Repeat it for a ladder of models, cheapest first: a stronger "
        "model writes a round only when the cheaper ones stop raising the best score. "
        "Default: $REFINE_MODEL.",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url", metavar="URL", help="OpenAI-compatible server URL. Default: $OPENAI_BASE_URL."
    ),
]
JudgeOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-model",
        metavar="NAME",
        help="Model of the LLM judge. Default: the generator's model.",
    ),
]
EvaluatorOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--evaluator",
        "-e",
        metavar="SPEC",
        help="Evaluator spec, repeatable (several are combined with equal weights): "
        + ", ".join(SPEC_FORMS)
        + ". Default: judge.",
    ),
]
MemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--memory",
        metavar="POLICY",
        help="Earlier attempts the generator sees: "
        + ", ".join(MEMORY_CHOICES)
        + ", or a number N (the N most recent). Default: best_and_last.",
    ),
]
BudgetCallsOpt = Annotated[
    int | None,
    typer.Option("--budget-calls", metavar="N", help="Most model calls per task."),
]
BudgetTokensOpt = Annotated[
    int | None,
    typer.Option("--budget-tokens", metavar="N", help="Most tokens (in and out) per task."),
]
BudgetSecondsOpt = Annotated[
    float | None,
    typer.Option("--budget-seconds", metavar="S", help="Most seconds per task."),
]
MaxCostOpt = Annotated[
    float | None,
    typer.Option(
        "--max-cost",
        metavar="USD",
        help="Most US dollars per task, each model call priced from its tokens "
        "(genai-prices data, or --price). A model without a known price is refused.",
    ),
]
PriceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--price",
        metavar="MODEL=IN,OUT",
        help="A model's price in USD per million input and output tokens, e.g. "
        "--price my-model=0.15,0.6 (repeatable; adds to or overrides genai-prices).",
    ),
]
CacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache",
        metavar="PATH",
        help="SQLite file of LangChain's model cache: identical model calls are answered from it.",
    ),
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", metavar="SECONDS", help="Seconds one model call may take.")
]
SchemaOpt = Annotated[
    Path | None,
    typer.Option(
        "--schema",
        metavar="FILE.json",
        help="Refine a JSON object, not text: the JSON Schema it must match. The model is "
        "asked for it through its structured output; invalid replies fail and are refined.",
    ),
]
EditsOpt = Annotated[
    str | None,
    typer.Option(
        "--edits",
        metavar="MODE",
        help="How refinements change an attempt: off (rewrite it whole), on (SEARCH/REPLACE "
        "edits, applied whole or not at all), auto (edits for attempts over "
        f"{EDITS_AUTO_MIN_CHARS} characters).",
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        metavar="N",
        help=f"Output tokens one model call may generate, so a runaway generation ends. "
        f"Default: ${MAX_TOKENS_ENV}, else {DEFAULT_MAX_TOKENS}.",
    ),
]


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _stdout() -> Console:
    return Console(highlight=False)


def _settings(
    model: list[str] | None,
    base_url: str | None,
    judge_model: str | None,
    cache: Path | None,
    timeout: float,
    max_tokens: int | None,
) -> ModelSettings:
    if timeout <= 0:
        raise CliError(
            f"--timeout must be a positive number of seconds, got {timeout}", exit_code=2
        )
    names = parse_models(model)
    settings = ModelSettings.from_options(
        names[0] if names else None,
        base_url,
        judge_model,
        timeout=timeout,
        max_tokens=max_tokens,
        cache=_open_cache(cache),
    )
    return replace(settings, ladder=names[1:]) if len(names) > 1 else settings


def _open_cache(path: Path | None) -> Any:
    if path is None:
        return None
    import sqlite3

    from langgraph_refine.cli._cache import SQLiteCache

    if path.is_dir():
        raise CliError(
            f"--cache {path} is a folder; give a file name, e.g. {path / 'cache.sqlite'}"
        )
    if not path.parent.exists():
        raise CliError(f"--cache {path}: the folder {path.parent} does not exist")
    try:
        return SQLiteCache(path)
    except sqlite3.DatabaseError as exc:
        raise CliError(f"--cache {path} is not a usable SQLite database: {exc}") from None


@app.command()
@with_loop_flags(RUN)
def run(
    task: Annotated[
        str, typer.Argument(metavar="TASK", help="What to do, e.g. 'Write a haiku about rain.'")
    ],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    judge_model: JudgeOpt = None,
    evaluator: EvaluatorOpt = None,
    memory: MemoryOpt = None,
    budget_calls: BudgetCallsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_seconds: BudgetSecondsOpt = None,
    max_cost: MaxCostOpt = None,
    price: PriceOpt = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            metavar="PATH",
            help="SQLite file that makes the run durable (see --thread).",
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
            help="Discard the --thread's interrupted run and start over on that thread.",
        ),
    ] = False,
    review: Annotated[
        bool,
        typer.Option("--review", help="Ask you to approve, edit, reject or revise before the end."),
    ] = False,
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
    cache: CacheOpt = None,
    timeout: TimeoutOpt = 120.0,
    max_tokens: MaxTokensOpt = None,
    schema: SchemaOpt = None,
    edits: EditsOpt = None,
    loop: dict[str, Any] | None = None,
) -> None:
    """Refine one task, showing each round's score, verdict and feedback."""
    from langgraph_refine.cli._review import TerminalReviewer
    from langgraph_refine.cli._single import (
        RunRequest,
        check_task,
        execute,
        result_json,
        show_lost_work,
    )
    from langgraph_refine.cli._view import RoundView, show_result

    check_task(task)
    options = CommandOptions.from_cli(
        evaluator,
        loop or {},
        memory=memory,
        max_calls=budget_calls,
        max_tokens=budget_tokens,
        max_seconds=budget_seconds,
        max_cost=max_cost,
        prices=price,
        schema=schema,
        edits=edits,
    )
    settings = _settings(model, base_url, judge_model, cache, timeout, max_tokens)
    out, err = _stdout(), _stderr()
    screen = err if json_output else out
    request = RunRequest(
        task, options, checkpoint=checkpoint, thread=thread, review=review, restart=restart
    )
    try:
        result = execute(
            request,
            settings,
            view=RoundView(screen, enabled=not json_output, show_reasoning=show_reasoning),
            reviewer=TerminalReviewer(screen) if review else None,
            notes=err,
        )
    except CliError:
        raise
    except Exception as exc:
        message = describe_error(exc, settings.describe_endpoint(), settings.timeout)
        show_lost_work(exc, message, out, json_output=json_output, show_reasoning=show_reasoning)
        raise CliError(message) from None
    if json_output:
        sys.stdout.write(json.dumps(result_json(result), ensure_ascii=False) + "\n")
        sys.stdout.flush()
    else:
        show_result(out, result, show_reasoning=show_reasoning)


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
@with_loop_flags(BATCH)
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
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    judge_model: JudgeOpt = None,
    evaluator: EvaluatorOpt = None,
    memory: MemoryOpt = None,
    budget_calls: BudgetCallsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_seconds: BudgetSecondsOpt = None,
    max_cost: MaxCostOpt = None,
    price: PriceOpt = None,
    cache: CacheOpt = None,
    timeout: TimeoutOpt = 120.0,
    max_tokens: MaxTokensOpt = None,
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
    schema: SchemaOpt = None,
    edits: EditsOpt = None,
    loop: dict[str, Any] | None = None,
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
    kept = StoreChoice.from_cli(store, no_store, server)
    defaults = CommandOptions.from_cli(
        evaluator,
        loop or {},
        memory=memory,
        max_calls=budget_calls,
        max_tokens=budget_tokens,
        max_seconds=budget_seconds,
        max_cost=max_cost,
        prices=price,
        schema=schema,
        edits=edits,
        on_server=server is not None,
    )
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
        ladder = list(parse_models(model)) or None  # the run's `models` context
        models = {
            key: value
            for key, value in (
                ("judge_model", judge_model),
                ("max_tokens", max_tokens),
                ("models", ladder),
            )
            if value is not None
        }
        with saved_on_interrupt(out, todo):
            stats = _batch_on_server(todo, server, assistant, out, concurrency, err, models)
    else:
        settings = _settings(model, base_url, judge_model, cache, timeout, max_tokens)
        from langgraph_refine.cli._batch import batch_generator

        generator = batch_generator(todo, settings)  # a bad model fails before output
        writer = LineWriter(out)
        try:
            with saved_on_interrupt(out, todo), progress_for(err) as progress:
                stats, learned = asyncio.run(
                    _run_local(todo, settings, writer, concurrency, progress, generator, kept)
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
) -> tuple[Any, list[str]]:
    """Run the batch's tasks locally over one shared store; the stats and the record's lines."""
    from langgraph_refine.cli._batch import run_items
    from langgraph_refine.cli._store import store_summary

    async with kept.open() as store:
        stats = await run_items(
            todo,
            settings,
            writer,
            concurrency=concurrency,
            progress=progress,
            generator=generator,
            store=store,
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

    return asyncio.run(
        run_on_server(
            todo,
            ServerBatch(url, assistant, out, models),
            concurrency=concurrency,
            progress=lambda: progress_for(err),
        )
    )


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
    records = write_report(output_file, html, warn, kept=kept)
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


def _error(console: Console, message: str) -> None:
    console.print(Text(f"{PROG}: {one_line(message)}"), soft_wrap=True)


def run_app(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default: `sys.argv[1:]`) and return the exit code."""
    command = typer.main.get_command(app)
    err = _stderr()
    try:
        result = command.main(
            args=list(argv) if argv is not None else None, prog_name=PROG, standalone_mode=False
        )
    except CliError as exc:
        _error(err, str(exc))
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
            _error(err, exc.format_message() + hint)  # type: ignore[attr-defined]
            return int(getattr(exc, "exit_code", 2))
        if "Abort" in kinds:
            _error(err, "aborted")
            return 130
        _error(err, describe_error(exc))
        return 1
    return result if isinstance(result, int) else 0
