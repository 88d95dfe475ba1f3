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
