"""The graphs `langgraph.json` serves to LangGraph Server (`langgraph dev`, `langgraph up`).

Two graphs, both reading the model from the environment when a run starts:

- `refine`: the loop with an LLM judge on the same model, no human review;
- `refine_reviewed`: the same loop with `human_review="final"`; runs pause for a
  decision, resumed with `Command(resume={"action": ...})` (`command={"resume": ...}`
  through the SDK).

Environment:

- `REFINE_MODEL`: a `"provider:model"` string (`"openai:gpt-4o-mini"`,
  `"anthropic:claude-..."`) or a model name, which is served over the OpenAI protocol
  (resolved by `resolve_chat_model`, the same rule as the library and the CLI);
- `REFINE_MAX_TOKENS`: output tokens one model call may generate (default 512), so a
  runaway generation ends;
- `OPENAI_BASE_URL` / `OPENAI_API_KEY`: the address and key of any OpenAI-compatible
  server (read by the OpenAI client itself).

- `LANGGRAPH_REFINE_ALLOW_CODE_CHECKS`: `1` lets runs ask for checks that read files or
  run code (`python-tests:FILE`, `json-schema:FILE`); refused otherwise.
- `REFINE_MODELS` / `REFINE_JUDGE_MODELS`: comma-separated model strings a run may name
  in its context's `models` / `judge_model` (`REFINE_MODEL` is always allowed); unset,
  any model the server can reach.
- `REFINE_CALIBRATION`: a calibration file (`langgraph-refine calibrate -e judge --out
  FILE`): the served judge's PASS is calibrated (a run's `require_calibration` then
  trusts it); a run that names its own `evaluator` judges uncalibrated.

Input (`ServedInput`): `{"task": "..."}` (or `{"messages": [...]}` ending with a human
message), with `criteria` and any option a run's context may set beside it (derived from
the options' declaration, so an MCP host sees each with its type and meaning). Output
(`ServedOutput`): `response`, `score`, `verdict`, `stop_reason` and `usage` (and
`messages`, `output`). The library's `RefineInput` / `RefineOutput` are unchanged: these
schemas are the served graphs' own. A run's context may set the loop's options and its
check too (`RefineContext`: `evaluator` in the CLI's spec language, `judge_model`,
`max_tokens` up to `REFINE_MAX_TOKENS`, and `models`: a list of model strings, cheapest
first, that makes the run's generator a ladder of models in place of `REFINE_MODEL`; the
judge stays on `REFINE_MODEL` unless `judge_model` names another); an option set in both
the context and the input must have one value. The server brings its own persistence, so
the graphs are compiled without a checkpointer.

Errors keep their message on the way to the client: the server hides the message of
errors that are not built-in types, so the library's own errors are `RuntimeError`s, a
bad option is a `ValueError`, and a provider's error that outlived the retries is raised
again as a `ProviderError` ("the model provider failed: ..."). An MCP or A2A call shows
only the error's type name, so a run refused without a thread is named by its message
(see `ExplainError`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, cast, get_type_hints

from langgraph.channels import EphemeralValue
from langgraph.errors import NodeError
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema, create_model
from typing_extensions import TypedDict

from langgraph_refine._calls._models import MAX_TOKENS_ENV, max_tokens_setting, resolve_chat_model
from langgraph_refine._calls._retry import describe_status, is_transient, status_code
from langgraph_refine._decisions._options import (
    CONTEXT,
    DEFAULTS,
    GRAPH,
    HumanReview,
    LoopOptions,
    RefineContext,
    context_key,
    declared,
    option_docs,
)
from langgraph_refine._errors import ProviderError, RefineError
from langgraph_refine._loop._ends import INPUT_OPTION_KEYS
from langgraph_refine._loop._graph import LoopSchemas, loop_builder
from langgraph_refine._loop._review import has_checkpointer
from langgraph_refine._state import RefineOutput, RefineState, StopReason, Usage, Verdict

__all__ = [
    "MAX_TOKENS_ENV",
    "MODEL_ENV",
    "ExplainError",
    "ServedInput",
    "ServedOutput",
    "build_graph",
    "explain_error",
    "refine",
    "refine_reviewed",
]

MODEL_ENV = "REFINE_MODEL"
"""The environment variable naming the served model."""

CALIBRATION_ENV = "REFINE_CALIBRATION"
"""The environment variable naming the served judge's calibration file."""


def served_judge(model: Any, env: Mapping[str, str]) -> Any:
    """The served graphs' judge: None (the default judge), or calibrated by `REFINE_CALIBRATION`.

    Raises:
        ValueError: If the file is missing, not a calibration, or made for other checks.
    """
    path = env.get(CALIBRATION_ENV, "").strip()
    if not path:
        return None
    from langgraph_refine.evaluators import llm_judge
    from langgraph_refine.evaluators._calibrate import CalibratedEvaluator, read_calibration

    try:
        judge, report = read_calibration(path)
    except ValueError as exc:
        raise ValueError(f"{CALIBRATION_ENV}: {exc}") from None
    if judge != "judge":
        raise ValueError(
            f"{CALIBRATION_ENV} {path} was made for the checks {judge!r}; the served graphs "
            "judge with the LLM judge: calibrate it with langgraph-refine calibrate LABELS "
            "-e judge --out FILE"
        )
    return CalibratedEvaluator(llm_judge(model), report)


def build_graph(
    *,
    human_review: HumanReview | None = None,
    name: str = "refine",
    environ: Mapping[str, str] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile a refine loop on the model named by `REFINE_MODEL`, for LangGraph Server.

    Args:
        human_review: None, `"final"` or `"every_round"` (see `create_refine_graph`).
        name: The compiled graph's name (also the loop's name in events and tags).
        environ: Where to read `REFINE_MODEL` and `REFINE_MAX_TOKENS`; `os.environ` when
            omitted.

    Returns:
        The compiled graph, without a checkpointer: the server persists its threads.

    Raises:
        ValueError: If `REFINE_MODEL` is unset or empty, or `REFINE_MAX_TOKENS` is not a
            whole number >= 1.

    Example:
        >>> import os
        >>> os.environ.setdefault("OPENAI_API_KEY", "sk-...")  # doctest: +SKIP
        >>> graph = build_graph(environ={"REFINE_MODEL": "gpt-4o-mini"})  # doctest: +SKIP
    """
    env = os.environ if environ is None else environ
    model_name = env.get(MODEL_ENV, "").strip()
    if not model_name:
        raise ValueError(
            f"{MODEL_ENV} is not set: set it to a 'provider:model' string (e.g. "
            "'openai:gpt-4o-mini') or a model name served over the OpenAI protocol, with "
            "OPENAI_BASE_URL / OPENAI_API_KEY pointing at an OpenAI-compatible server"
        )
    max_tokens = max_tokens_setting(environ=env)
    model = resolve_chat_model(model_name, option=MODEL_ENV, max_tokens=max_tokens)
    options = LoopOptions.build(surface=GRAPH, human_review=human_review, name=name)
    builder = loop_builder(model, served_judge(model, env), options, schemas=SERVED_SCHEMAS)
    # Runs after a node failed for good (its retries spent): see `ExplainError`.
    # (LangGraph's `StateNode` type does not list the `(state, NodeError)` form yet.)
    handler = ExplainError(needs_person=human_review is not None, name=name)
    builder.set_node_defaults(error_handler=cast("Any", handler))
    return builder.compile(name=name)


@dataclass(frozen=True)
class ExplainError:
    """Fail a served run with an error whose message reaches the client.

    A provider's error (an HTTP status, a connection failure or timeout) becomes a
    `ProviderError` that says so. A run refused before its first model call (a bad
    task, criteria or option) that has no thread to keep it (an MCP host's call is one)
    fails with an error whose type name is its message: LangGraph Server's MCP and A2A
    endpoints answer a failed run with the error's type name alone, so a plain
    `ValueError` would reach the host as the word "ValueError". A graph that pauses for
    a person, called that way, says to call `refine` instead. Any other error is raised
    again as it was (the library's errors and bad options reach an SDK client with
    their message).

    Args:
        needs_person: The graph pauses for a human review (`refine_reviewed`).
        name: The graph's name, for the message.
    """

    needs_person: bool = False
    name: str = "refine"

    def __call__(self, state: Any, error: NodeError) -> None:
        """Raise the error the client should see.

        Raises:
            ProviderError: For a provider's error.
            ValueError: For a run refused before its first model call, without a thread.
            BaseException: The node's own error, otherwise.
        """
        exc = error.error
        provider = status_code(exc) is not None or is_transient(exc)
        if provider and isinstance(exc, Exception) and not isinstance(exc, RefineError):
            status = describe_status(exc)
            text = " ".join(str(exc).split()) or "no message"
            raise ProviderError(
                f"the model provider failed in node {error.node!r}"
                + (f" ({status})" if status else "")
                + f": {type(exc).__name__}: {text}"
            ) from exc
        if error.node == "prepare" and isinstance(exc, ValueError) and not has_checkpointer():
            raise readable_error(self._refusal(exc)) from exc
        raise exc

    def _refusal(self, exc: ValueError) -> str:
        if not self.needs_person:
            return " ".join(str(exc).split())
        return (
            f"{self.name} pauses for a person to approve, edit or reject the answer, and a "
            "call without a thread (an MCP tool call) cannot pause: call the `refine` tool "
            f"instead, or start {self.name} on a thread with the LangGraph SDK and resume it "
            "with the reviewer's answer"
        )


explain_error = ExplainError()
"""The error handler of a served graph without human review (see `ExplainError`)."""


def readable_error(message: str) -> ValueError:
    """A `ValueError` whose type name is `message`, so an MCP or A2A client can read it.

    LangGraph Server (langgraph-api 0.16) answers an MCP `tools/call` (and an A2A task)
    that failed with the error's type name only; the message stays in the server log.
    """
    kind: type[ValueError] = type(
        message, (ValueError,), {"__module__": __name__, "__qualname__": message}
    )
    return kind(message)


# -- the served graphs' schemas: what an MCP host (or any client) sends and receives ------


def _option_property(key: str) -> Any:
    """The input field of the run-context option `key`: its JSON type, meaning, default.

    The JSON type is that of the key in `RefineContext` and the text the option's
    docstring, so a new option reaches the schema with its declaration. The field takes
    any value: `LoopOptions.for_run` checks it, as it checks a run's context.
    """
    name = {context_key(n): n for n in declared(CONTEXT)}[key]
    schema = TypeAdapter(get_type_hints(RefineContext)[key]).json_schema()
    default = getattr(DEFAULTS, name)
    # Left out, an option keeps the graph's value: the declared default, shown when plain.
    shown = default if isinstance(default, bool | int | float | str) else None
    return (
        Annotated[Any, WithJsonSchema(schema)],
        Field(
            default=None,
            description=option_docs()[name].replace("\n", " "),
            json_schema_extra={"default": shown},
        ),
    )


class _Request(BaseModel):
    """What to refine: `task` (or `messages`) and the `criteria` it must meet."""

    # Unknown keys are dropped by the server's input; hosts are told there are none.
    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})

    task: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(
        default=None,
        description="What to write or answer (the request, with any context it needs).",
    )
    messages: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(
        default=None,
        description="A conversation instead of `task`: the task is its last human message, "
        "and the answer is appended to it.",
    )
    criteria: Annotated[Any, WithJsonSchema(TypeAdapter(str | list[str]).json_schema())] = Field(
        default=None,
        description="What the answer must satisfy, one string or a list: every judge checks "
        "each (added to the judge's own criteria).",
    )


ServedInput: type[BaseModel] = create_model(
    "ServedInput",
    __base__=_Request,
    __doc__="A served graph's input: the request, and the options a run may set (each "
    "optional, checked as in a run's context).",
    **{key: _option_property(key) for key in sorted(INPUT_OPTION_KEYS)},
)
"""The served graphs' input schema: `task` (or `messages`), `criteria`, and every option a
run's context may set (`RefineContext`), derived from the options' declaration."""


class ServedOutput(RefineOutput):
    """What a served graph returns (an MCP tool's result).

    Attributes:
        response: The best answer (or the reviewer's).
        score: Its score in [0, 1] (None when it was not judged).
        verdict: Its verdict (`PASS`, `NEEDS_IMPROVEMENT`, `FAIL`), if the judge gave one.
        stop_reason: Why the loop stopped (`passed`, `max_iterations`, `budget`, ...).
        usage: Model calls, tokens, seconds and cost the run spent.
        output: With `output_schema`, the answer as a JSON object.
        messages: With `messages` in the input, the conversation with the answer appended.
    """

    score: NotRequired[float | None]
    verdict: NotRequired[Verdict | None]
    stop_reason: NotRequired[StopReason | None]
    usage: NotRequired[Usage]


def _served_state() -> type[Any]:
    """The loop's state, plus one key per option the input may set.

    Each option key keeps its value for the step after the input only (`EphemeralValue`):
    `prepare` copies the options into `input_options` for the run, so a later run on the
    same thread starts from its own input, not from an earlier run's options.
    """
    keys = get_type_hints(RefineState, include_extras=True)
    keys.update({key: Annotated[Any, EphemeralValue(Any)] for key in INPUT_OPTION_KEYS})
    state: type[Any] = TypedDict("ServedState", keys, total=False)  # type: ignore[misc]
    return state


SERVED_SCHEMAS = LoopSchemas(state=_served_state(), input=ServedInput, output=ServedOutput)
"""The schemas of the served graphs: options in the input, the result's score in the output."""


def refine() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The `refine` graph: the loop without human review (a graph factory for the server)."""
    return build_graph(name="refine")


def refine_reviewed() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The `refine_reviewed` graph: the loop with `human_review="final"` (a graph factory)."""
    return build_graph(human_review="final", name="refine_reviewed")
