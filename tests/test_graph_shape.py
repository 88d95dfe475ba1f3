"""Snapshots of the graph's shape per option combination, so topology changes are reviewed."""

from __future__ import annotations

from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from langgraph_refine import create_refine_graph
from tests.fakes import scores


@pytest.mark.parametrize("human_review", [None, "final", "every_round"])
def test_graph_shape(human_review: Any, snapshot: SnapshotAssertion) -> None:
    graph = create_refine_graph(lambda s: "x", scores(1.0), human_review=human_review).compile()
    assert graph.get_graph().draw_mermaid() == snapshot


def test_only_a_served_state_carries_the_served_keys() -> None:
    # Each channel costs LangGraph work at every step: the library's own state has only
    # what its nodes need; the served graphs add the result's score and verdict and the
    # options their input gave.
    from langgraph_refine import create_refine_graph
    from langgraph_refine._decisions._options import LoopOptions
    from langgraph_refine._loop._graph import loop_builder
    from langgraph_refine.server import SERVED_SCHEMAS

    own = create_refine_graph(lambda state: "x", lambda r, s: 1.0).compile()
    assert not {"score", "verdict", "input_options"} & set(own.channels)
    built = LoopOptions.build(None)
    served = loop_builder(lambda state: "x", lambda r, s: 1.0, built, schemas=SERVED_SCHEMAS)
    graph = served.compile()
    assert {"score", "verdict", "input_options"} <= set(graph.channels)
    assert graph.invoke({"task": "t"})["score"] == 1.0
    final = own.invoke({"task": "t"})
    assert final["response"] == "x" and "score" not in final
