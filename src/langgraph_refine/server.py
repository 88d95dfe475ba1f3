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
the options' declaration, so an MCP host sees each with its type and meaning, in the
words of `_tool`); another key is refused by name, and a value sent as text is read as
its key's JSON type (`ServedGraph`). Output
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
only the error's type name, so the error of a run either started is named by its message
(see `ExplainError`). On `refine_reviewed`, a run whose input is a review's answer (an
A2A client's data part) resumes the review.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, cast, get_type_hints

from langgraph.channels import EphemeralValue
from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.errors import NodeError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from pydantic import BaseModel, ConfigDict, create_model
from typing_extensions import TypedDict

from langgraph_refine._calls._models import MAX_TOKENS_ENV, max_tokens_setting, resolve_chat_model
from langgraph_refine._calls._retry import describe_status, is_transient, status_code
from langgraph_refine._decisions._options import (
    GRAPH,
    HumanReview,
    LoopOptions,
)
from langgraph_refine._errors import ProviderError, RefineError
from langgraph_refine._loop._ends import INPUT_OPTION_KEYS
from langgraph_refine._loop._graph import LoopSchemas, loop_builder
from langgraph_refine._loop._review import has_checkpointer
from langgraph_refine._state import (
    RefineInput,
    RefineOutput,
    RefineState,
    ServedKeys,
    StopReason,
    Usage,
    Verdict,
)
from langgraph_refine._tool import from_text, input_schema, option_names, unknown_arguments

SERVED_INPUT_KEYS: frozenset[str] = frozenset(get_type_hints(RefineInput)) | INPUT_OPTION_KEYS
"""The keys a served graph's input takes: the request's, and every run-context option."""

__all__ = [
    "MAX_TOKENS_ENV",
    "MODEL_ENV",
    "ExplainError",
    "ServedGraph",
    "ServedInput",
    "ServedOutput",
    "as_served",
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
        ValueError: If the file is missing, not a calibration, or made for another judge
            (other checks, another model, criteria or prompt).
    """
    path = env.get(CALIBRATION_ENV, "").strip()
    if not path:
        return None
    from langgraph_refine.evaluators import llm_judge
    from langgraph_refine.evaluators._calibrate import CalibratedEvaluator, read_calibration

    try:
        identity, report = read_calibration(path)
        return CalibratedEvaluator(llm_judge(model), report, identity=identity)
    except ValueError as exc:  # a mismatch too: the served judge is not the calibrated one
        raise ValueError(
            f"{CALIBRATION_ENV}: {exc}. The served graphs judge with the LLM judge on "
            f"{MODEL_ENV}: calibrate it with langgraph-refine calibrate LABELS -e judge "
            "--model MODEL --out FILE"
        ) from None


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
    return as_served(builder.compile(name=name))


def as_served(graph: CompiledStateGraph[Any, Any, Any, Any]) -> ServedGraph:
    """`graph` as a `ServedGraph` (the same graph, refusing unknown input keys)."""
    graph.__class__ = ServedGraph  # adds behaviour only: no state of its own
    return cast(ServedGraph, graph)


@dataclass(frozen=True)
class ExplainError:
    """Fail a served run with an error whose message reaches the client.

    A provider's error (an HTTP status, a connection failure or timeout) becomes a
    `ProviderError` that says so. LangGraph Server's MCP and A2A endpoints answer a
    failed run with its error's type name alone (the message stays in the server's log),
    so a run they started (an MCP call has no thread; an A2A task's run says it is one)
    fails with an error whose type name is its message (`readable_error`): a refused
    option, a `max_tokens` above the cap, a provider's failure. A graph that pauses for a
    person, called without a thread, says to call `refine` instead. Any other run (an
    SDK client's, on a thread) gets the error as it was: the SDK shows its type and
    message.

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
            ValueError: Named by its message, for a run started by MCP or A2A.
            BaseException: The node's own error, otherwise.
        """
        exc = error.error
        provider = status_code(exc) is not None or is_transient(exc)
        if provider and isinstance(exc, Exception) and not isinstance(exc, RefineError):
            status = describe_status(exc)
            text = " ".join(str(exc).split()) or "no message"
            exc = ProviderError(
                f"the model provider failed in node {error.node!r}"
                + (f" ({status})" if status else "")
                + f": {type(exc).__name__}: {text}"
            ).with_traceback(exc.__traceback__)
            exc.__cause__ = error.error
        if not isinstance(exc, Exception) or not names_by_message(get_config()):
            raise exc
        # A run is prepared by its first step: `generate`, or `prepare` on a thread
        # holding an unfinished run (`_ends.route_start`).
        starting = error.node in ("prepare", "generate")
        if self.needs_person and starting and not has_checkpointer():
            raise readable_error(self._call_refine()) from exc
        raise readable_error(describe(exc)) from exc

    def _call_refine(self) -> str:
        return (
            f"{self.name} pauses for a person to approve, edit or reject the answer, and a "
            "call without a thread (an MCP tool call) cannot pause: call the `refine` tool "
            f"instead, or start {self.name} on a thread with the LangGraph SDK and resume it "
            "with the reviewer's answer"
        )


explain_error = ExplainError()
"""The error handler of a served graph without human review (see `ExplainError`)."""


def describe(exc: BaseException) -> str:
    """An error's message on one line; a refusal's (`ValueError`) alone, else with its type.

    A library error whose message already reads (`ProviderError`, `BudgetExhaustedError`,
    ...) keeps its own words; the type name is added when the message is empty.
    """
    text = " ".join(str(exc).split())
    if isinstance(exc, ValueError | RefineError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def names_by_message(config: Mapping[str, Any]) -> bool:
    """Whether a failed run's error reaches its client by its type name alone.

    So it is for a run LangGraph Server's MCP endpoint starts (a call without a thread:
    no checkpointer) and for an A2A task's run (its metadata holds `a2a`).
    """
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    return "a2a" in metadata or configurable.get(CONFIG_KEY_CHECKPOINTER) is None


def readable_error(message: str) -> ValueError:
    """A `ValueError` whose type name is `message`, so an MCP or A2A client can read it.

    LangGraph Server (langgraph-api 0.16) answers an MCP `tools/call` (and an A2A task)
    that failed with the error's type name only; the message stays in the server log.
    """
    kind: type[ValueError] = type(
        message, (ValueError,), {"__module__": __name__, "__qualname__": message}
    )
    return kind(message)


class ServedGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """A served graph: the compiled loop, refusing an input key it does not take.

    LangGraph keeps the input keys its input schema declares and drops the others, so a
    misspelt option (`max_iteration`) would run with the default unnoticed. The run is
    refused before it starts, naming the key and the keys there are. A value a host sent
    as text is read as the JSON value its key takes (`_tool.from_text`).
    """

    def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """`CompiledStateGraph.stream` on the checked input (`invoke` runs through it)."""
        return super().stream(self._checked(input, config), config, **kwargs)

    def astream(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """`CompiledStateGraph.astream` on the checked input (the server runs through it)."""
        return super().astream(self._checked(input, config), config, **kwargs)

    def _checked(self, input: Any, config: Any) -> Any:
        """The input to run: a review's answer resumes the review; unknown keys are refused.

        An A2A client answers a task waiting for a review with a data part; LangGraph
        Server starts a run with its data as the input (`{"action": "approve"}`), unless
        it is under `resume`. In a graph with a review, such an input is the answer.
        """
        if not isinstance(input, Mapping):
            return input
        keys = set(input)
        if "review" in self.nodes and keys <= REVIEW_ANSWER_KEYS and keys & {"action", "decisions"}:
            return Command(resume=dict(input))
        refused = unknown_arguments(input, SERVED_INPUT_KEYS)
        if refused is None:
            return from_text(input, _input_schema())
        merged = {**(self.config or {}), **(config or {})}
        if self.checkpointer is not None:
            merged = {**merged, "configurable": {CONFIG_KEY_CHECKPOINTER: self.checkpointer}}
        raise readable_error(refused) if names_by_message(merged) else ValueError(refused)


@functools.cache
def _input_schema() -> dict[str, Any]:
    return ServedInput.model_json_schema()


REVIEW_ANSWER_KEYS = frozenset({"action", "response", "feedback", "decisions"})
"""The keys of a review's answer (the loop's own, or LangChain's decisions)."""


# -- the served graphs' schemas: what an MCP host (or any client) sends and receives ------


def _tool_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Write the tool's input schema (`_tool.input_schema`) in place of pydantic's."""
    schema.clear()
    schema.update(input_schema(option_names(), messages=True))


_ANY_VALUE: dict[str, Any] = {key: (Any, None) for key in sorted(SERVED_INPUT_KEYS)}

ServedInput: type[BaseModel] = create_model(
    "ServedInput",
    __config__=ConfigDict(json_schema_extra=_tool_schema),
    __doc__="A served graph's input: the request, and the options a run may set (each "
    "optional, checked as in a run's context).",
    **_ANY_VALUE,
)
"""The served graphs' input: `task` (or `messages`), `criteria`, and every option a run's
context may set (`RefineContext`), derived from the options' declaration. Each takes any
value (the run checks it as in a run's context); its JSON schema is the tool's
(`_tool.input_schema`), in a host's words."""


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
    keys.update(get_type_hints(ServedKeys, include_extras=True))
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
