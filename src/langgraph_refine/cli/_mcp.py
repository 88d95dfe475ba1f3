"""The `mcp` verb: the refine loop as an MCP tool, on the official `mcp` SDK.

One tool, `refine`. Its arguments are the task and the options a run's context takes
(`_tool`: the same words and types as the served graphs), less the models, which the
command's own flags choose (`--model`, `--judge-model`, `-e`, ... as for `run`). A call
runs the loop on the async path, so a cancelled call (MCP's `notifications/cancelled`)
cancels it between two model calls, or during one; a progress notification after each
evaluated round (`progress` = rounds done, `message` = its score) lets a host that resets
its timeout on progress wait out a long refinement. The result is structured content
(`_tool.OUTPUT_SCHEMA`) and the same JSON as text; a refused call or a failed run is an
error result (`isError`) whose text says what was wrong.

Needs the `mcp` extra: `pip install 'langgraph-refine[mcp]'`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from langgraph.graph.state import CompiledStateGraph

from langgraph_refine._decisions._options import GRAPH, LoopOptions, context_key
from langgraph_refine._loop._graph import loop_builder
from langgraph_refine._tool import (
    DESCRIPTION,
    OUTPUT_SCHEMA,
    from_text,
    input_schema,
    option_names,
    unknown_arguments,
)
from langgraph_refine._version import __version__
from langgraph_refine.cli._errors import CliError, describe_error
from langgraph_refine.cli._models import ModelSettings
from langgraph_refine.cli._options import CommandOptions

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.lowlevel import Server

TOOL = "refine"
"""The tool's name."""

Transport = Literal["stdio", "streamable-http"]
"""How the server talks to its host: a child process's stdin/stdout, or HTTP."""

SET_BY_FLAGS: Mapping[str, str] = {
    "models": "--model",
    "judge_model": "--judge-model",
}
"""Options a run's context takes that the server's flags set instead: the models."""


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


Progress = Callable[[float, str], Awaitable[None]]
"""Reports a round: (rounds done, what it scored)."""


@dataclass(frozen=True)
class RefineTool:
    """The `refine` tool: the loop built once from the command's flags, run per call.

    Attributes:
        graph: The compiled loop (served input and output schemas, no checkpointer).
        options: The options a call may set (field names).
        settings: The models' settings (a failed run's error names their endpoint).
    """

    graph: CompiledStateGraph[Any, Any, Any, Any]
    options: tuple[str, ...]
    settings: ModelSettings

    @property
    def arguments(self) -> frozenset[str]:
        """The argument names a call may give."""
        return frozenset({"task", *(context_key(name) for name in self.options)})

    def schema(self) -> dict[str, Any]:
        """The tool's input schema."""
        return input_schema(self.options)

    async def call(self, arguments: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        """Run the loop for one call; its structured result.

        Args:
            arguments: The call's arguments (`task` and options).
            progress: Called after each evaluated round.

        Raises:
            ValueError: For an unknown argument, or one the loop refuses (named).
            Exception: Whatever failed the run.
        """
        refused = unknown_arguments(arguments, self.arguments)
        if refused:
            raise ValueError(refused)
        given = from_text(arguments, self.schema())
        output: dict[str, Any] = {}
        scores: list[float | None] = []
        stream = self.graph.astream(given, stream_mode=["custom", "values"])
        async for mode, chunk in stream:
            if mode == "values" and isinstance(chunk, dict):
                output = chunk
            elif isinstance(chunk, dict) and chunk.get("type") == "round":
                scores.append(chunk["score"])
                await progress(len(scores), _round_message(chunk))
        usage = output.get("usage")
        return {
            "response": output.get("response", ""),
            "score": output.get("score"),
            "verdict": output.get("verdict"),
            "stop_reason": output.get("stop_reason"),
            "usage": usage.model_dump(mode="json") if usage is not None else {},
            "scores": scores,
        }


def _round_message(event: Mapping[str, Any]) -> str:
    """A round's progress message: its score and the best so far."""
    score, best = event.get("score"), event.get("best_score")
    shown = "unjudged" if score is None else f"score {score:.2f}"
    return f"round {event['iteration']}: {shown}" + ("" if best is None else f" (best {best:.2f})")


def build_tool(options: CommandOptions, settings: ModelSettings) -> RefineTool:
    """The tool on the command's models, check and options.

    Raises:
        CliError: For a model that cannot be built or options the loop refuses.
    """
    kwargs = options.graph_kwargs(settings.judge)
    evaluator = kwargs.pop("evaluator")
    try:
        loop = LoopOptions.build(surface=GRAPH, name=TOOL, **kwargs)
        # The served graphs' schemas: the options in the input, the score in the output.
        from langgraph_refine.server import SERVED_SCHEMAS

        builder = loop_builder(settings.generator(), evaluator, loop, schemas=SERVED_SCHEMAS)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None
    return RefineTool(builder.compile(name=TOOL), option_names(SET_BY_FLAGS), settings)


def build_server(tool: RefineTool) -> Server:
    """An MCP server (the SDK's low-level `Server`) offering `tool`."""
    from mcp import types
    from mcp.server.lowlevel import Server

    server: Server = Server("langgraph-refine", version=__version__)

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(
                name=TOOL,
                title="Refine an answer",
                description=DESCRIPTION,
                inputSchema=tool.schema(),
                outputSchema=OUTPUT_SCHEMA,
                annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=True),
            )
        ]

    # The arguments are checked by the tool (naming an unknown one and the allowed ones)
    # and by the loop's own option checks, whose messages name the value.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name != TOOL:
            return _error(f"unknown tool {name!r}: this server has one tool, {TOOL!r}")
        context = server.request_context
        token = context.meta.progressToken if context.meta is not None else None

        async def progress(done: float, message: str) -> None:
            if token is not None:
                await context.session.send_progress_notification(
                    token, done, message=message, related_request_id=str(context.request_id)
                )

        try:
            result = await tool.call(arguments, progress)
        except ValueError as exc:
            return _error(" ".join(str(exc).split()))
        except Exception as exc:
            settings = tool.settings
            return _error(describe_error(exc, settings.describe_endpoint(), settings.timeout))
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structuredContent=result,
        )

    return server


def _error(message: str) -> types.CallToolResult:
    from mcp import types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


async def serve(server: Server, transport: Transport, *, host: str, port: int) -> None:
    """Serve `server` over `transport` until the host closes it (or Ctrl-C)."""
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

    app = Starlette(routes=[Route("/mcp", endpoint=Endpoint())], lifespan=lambda _: manager.run())
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()
