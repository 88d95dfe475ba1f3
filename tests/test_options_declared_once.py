"""Every loop option is declared once (`LoopOptions`); every surface agrees with it.

The surfaces: `create_refine_graph`'s and `refine`/`arefine`'s keywords (`RefineOptions`),
`RefineMiddleware`'s (`AgentOptions`), a run's context (`RefineContext`, the served
graph's too, and what `batch --server` sends), and the flags of `run` and `batch`. Each
test compares a surface's option names with the options the declaration says it takes
(`declared(surface)`): an option added to `LoopOptions` and missing from a surface, or
a surface's own option that the declaration does not know, fails here. An option a
surface does not take says why in its field (`not_in`), so the exclusions are written
once, beside the option, and listed by `test_every_exclusion_says_why`.

Then `options=`: one `LoopOptions` object handed to the graph, `refine` and the
middleware, keywords overriding it.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import textwrap
from dataclasses import fields, replace
from typing import Any, get_type_hints

import pytest
import typer
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from langgraph_refine import (
    Budget,
    Evaluation,
    LoopOptions,
    RefineContext,
    RefineMiddleware,
    RefineOptions,
    StopRules,
    arefine,
    create_refine_graph,
    refine,
)
from langgraph_refine._decisions._options import (
    AGENT,
    BATCH,
    CONTEXT,
    DEFAULTS,
    GRAPH,
    LINE,
    RUN,
    SURFACES,
    AgentOptions,
    context_key,
    declaration,
    declared,
    line_key,
)
from langgraph_refine._loop._run import CompiledLoop
from langgraph_refine.cli._app import app
from langgraph_refine.cli._batch import BatchItem
from langgraph_refine.cli._errors import CliError
from langgraph_refine.cli._flags import kind_of, loop_flags
from langgraph_refine.cli._options import PER_LINE_OPTIONS, CommandOptions
from langgraph_refine.cli._remote import GRAPH_ONLY_KEYS, RUN_CONTEXT_KEYS, run_context
from langgraph_refine.cli._shared import SharedFlags
from langgraph_refine.cli._specs import parse_specs
from tests.fakes import AgentModel

NAMES = tuple(f.name for f in fields(LoopOptions))


def mismatch(surface_names: set[str], expected: set[str]) -> dict[str, list[str]]:
    """What a surface lacks and what it adds, against the declaration (empty: none)."""
    diff = {
        "missing": sorted(expected - surface_names),
        "its own": sorted(surface_names - expected),
    }
    return {key: names for key, names in diff.items() if names}


# -- the declaration itself ----------------------------------------------------------------


def test_every_exclusion_says_why() -> None:
    for name in NAMES:
        for surface, reason in declaration(name).not_in.items():
            assert surface in SURFACES
            assert isinstance(reason, str) and reason.strip(), (name, surface)


def test_every_option_has_a_docstring_beside_its_field() -> None:
    # The attribute docstrings are what the API reference shows for each option.
    source = textwrap.dedent(inspect.getsource(LoopOptions))
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    documented = {
        statement.target.id
        for statement, following in zip(body.body, body.body[1:], strict=False)
        if isinstance(statement, ast.AnnAssign)
        and isinstance(statement.target, ast.Name)
        and isinstance(following, ast.Expr)
        and isinstance(following.value, ast.Constant)
        and isinstance(following.value.value, str)
    }
    assert documented == set(NAMES)


def test_every_cli_option_names_its_flags_and_every_other_has_none() -> None:
    for name in NAMES:
        on_cli = RUN in declared_surfaces(name) or BATCH in declared_surfaces(name)
        assert bool(declaration(name).flags) == on_cli, name


def declared_surfaces(name: str) -> set[str]:
    return {surface for surface in SURFACES if name in declared(surface)}


def test_the_stop_rules_take_their_parameters_from_the_options() -> None:
    # A stop rule's parameter is an option of the same name; `rules` is built from them.
    assert {f.name for f in fields(StopRules)} <= set(NAMES)
    options = LoopOptions(target_score=0.5, max_iterations=1, patience=None, min_delta=0.1)
    assert options.rules == StopRules(0.5, 1, None, 0.1)
    assert replace(options, patience=3).rules.patience == 3


def test_mismatch_reports_a_missing_option_and_a_surface_only_one() -> None:
    # The checks below compare with `mismatch`: it must see both kinds of drift.
    graph = set(declared(GRAPH))
    assert mismatch(graph, graph) == {}
    assert mismatch(graph - {"patience"}, graph) == {"missing": ["patience"]}
    assert mismatch(graph | {"stop_early"}, graph) == {"its own": ["stop_early"]}


# -- each surface against the declaration ------------------------------------------------


def test_create_refine_graph_and_refine_take_the_graph_options() -> None:
    assert mismatch(set(get_type_hints(RefineOptions)), set(declared(GRAPH))) == {}
    for function in (create_refine_graph, refine, arefine, CompiledLoop.__init__):
        parameters = inspect.signature(function).parameters
        assert "Unpack[RefineOptions]" in str(parameters["settings"]), function
        assert "LoopOptions" in str(parameters["options"]), function
    # No option written out beside them: the graph's other parameters are its inputs.
    graph_params = set(inspect.signature(create_refine_graph).parameters)
    assert graph_params == {"generator", "evaluator", "options", "settings"}


def test_refine_options_have_the_declared_types() -> None:
    declared_types = get_type_hints(LoopOptions)
    own = get_type_hints(RefineOptions)
    # output_schema: the keyword takes a model class or a dict too; the field keeps it
    # coerced to an OutputSchema (in __post_init__); criteria: the keyword takes one string
    # too, the field keeps a tuple.
    for name in set(own) - {"output_schema", "criteria"}:
        assert own[name] == declared_types[name], name


def test_the_middleware_takes_the_agent_options() -> None:
    assert mismatch(set(get_type_hints(AgentOptions)), set(declared(AGENT))) == {}
    parameters = inspect.signature(RefineMiddleware.__init__).parameters
    assert "Unpack[AgentOptions]" in str(parameters["settings"])
    # keep_evaluation_turns and progress_ui are about the agent's messages and the chat's
    # UI, not the loop: its own; `models` is the agent's ladder (chat models), as the
    # graph's is its `generator` argument.
    assert set(parameters) == {
        "self",
        "evaluator",
        "options",
        "models",
        "keep_evaluation_turns",
        "progress_ui",
        "settings",
    }


def test_the_run_context_takes_the_context_options() -> None:
    expected = {context_key(name) for name in declared(CONTEXT)}
    assert mismatch(set(get_type_hints(RefineContext)), expected) == {}
    builder = create_refine_graph(lambda state: "x", lambda response, state: 1.0)
    assert builder.context_schema is RefineContext


def test_the_served_graph_takes_the_context_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_refine.server import build_graph

    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    graph = build_graph(environ={"REFINE_MODEL": "my-model"})
    schema = graph.get_context_jsonschema()
    assert schema is not None
    expected = {context_key(name) for name in declared(CONTEXT)}
    assert mismatch(set(schema["properties"]), expected) == {}


# The flags of `run` and `batch` that are not loop options: where models are served and
# how the command runs, saves and shows its work.
CLI_ONLY_FLAGS = {
    "--base-url": "where the models are served",
    "--cache": "the model cache file",
    "--timeout": "one model call's time limit",
    "--json": "how run prints its result",
    "--show-reasoning": "what run shows",
    "--checkpoint": "run's durable checkpoint file",
    "--thread": "run's checkpoint thread",
    "--restart": "start run's checkpoint thread over",
    "--out": "batch's output file",
    "--concurrency": "how many loops batch runs at once",
    "--server": "batch on a LangGraph Server",
    "--assistant": "the server's assistant",
    "--store": "batch's strategy record file; run's record of reviews",
    "--calibration": "the judge's calibration file (it wraps the checks)",
    "--no-store": "batch without a strategy record",
}


def command_flags(name: str) -> dict[str, Any]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return {opt: param for param in command.params for opt in param.opts if opt.startswith("--")}


@pytest.mark.parametrize("command", [RUN, BATCH])
def test_the_cli_flags_are_the_declared_ones(command: str) -> None:
    flags = set(command_flags(command)) - set(CLI_ONLY_FLAGS)
    expected = {flag for name in declared(command) for flag in declaration(name).flags}
    assert mismatch(flags, expected) == {}


# The options the command line reads with code of its own (files, budgets, windows,
# models); every other option's flag and line key are derived from its declaration.
READ_BY_HAND = {
    "judge_model",
    "budget",
    "memory",
    "human_review",
    "output_schema",
    "edits",
    "checks",
    "max_tokens",
    "models",
}


@pytest.mark.parametrize("command", [RUN, BATCH])
def test_every_plain_option_gets_its_flag_from_the_declaration(command: str) -> None:
    derived = {flag.name for flag in loop_flags(command)}
    assert set(declared(command)) - derived <= READ_BY_HAND
    # A plain option's flag says what its declaration says: help, choices, default.
    flags = command_flags(command)
    for flag in loop_flags(command):
        if flag.name in READ_BY_HAND:  # the command writes this flag itself
            continue
        assert flag.flag in flags and declaration(flag.name).help, flag.name
        assert declaration(flag.name).help in flags[flag.flag].help
    assert "One of: chain, explore, sample. Default: explore." in flags["--strategy"].help


def test_a_field_type_says_how_its_value_is_read() -> None:
    from typing import Literal

    assert kind_of(float) == ("number", (), False)
    assert kind_of(int | None) == ("whole", (), True)
    assert kind_of(bool) == ("flag", (), False)
    assert kind_of(Literal["a", "b"]) == ("choice", ("a", "b"), False)
    assert kind_of(tuple[str, ...]) == ("texts", (), False)
    assert kind_of(Budget | None) is None and kind_of(int | str) is None
    patience = next(flag for flag in loop_flags(LINE) if flag.name == "patience")
    assert patience.read(None, option="'patience'") is None  # a line's null disables
    with pytest.raises(CliError, match="'patience' must be a whole number, got true"):
        patience.read(True, option="'patience'")


@pytest.mark.parametrize("command", [RUN, BATCH])
def test_the_cli_defaults_are_the_declared_ones(command: str) -> None:
    # The flags' defaults, parsed as the command parses them, give the declared defaults.
    flags = command_flags(command)

    def default(flag: str) -> Any:
        return flags[flag].default

    loop = {flag.name: default(flag.flag) for flag in loop_flags(command)}
    assert set(loop.values()) <= {None, False}  # not given: the library's default applies
    options = SharedFlags(
        loop=loop, memory=default("--memory"), edits=default("--edits"), schema=default("--schema")
    ).options()
    kwargs = options.graph_kwargs(lambda: None)  # type: ignore[arg-type,return-value]
    for key in ("evaluator", "judge_model", "retry_policy"):  # not defaults: the CLI's own
        kwargs.pop(key, None)
    assert LoopOptions.build(**kwargs) == DEFAULTS
    assert CommandOptions() == replace(options, specs=[])


def test_batch_on_a_server_sends_the_context_options_the_cli_has() -> None:
    given = CommandOptions(
        specs=parse_specs(["contains:a"]),
        settings={
            "target_score": 0.5,
            "max_iterations": 2,
            "patience": None,
            "min_delta": 0.1,
            "strategy": "chain",
            "budget": Budget(max_calls=3),
            "output_schema": {"type": "object"},
            "select": "pairwise",
            "confirm_pass": True,
            "require_calibration": True,
            "criteria": ("Rhymes",),
            "on_evaluator_error": "skip",
            "edits": True,
            "models": ("a", "b"),
        },
    )
    item = BatchItem(line=1, id="x", task="t", options=given)
    sent = run_context(item, {"judge_model": "j", "max_tokens": 64})
    expected = {context_key(name) for name in set(declared(CONTEXT)) & set(declared(BATCH))}
    assert mismatch(set(sent), expected) == {}


def test_batch_lines_on_a_server_refuse_exactly_the_options_a_run_cannot_change() -> None:
    # A batch line's keys, as the declaration names them (`line_key`), for the options a
    # line takes (`LINE`: what `batch` takes, less what is set once for the whole batch).
    assert tuple(line_key(name) for name in declared(LINE)) == PER_LINE_OPTIONS
    assert set(declared(LINE)) == set(declared(BATCH)) - {"judge_model", "max_tokens"}
    fields_of = {line_key(name): name for name in declared(LINE)}
    in_context = {key for key, name in fields_of.items() if name in declared(CONTEXT)}
    assert set(GRAPH_ONLY_KEYS) == set(PER_LINE_OPTIONS) - in_context
    assert set(RUN_CONTEXT_KEYS) == in_context  # select and confirm_pass included


def test_every_key_a_line_may_set_is_read_from_the_line() -> None:
    # One valid value per key: each changes the line's options (none is silently ignored).
    values = {
        "evaluator": "words:1-5",
        "target_score": 0.5,
        "max_iterations": 2,
        "patience": 1,
        "min_delta": 0.1,
        "budget": {"max_calls": 4},
        "on_budget_exhausted": "raise",
        "criteria": ["Short"],
        "on_evaluator_error": "skip",
        "memory": "all",
        "strategy": "sample",
        "schema": {"type": "object"},
        "select": "pairwise",
        "confirm_pass": True,
        "require_calibration": True,
        "edits": "on",
        "model": "other",
    }
    assert set(values) == set(PER_LINE_OPTIONS)
    plain = CommandOptions()
    for key, value in values.items():
        assert plain.override({key: value}) != plain, key


# -- options=: built once, handed to each, keywords override ---------------------------------


def always(score: float) -> Any:
    return lambda response, state: score


def generations(options: LoopOptions, **settings: Any) -> int:
    """How many attempts the compiled graph writes with these options."""
    calls: list[str] = []

    def generate(state: Any) -> str:
        calls.append("x")
        return "x"

    graph = create_refine_graph(generate, always(0.5), options=options, **settings).compile()
    graph.invoke({"task": "t"})
    return len(calls)


def test_one_options_object_serves_the_graph_refine_and_the_middleware() -> None:
    options = LoopOptions(max_iterations=1, target_score=1.0, patience=None)
    assert generations(options) == 2
    assert refine(lambda state: "x", "t", always(0.5), options=options).iterations == 1
    loop = CompiledLoop(lambda state: "x", always(0.5), options=options)
    assert asyncio.run(loop.arun("t")).iterations == 1
    middleware = RefineMiddleware(always(0.5), options=options)
    assert middleware.stop_rules == options.rules


def test_keywords_override_the_options_object() -> None:
    options = LoopOptions(max_iterations=1, target_score=1.0, patience=None)
    assert generations(options, max_iterations=3) == 4
    result = refine(lambda state: "x", "t", always(0.5), options=options, max_iterations=2)
    assert result.iterations == 2
    result = asyncio.run(
        arefine(lambda state: "x", "t", always(0.5), options=options, target_score=0.5)
    )
    assert (result.iterations, result.stop_reason) == (0, "target_reached")
    middleware = RefineMiddleware(always(0.5), options=options, max_iterations=5)
    assert middleware.stop_rules.max_iterations == 5
    assert middleware.stop_rules.target_score == 1.0
    assert options.max_iterations == 1  # the object itself is unchanged


def test_the_middleware_runs_an_agent_with_the_options_object() -> None:
    model = AgentModel(replies=["first", "second", "third"])
    middleware = RefineMiddleware(
        lambda response, state: Evaluation(score=0.5, feedback="more"),
        options=LoopOptions(max_iterations=1, patience=None, strategy="chain"),
    )
    agent = create_agent(model, tools=[], middleware=[middleware])
    out = agent.invoke({"messages": [HumanMessage("Say something.")]})
    result = middleware.result(out)
    assert (len(result.attempts), result.stop_reason) == (2, "max_iterations")


def test_the_middleware_keeps_chaining_by_default_and_takes_the_objects_strategy() -> None:
    assert RefineMiddleware(always(1.0)).loop.options.strategy == "chain"
    given = RefineMiddleware(always(1.0), options=LoopOptions(strategy="sample"))
    assert given.loop.options.strategy == "sample"


def test_the_middleware_refuses_an_option_an_agent_does_not_take() -> None:
    with pytest.raises(ValueError, match=r"RefineMiddleware does not take candidates \(an agent"):
        RefineMiddleware(always(1.0), candidates=2)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"does not take prompt_form .*leave it at its default"):
        RefineMiddleware(always(1.0), options=LoopOptions(prompt_form="messages"))


def test_the_graph_refuses_a_run_only_option_and_a_wrong_options_object() -> None:
    with pytest.raises(ValueError, match=r"create_refine_graph .* does not take models"):
        create_refine_graph(lambda state: "x", always(1.0), models=["a"])  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="does not take max_tokens"):
        create_refine_graph(lambda state: "x", always(1.0), options=LoopOptions(max_tokens=5))
    with pytest.raises(ValueError, match="options must be a LoopOptions, got dict"):
        refine(lambda state: "x", "t", always(1.0), options={"max_iterations": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['max_rounds'\]"):
        create_refine_graph(lambda state: "x", always(1.0), max_rounds=2)  # type: ignore[call-arg]


def test_the_options_object_is_validated_when_built() -> None:
    with pytest.raises(ValueError, match=r"target_score must be in \[0, 1\], got 2"):
        LoopOptions(target_score=2)
    with pytest.raises(ValueError, match="human_review must be one of None, 'final'"):
        LoopOptions(human_review="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="select_top must be an integer >= 2"):
        LoopOptions.build(LoopOptions(), select_top=1)


def test_a_thread_keeps_the_options_declared_kept() -> None:
    from langgraph_refine._decisions._options import kept_options
    from langgraph_refine._loop._thread import KEPT_OPTIONS

    # Those that change how attempts score, when the loop stops or what it returns.
    assert set(KEPT_OPTIONS) == set(kept_options()) == {
        "judge_model", "target_score", "max_iterations", "patience", "min_delta", "budget",
        "on_budget_exhausted", "criteria", "on_evaluator_error", "output_schema", "select",
        "select_top", "select_margin", "confirm_pass", "require_calibration",
    }  # fmt: skip


def test_a_command_with_the_shared_flags_gets_every_plain_option_by_name() -> None:
    # Any command decorated with `with_shared_flags` takes each plain option's flag and
    # hands the values to the command by option name: nothing lists them.
    from typer.testing import CliRunner

    from langgraph_refine.cli._shared import with_shared_flags

    seen: dict[str, Any] = {}
    probe = typer.Typer()

    @probe.command()
    @with_shared_flags(RUN)
    def show(task: str, flags: SharedFlags | None = None) -> None:
        assert flags is not None
        seen.update(task=task, loop=dict(flags.loop), memory=flags.memory)

    args = ["t", "--patience", "0", "--criterion", "a", "--criterion", "b", "--confirm-pass"]
    result = CliRunner().invoke(probe, [*args, "--memory", "all", "--strategy", "Chain"])
    assert result.exit_code == 0, result.output
    assert seen["task"] == "t" and seen["memory"] == "all"
    # All but those the shared flags read themselves (--model, --max-tokens); the probe has
    # no --review switch of its own, so it takes human_review's declared choice flag.
    assert set(seen["loop"]) == {flag.name for flag in loop_flags(RUN)} - {"models", "max_tokens"}
    given = {
        name: value
        for name, value in seen["loop"].items()
        if value is not None and value is not False  # 0 is given (patience 0 disables)
    }
    assert given == {
        "patience": 0,
        "criteria": ["a", "b"],
        "confirm_pass": True,
        "strategy": "Chain",
    }
    options = SharedFlags(loop=seen["loop"]).options()
    assert dict(options.settings) == {
        "patience": 0,
        "criteria": ("a", "b"),
        "confirm_pass": True,
        "strategy": "chain",
    }
    assert LoopOptions(**options.settings).patience is None  # 0 disables, as everywhere
