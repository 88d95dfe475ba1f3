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

Input: `{"task": "..."}` (or `{"messages": [...]}` ending with a human message); output:
`{"response": "..."}`. The server brings its own persistence, so the graphs are compiled
without a checkpointer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from langgraph_refine._graph import create_refine_graph
from langgraph_refine._models import MAX_TOKENS_ENV, max_tokens_setting, resolve_chat_model
from langgraph_refine._options import HumanReview

__all__ = ["MAX_TOKENS_ENV", "MODEL_ENV", "build_graph", "refine", "refine_reviewed"]

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
    return builder.compile(name=name)


def refine() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The `refine` graph: the loop without human review (a graph factory for the server)."""
    return build_graph(name="refine")


def refine_reviewed() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The `refine_reviewed` graph: the loop with `human_review="final"` (a graph factory)."""
    return build_graph(human_review="final", name="refine_reviewed")
