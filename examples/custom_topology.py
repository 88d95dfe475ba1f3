"""A custom topology built from the exported nodes.

The state extends `RefineState` with a `title` key. A `draft_title` step runs before the
loop, and the loop's answer goes through a `publish` step instead of the factory's
finalize. The generator, evaluator and router are the library's own building blocks.

Run: `python examples/custom_topology.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph

from langgraph_refine import (
    EvaluatorNode,
    GeneratorNode,
    RefineState,
    best_attempt,
    route_after_evaluation,
)
from langgraph_refine.evaluators import word_count


class ArticleState(RefineState, total=False):
    """The loop's keys plus this application's own."""

    title: str
    published: str


def draft_title(state: ArticleState) -> dict[str, Any]:
    return {"title": state["task"].split(".")[0][:60]}


def publish(state: ArticleState) -> dict[str, Any]:
    best = best_attempt(state["attempts"])
    assert best is not None
    return {"response": best.response, "published": f"# {state['title']}\n\n{best.response}"}


def build_graph(model: BaseChatModel) -> StateGraph[Any, Any, Any, Any]:
    """Wire the building blocks into a graph of our own."""
    builder = StateGraph(ArticleState)
    builder.add_node("draft_title", draft_title)
    builder.add_node("write", GeneratorNode[ArticleState](model, memory="last"))
    builder.add_node(
        "check",
        EvaluatorNode[ArticleState](word_count(40, 90), target_score=1.0, max_iterations=3),
    )
    builder.add_node("publish", publish)
    builder.add_edge(START, "draft_title")
    builder.add_edge("draft_title", "write")
    builder.add_edge("write", "check")
    builder.add_conditional_edges(
        "check", route_after_evaluation, {"refine": "write", "stop": "publish"}
    )
    builder.add_edge("publish", END)
    return builder


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Run the custom graph once and print the published article."""
    try:
        from examples._common import default_model
    except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
        from _common import default_model  # type: ignore[no-redef,import-not-found]

    graph = build_graph(model or default_model()).compile()
    state = graph.invoke(
        {"task": "Describe a lighthouse in fog in 40 to 90 words.", "attempts": []}
    )
    print(state["published"])
    print(f"\nstop reason: {state['stop_reason']}, attempts: {len(state['attempts'])}")
    return dict(state)


if __name__ == "__main__":
    main()
