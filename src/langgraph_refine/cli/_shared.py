"""The flags `run` and `batch` share, declared once (`SharedFlags`); how a command takes them.

The plain loop options' flags come from the options' declaration (`cli._flags`); the flags
here are the ones read by hand: the models and where they are served, the check, the loop
options whose values need reading of their own (memory, budget and prices, schema, edits).
`with_shared_flags` gives a typer command all of them and hands it one `SharedFlags`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from langgraph_refine._calls._models import DEFAULT_MAX_TOKENS, MAX_TOKENS_ENV
from langgraph_refine._decisions._edits import EDITS_AUTO_MIN_CHARS
from langgraph_refine._decisions._options import RUN
from langgraph_refine.cli._calibration import read_for_run
from langgraph_refine.cli._errors import USAGE, CliError
from langgraph_refine.cli._flags import declared_flags, loop_flags
from langgraph_refine.cli._ladder_view import parse_models
from langgraph_refine.cli._models import ModelSettings
from langgraph_refine.cli._options import (
    MEMORY_CHOICES,
    CommandOptions,
    flag_named,
    make_budget,
    parse_edits,
    parse_memory,
    parse_prices,
    read_schema,
)
from langgraph_refine.cli._specs import SPEC_FORMS, parse_specs

Command = TypeVar("Command", bound=Callable[..., Any])
_KEYWORD = inspect.Parameter.KEYWORD_ONLY


def _flag(*decls: str, help: str, metavar: str | None = None, default: Any = None) -> Any:
    """A `SharedFlags` field: its default, and its typer option in the field's metadata."""
    option = typer.Option(*decls, metavar=metavar, help=help)
    return field(default=default, metadata={"flag": option})


@dataclass(frozen=True)
class SharedFlags:
    """What `run` and `batch` were given besides their own flags.

    Each field but `loop` is a flag (its typer option in the field's metadata); `loop`
    holds the plain loop options' flags by option name (None, or False, when not given).
    """

    model: list[str] | None = _flag(
        "--model",
        "-m",
        metavar="NAME",
        help="Generator model: 'provider:model' (e.g. openai:gpt-4o-mini) or a model name "
        "served over the OpenAI protocol. Repeat it for a ladder of models, cheapest first: "
        "a stronger model writes a round only when the cheaper ones stop raising the best "
        "score. Default: $REFINE_MODEL.",
    )
    base_url: str | None = _flag(
        "--base-url",
        metavar="URL",
        help="OpenAI-compatible server URL. Default: $OPENAI_BASE_URL.",
    )
    judge_model: str | None = _flag(
        "--judge-model",
        metavar="NAME",
        help="Model of the LLM judge. Default: the generator's model.",
    )
    evaluator: list[str] | None = _flag(
        "--evaluator",
        "-e",
        metavar="SPEC",
        help="Evaluator spec, repeatable (several are combined with equal weights): "
        + ", ".join(SPEC_FORMS)
        + ". Default: judge.",
    )
    memory: str | None = _flag(
        "--memory",
        metavar="POLICY",
        help=f"Earlier attempts the generator sees: {', '.join(MEMORY_CHOICES)}, or a number N "
        "(the N most recent). Default: best_and_last.",
    )
    budget_calls: int | None = _flag(
        "--budget-calls", metavar="N", help="Most model calls per task."
    )
    budget_tokens: int | None = _flag(
        "--budget-tokens", metavar="N", help="Most tokens (in and out) per task."
    )
    budget_seconds: float | None = _flag(
        "--budget-seconds", metavar="S", help="Most seconds per task."
    )
    max_cost: float | None = _flag(
        "--max-cost",
        metavar="USD",
        help="Most US dollars per task, each model call priced from its tokens "
        "(genai-prices data, or --price). A model without a known price is refused.",
    )
    price: list[str] | None = _flag(
        "--price",
        metavar="MODEL=IN,OUT",
        help="A model's price in USD per million input and output tokens, e.g. "
        "--price my-model=0.15,0.6 (repeatable; adds to or overrides genai-prices).",
    )
    cache: Path | None = _flag(
        "--cache",
        metavar="PATH",
        help="SQLite file of LangChain's model cache: identical model calls are answered from it.",
    )
    timeout: float = _flag(
        "--timeout", metavar="SECONDS", help="Seconds one model call may take.", default=120.0
    )
    max_tokens: int | None = _flag(
        "--max-tokens",
        metavar="N",
        help=f"Output tokens one model call may generate, so a runaway generation ends. "
        f"Default: ${MAX_TOKENS_ENV}, else {DEFAULT_MAX_TOKENS}.",
    )
    schema: Path | None = _flag(
        "--schema",
        metavar="FILE.json",
        help="Refine a JSON object, not text: the JSON Schema it must match. The model is "
        "asked for it through its structured output; invalid replies fail and are refined.",
    )
    edits: str | None = _flag(
        "--edits",
        metavar="MODE",
        help="How refinements change an attempt: off (rewrite it whole), on (SEARCH/REPLACE "
        "edits, applied whole or not at all), auto (edits for attempts over "
        f"{EDITS_AUTO_MIN_CHARS} characters).",
    )
    calibration: Path | None = _flag(
        "--calibration",
        metavar="FILE",
        help="Judge with the checks' PASS calibrated against people's labels: the file "
        "`langgraph-refine calibrate --out FILE` wrote for the same -e checks.",
    )
    loop: Mapping[str, Any] = field(default_factory=dict)

    def options(self, *, on_server: bool = False) -> CommandOptions:
        """The loop's options and check, parsed and checked before any model is built.

        Args:
            on_server: The checks run on a server, which reads the files they name.

        Raises:
            CliError: With exit code 2 (a usage error), naming the flag and the value.
        """
        try:
            settings = {
                flag.name: flag.read(self.loop[flag.name], option=flag.flag)
                for flag in loop_flags(RUN)
                if self.loop.get(flag.name) is not None and self.loop[flag.name] is not False
            }
            budget = make_budget(
                self.budget_calls, self.budget_tokens, self.budget_seconds, self.max_cost
            )
            special = {
                "memory": None if self.memory is None else parse_memory(self.memory),
                "budget": budget,
                "output_schema": None
                if self.schema is None
                else read_schema(self.schema, option="--schema"),
                "edits": None if self.edits is None else parse_edits(self.edits, option="--edits"),
            }
            settings.update({name: value for name, value in special.items() if value is not None})
            options = CommandOptions(
                specs=parse_specs(list(self.evaluator or []), on_server=on_server),
                settings=settings,
                prices=parse_prices(self.price),
                calibration=None if self.calibration is None else read_for_run(self.calibration),
            )
            options.check()
        except CliError as exc:  # a bad option value is a usage error
            raise CliError(flag_named(str(exc)), exit_code=2) from None
        return options

    def model_settings(self) -> ModelSettings:
        """How the command builds its models (the generator or its ladder, the judge).

        Raises:
            CliError: For a bad `--timeout`, `--cache` or `--model` value.
        """
        if self.timeout <= 0:
            raise CliError(
                f"--timeout must be a positive number of seconds, got {self.timeout}",
                exit_code=2,
            )
        names = parse_models(self.model)
        settings = ModelSettings.from_options(
            names[0] if names else None,
            self.base_url,
            self.judge_model,
            timeout=self.timeout,
            max_tokens=self.max_tokens,
            cache=_open_cache(self.cache),
        )
        return replace(settings, ladder=names[1:]) if len(names) > 1 else settings

    def server_models(self) -> dict[str, Any]:
        """The models a server's runs are asked for in their context (those given)."""
        models = {
            "judge_model": self.judge_model,
            "max_tokens": self.max_tokens,
            "models": list(parse_models(self.model)) or None,
        }
        return {key: value for key, value in models.items() if value is not None}


def with_shared_flags(surface: str, *, skip: tuple[str, ...] = ()) -> Callable[[Command], Command]:
    """Give a typer command the shared flags and the plain loop options' flags of `surface`.

    The command declares a `flags: SharedFlags` parameter and receives them there. Its own
    parameters without a default (arguments, required options) stand first in its help,
    then the shared flags, the loop options' flags, and its other parameters. A loop
    option's flag the command declares itself is its own (`run`'s `--review` is a switch);
    the options named in `skip` have none (`mcp` has no person to review).
    """
    hints = get_type_hints(SharedFlags)
    shared = [
        inspect.Parameter(
            f.name,
            _KEYWORD,
            default=f.default,
            annotation=Annotated[hints[f.name], f.metadata["flag"]],
        )
        for f in fields(SharedFlags)
        if "flag" in f.metadata
    ]

    def wrap(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "flags"]
        written = {flag for p in (*own, *shared) for flag in declared_flags(p)}
        loop = [
            flag
            for flag in loop_flags(surface)
            if flag.flag not in written and flag.name not in skip
        ]
        first = [p for p in own if p.default is inspect.Parameter.empty]
        rest = [p.replace(kind=_KEYWORD) for p in own if p not in first]
        parameters = [*first, *shared, *(flag.parameter() for flag in loop), *rest]

        @functools.wraps(command)
        def run(**given: Any) -> Any:
            values = {p.name: given.pop(p.name) for p in shared}
            values["loop"] = {flag.name: given.pop(flag.name) for flag in loop}
            return command(**given, flags=SharedFlags(**values))

        run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return wrap


def _open_cache(path: Path | None) -> Any:
    if path is None:
        return None
    import sqlite3

    from langgraph_refine.cli._cache import SQLiteCache

    if path.is_dir():
        raise CliError(
            f"--cache {path} is a folder; give a file name, e.g. {path / 'cache.sqlite'}",
            exit_code=USAGE,
        )
    if not path.parent.exists():
        raise CliError(f"--cache {path}: the folder {path.parent} does not exist", USAGE)
    try:
        return SQLiteCache(path)
    except sqlite3.DatabaseError as exc:
        raise CliError(f"--cache {path} is not a usable SQLite database: {exc}", USAGE) from None
