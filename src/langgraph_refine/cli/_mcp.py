"""The `mcp` verb: the refine loop as an MCP tool, on the official `mcp` SDK.

One tool, `refine`. Its arguments are the task and the run options a host model can use
(`_tool`: the same words and types as the served graphs); the others, and the models, are
the command's own flags (`--model`, `--judge-model`, `-e`, `--select`, ... as for `run`).
Every argument is checked against the type its schema declares before any model call, a
`null` included, and refused in a host's words (JSON values, the schema's names).

A call runs the loop on its async path in the task serving the request, so a host's
`notifications/cancelled` cancels it at once, the model request in flight with it. With
a progress token, the host hears the phase the loop is in (as `run`'s spinner says it:
generating, judging, choosing) as each starts, each round's score, and, while one model
request lasts, the phase again every `BEAT` seconds: a host that resets its timeout on
progress waits out any refinement. The result is structured content
(`_tool.OUTPUT_SCHEMA`) and the same JSON as text; a refused call, a failed run or a run
the judge could not judge is an error result (`isError`) whose text says what was wrong.

Without a model (no `--model`, no `REFINE_MODEL`), the server still starts and lists its
tool: a call answers with how to set one. Over streamable HTTP, every request's `Host`
and `Origin` must be the bound address's own (`HostCheck`).

Needs the `mcp` extra: `pip install 'langgraph-refine[mcp]'`.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StreamMode

from langgraph_refine._decisions._options import (
    CONTEXT,
    GRAPH,
    LoopOptions,
    context_key,
    declaration,
    declared,
)
from langgraph_refine._errors import RefineError
from langgraph_refine._loop._graph import loop_builder
from langgraph_refine._tool import (
    DESCRIPTION,
    OUTPUT_SCHEMA,
    from_text,
    input_schema,
    json_text,
    option_names,
    schema_error,
    unknown_arguments,
)
from langgraph_refine._version import __version__
from langgraph_refine.cli._errors import CliError, describe_error, one_line
from langgraph_refine.cli._mcp_http import HostCheck, quiet_when_clients_leave
from langgraph_refine.cli._models import MODEL_ENV, ModelSettings
from langgraph_refine.cli._options import CommandOptions
from langgraph_refine.cli._view import phase_text

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.lowlevel import Server

TOOL = "refine"
"""The tool's name."""

Transport = Literal["stdio", "streamable-http"]
"""How the server talks to its host: a child process's stdin/stdout, or HTTP."""

SERVER_SETS: Mapping[str, str] = {
    name: next(iter(declaration(name).flags), "")
    for name in declared(CONTEXT)
    if not declaration(name).offered
}
"""Options a run's context takes that a call does not (`Declared.offered`): the server's
flag that sets each, as the options declare it (empty: left at its default). The rest are
the tool's arguments: what a host model can use, so the listing stays short."""

BEAT = 5.0
"""Seconds at most between two progress notifications while a call runs."""

FIRST = 1.0
"""Seconds at most from a call's start to its first progress notification."""

STOP_WAIT = 1.0
"""Seconds a cancelled call waits for its loop to end (its model request closed)."""

CREEP = 30.0
"""Seconds in which progress within one step goes half way to the step's end."""


def transport_named(value: str) -> Transport:
    """`--transport`'s value (`streamable_http` is taken for `streamable-http`).

    Raises:
        CliError: A usage error naming the value and the transports.
    """
    text = value.strip().lower().replace("_", "-")
    if text not in get_args(Transport):
        raise CliError(
            f"--transport must be one of {', '.join(get_args(Transport))}; got {value!r}",
            exit_code=2,
        )
    return cast(Transport, text)


Notify = Callable[[float, float, str], Awaitable[None]]
"""Sends one progress notification: (progress, total, message)."""


@dataclass
class Reporter:
    """A call's progress, as the host hears it: the phase, each round's score, a beat.

    `progress` counts the loop's steps done (each round writes, then judges; the last step
    chooses the result), plus a part of the step under way that grows with its time, so
    it rises with every notification, as MCP requires; `total` is the most steps the call
    can take.

    Args:
        notify: Sends a notification.
        total: The most steps: two per round the call may run, and the choice.
    """

    notify: Notify
    total: float
    steps: int = 0
    rounds: int = 0
    phase: str = "starting"
    since: float = field(default_factory=time.monotonic)
    sent: float = -1.0
    sent_at: float = field(default_factory=time.monotonic)

    async def report(self, message: str) -> None:
        """Send `message` with the progress made so far."""
        now = time.monotonic()
        into = now - self.since
        progress = max(self.steps + into / (into + CREEP), math.nextafter(self.sent, math.inf))
        self.sent, self.sent_at = progress, now
        await self.notify(progress, self.total, message)

    async def take(self, mode: str, chunk: Any) -> None:
        """Report what a chunk of the loop's stream says: a step started or ended, a round."""
        if not isinstance(chunk, Mapping):
            return
        if mode == "tasks" and "input" in chunk:  # a step starts
            phase = phase_text(str(chunk.get("name")), self.rounds)
            if phase is not None:
                self.phase = phase
                await self.report(phase)
        elif mode == "tasks" and chunk.get("name") in ("generate", "evaluate", "finalize"):
            self.steps, self.since = self.steps + 1, time.monotonic()
        elif mode == "custom" and chunk.get("type") == "round":
            self.rounds = int(chunk["iteration"]) + 1
            await self.report(round_message(chunk))

    async def beat(self) -> None:
        """Say the phase whenever `BEAT` seconds passed without a notification (`FIRST` first)."""
        import anyio

        while True:
            wait = BEAT if self.sent >= 0 else FIRST
            await anyio.sleep(max(0.0, self.sent_at + wait - time.monotonic()))
            if time.monotonic() - self.sent_at >= wait * 0.99:
                await self.report(f"{self.phase} ({time.monotonic() - self.since:.0f} s)")


def round_message(event: Mapping[str, Any]) -> str:
    """A judged round's progress message: its score and the best so far."""
    score, best = event.get("score"), event.get("best_score")
    if score is None:
        why = one_line(str(event.get("error") or "no reason given"), 200)
        shown = f"not judged ({why})"
    else:
        shown = f"score {score:.2f}"
    return f"round {event['iteration']}: {shown}" + ("" if best is None else f" (best {best:.2f})")


@dataclass(frozen=True)
class RefineTool:
    """The `refine` tool: the loop built once from the command's flags, run per call.

    Attributes:
        graph: The compiled loop (served input and output schemas, no checkpointer);
            None when the server has no usable model.
        options: The options a call may set (field names).
        settings: The models' settings (a failed run's error names their endpoint).
        defaults: The loop's options from the command's flags (a call's default).
        unavailable: Why a call cannot run (no model), said to the host on each call.
    """

    graph: CompiledStateGraph[Any, Any, Any, Any] | None
    options: tuple[str, ...]
    settings: ModelSettings
    defaults: LoopOptions = field(default_factory=LoopOptions)
    unavailable: str | None = None

    @property
    def arguments(self) -> frozenset[str]:
        """The argument names a call may give."""
        return frozenset({"task", *(context_key(name) for name in self.options)})

    def schema(self) -> dict[str, Any]:
        """The tool's input schema: the server's defaults; `max_tokens` at most its cap."""
        schema = input_schema(self.options, defaults=self.defaults)
        if "max_tokens" in schema["properties"]:
            schema["properties"]["max_tokens"]["maximum"] = self.settings.max_tokens
        return schema

    def check(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The call's arguments, each read and checked against the schema.

        A value sent as text is first read as the JSON value its argument takes
        (`_tool.from_text`): the Inspector's command line sends every value as text.

        Raises:
            ValueError: Naming an unknown argument, a missing or empty task, or a value
                of the wrong type (or `null`), in a host's words.
        """
        refused = unknown_arguments(arguments, self.arguments)
        if refused:
            raise ValueError(refused)
        schema = self.schema()
        given = from_text(arguments, schema)
        task = given.get("task")
        if "task" not in given:
            raise ValueError("task is missing: give the request to answer, as text")
        if not isinstance(task, str) or not task.strip():  # it has no default
            raise ValueError(f"task must be the request to answer, as text; got {json_text(task)}")
        for name, value in given.items():
            error = schema_error(name, value, schema["properties"][name])
            if error is not None:
                raise ValueError(error)
        return given

    def total(self, given: Mapping[str, Any]) -> float:
        """The most steps a call with the checked arguments `given` takes (see `Reporter`)."""
        rounds = int(given.get("max_iterations", self.defaults.max_iterations)) + 1
        return float(2 * rounds + 1)

    async def call(self, given: Mapping[str, Any], reporter: Reporter | None) -> dict[str, Any]:
        """Run the loop on checked arguments; its structured result.

        Args:
            given: The call's arguments, from `check`.
            reporter: Told of the loop's steps and rounds (None: the host wants none).

        Raises:
            ValueError: For an option the loop refuses (named).
            Exception: Whatever failed the run.
        """
        if self.graph is None:
            raise ValueError(self.unavailable)
        output: dict[str, Any] = {}
        scores: list[float | None] = []
        modes: list[StreamMode] = ["custom", "values"]
        if reporter is not None:  # a step's start and end: the phase it tells the host
            modes.append("tasks")
        async for mode, chunk in self.graph.astream(given, stream_mode=modes):
            if mode == "values" and isinstance(chunk, dict):
                output = chunk
                continue
            if mode == "custom" and isinstance(chunk, dict) and chunk.get("type") == "round":
                scores.append(chunk["score"])
            if reporter is not None:
                await reporter.take(mode, chunk)
        usage = output.get("usage")
        return {
            "response": output.get("response", ""),
            "score": output.get("score"),
            "verdict": output.get("verdict"),
            "stop_reason": output.get("stop_reason"),
            "usage": usage.model_dump(mode="json") if usage is not None else {},
            "scores": scores,
        }


NO_MODEL = (
    "this server has no model: add --model NAME to its args in the host's configuration (a "
    "'provider:model' string such as openai:gpt-4o-mini, or a model name served over the "
    f"OpenAI protocol, with --base-url URL), or set {MODEL_ENV} in its env; then restart it"
)
"""What a call is told when the server was started without a model."""


def unavailable(settings: ModelSettings) -> str | None:
    """Why the server's models cannot answer a call, in a host's configuration's words."""
    if not settings.model:
        return NO_MODEL
    try:
        settings.generator()
        if settings.judge_model:
            settings.judge()
    except CliError as exc:
        return (
            f"this server cannot build its model: {exc}; fix its args or env in the host's "
            "configuration and restart it"
        )
    return None


def build_tool(options: CommandOptions, settings: ModelSettings) -> RefineTool:
    """The tool on the command's models, check and options.

    A model that cannot be built (none given, a missing key or package) does not stop
    the server: the tool is listed, and each call says how to set one.

    Raises:
        CliError: For options the loop refuses, or a check that cannot be built.
    """
    offered = option_names(SERVER_SETS)
    why = unavailable(settings)
    if why is not None:
        return RefineTool(None, offered, settings, unavailable=why)
    kwargs = options.graph_kwargs(settings.judge)
    evaluator = kwargs.pop("evaluator")
    try:
        loop = LoopOptions.build(surface=GRAPH, name=TOOL, **kwargs)
        # The served graphs' schemas: the options in the input, the score in the output.
        from langgraph_refine.server import SERVED_SCHEMAS

        builder = loop_builder(settings.generator(), evaluator, loop, schemas=SERVED_SCHEMAS)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None
    return RefineTool(builder.compile(name=TOOL), offered, settings, loop)


def listing(tool: RefineTool) -> types.Tool:
    """The tool as `tools/list` shows it: name, description, input and output schema."""
    from mcp import types

    return types.Tool(
        name=TOOL,
        title="Refine an answer",
        description=DESCRIPTION,
        inputSchema=tool.schema(),
        outputSchema=OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=True),
    )


def build_server(tool: RefineTool) -> Server:
    """An MCP server (the SDK's low-level `Server`) offering `tool`."""
    from mcp.server.lowlevel import Server

    server: Server = Server("langgraph-refine", version=__version__)

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return [listing(tool)]

    # The arguments are checked by the tool (`RefineTool.check`), in a host's words.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name != TOOL:
            return _error(f"unknown tool {name!r}: this server has one tool, {TOOL!r}")
        if tool.unavailable is not None:
            return _error(tool.unavailable)
        try:
            given = tool.check(arguments)
        except ValueError as exc:
            return _error(" ".join(str(exc).split()))
        context = server.request_context
        token = context.meta.progressToken if context.meta is not None else None
        reporter = None
        if token is not None:

            async def notify(progress: float, total: float, message: str) -> None:
                await context.session.send_progress_notification(
                    token, progress, total, message, related_request_id=str(context.request_id)
                )

            reporter = Reporter(notify, tool.total(given))
        try:
            result = await _run(tool.call(given, reporter), reporter)
        except ValueError as exc:
            return _error(" ".join(str(exc).split()))
        except Exception as exc:
            return _error(failure_text(exc, tool.settings))
        return _result(result)

    return server


def failure_text(exc: Exception, settings: ModelSettings) -> str:
    """A failed run's message for the host: `run`'s, less a library error's class name.

    Example:
        >>> from langgraph_refine._errors import Unjudged
        >>> failure_text(Unjudged("the judge could not judge the answer"), ModelSettings(None))
        'the judge could not judge the answer'
    """
    text = describe_error(exc, settings.describe_endpoint(), settings.timeout)
    if isinstance(exc, RefineError):  # its message reads on its own
        return text.removeprefix(f"{type(exc).__name__}: ")
    return text


async def _run(call: Coroutine[Any, Any, dict[str, Any]], reporter: Reporter | None) -> Any:
    """Run `call` in a task of its own, the reporter's beat beside it; cancel it when cancelled.

    The SDK cancels a request (the host's `notifications/cancelled`, or the client gone)
    through an anyio cancel scope, which reaches the task serving the request but left
    the loop's model call running with its request open; the loop's own task, cancelled
    the asyncio way, closes it at once. Its end is awaited (`STOP_WAIT` seconds at most).
    """
    import anyio

    task = asyncio.ensure_future(call)
    try:
        if reporter is None:
            return await asyncio.shield(task)
        async with anyio.create_task_group() as group:
            group.start_soon(reporter.beat)
            try:
                return await asyncio.shield(task)
            finally:
                group.cancel_scope.cancel()
    finally:
        if not task.done():
            task.cancel()
            with anyio.move_on_after(STOP_WAIT, shield=True):
                await asyncio.wait([task])


UNJUDGED = (
    "the judge could not judge two answers in a row, so the refinement stopped; the last "
    "answer is unjudged (its result is below): check the judge model (--judge-model) or "
    "the check (-e) the server runs"
)
"""What a host is told of a call that ended `unjudged`."""


def _result(result: dict[str, Any]) -> types.CallToolResult:
    """A finished call's result: structured, and the same JSON as text.

    A run the judge could not judge is an error result too: its answer is unverified.
    """
    from mcp import types

    text = json.dumps(result, ensure_ascii=False)
    unjudged = result["stop_reason"] == "unjudged"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{UNJUDGED}\n{text}" if unjudged else text)],
        structuredContent=result,
        isError=unjudged,
    )


def _error(message: str) -> types.CallToolResult:
    from mcp import types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


async def serve(
    server: Server,
    transport: Transport,
    *,
    host: str,
    port: int,
    origins: Sequence[str] = (),
) -> None:
    """Serve `server` over `transport` until the host closes it (or Ctrl-C).

    Args:
        server: The MCP server.
        transport: stdio, or streamable HTTP at `http://host:port/mcp`.
        host: The address to bind (HTTP).
        port: The port to bind (HTTP).
        origins: Origins allowed besides the bound address's own (`--allow-origin`).
    """
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(app=server)

    @dataclass(frozen=True)
    class Endpoint:  # an ASGI app: Starlette hands it the request as it came
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await manager.handle_request(scope, receive, send)

    quiet_when_clients_leave()
    app = Starlette(routes=[Route("/mcp", endpoint=Endpoint())], lifespan=lambda _: manager.run())
    checked = HostCheck(app, host=host, port=port, origins=origins)
    config = uvicorn.Config(checked, host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()


def warn(message: str) -> None:
    """A line on stderr, which a host keeps in its server log (stdout is the protocol's)."""
    print(f"langgraph-refine mcp: {message}", file=sys.stderr, flush=True)
