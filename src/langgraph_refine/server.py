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

Input: `{"task": "..."}` (or `{"messages": [...]}` ending with a human message); output:
`{"response": "..."}`. A run's context may set the loop's options and its check
(`RefineContext`: `evaluator` in the CLI's spec language, `judge_model`, `max_tokens`
up to `REFINE_MAX_TOKENS`, and `models`: a list of model strings, cheapest first, that
makes the run's generator a ladder of models in place of `REFINE_MODEL`; the judge stays
on `REFINE_MODEL` unless `judge_model` names another). The server brings its own
persistence, so the graphs are compiled without a checkpointer.

Errors keep their message on the way to the client: the server hides the message of
errors that are not built-in types, so the library's own errors are `RuntimeError`s, a
bad option is a `ValueError`, and a provider's error that outlived the retries is raised
again as a `ProviderError` ("the model provider failed: ...").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, cast

from langgraph.errors import NodeError
from langgraph.graph.state import CompiledStateGraph

from langgraph_refine._calls._models import MAX_TOKENS_ENV, max_tokens_setting, resolve_chat_model
from langgraph_refine._calls._retry import describe_status, is_transient, status_code
from langgraph_refine._decisions._options import HumanReview
from langgraph_refine._errors import ProviderError, RefineError
from langgraph_refine._loop._graph import create_refine_graph

__all__ = [
    "MAX_TOKENS_ENV",
    "MODEL_ENV",
    "build_graph",
    "explain_error",
    "refine",
    "refine_reviewed",
]

MODEL_ENV = "REFINE_MODEL"
"""The environment variable naming the served model."""


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
    builder = create_refine_graph(model, human_review=human_review, name=name)
    # Runs after a node failed for good (its retries spent): see `explain_error`.
    # (LangGraph's `StateNode` type does not list the `(state, NodeError)` form yet.)
    builder.set_node_defaults(error_handler=cast("Any", explain_error))
    return builder.compile(name=name)


def explain_error(state: Any, error: NodeError) -> None:
    """Fail the run with an error whose message the server passes on to the client.

    A provider's error (an HTTP status, a connection failure or timeout) becomes a
    `ProviderError` that says so; any other error is raised again as it was (the
    library's errors and bad options already reach the client with their message).

    Raises:
        ProviderError: For a provider's error.
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
    raise exc


def refine() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The `refine` graph: the loop without human review (a graph factory for the server)."""
    return build_graph(name="refine")


def refine_reviewed() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The `refine_reviewed` graph: the loop with `human_review="final"` (a graph factory)."""
    return build_graph(human_review="final", name="refine_reviewed")
