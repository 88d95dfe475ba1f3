"""A ladder of models around the loop: stream events, and the served graphs' run context."""

from __future__ import annotations

from typing import Any

from langgraph_refine import create_refine_graph
from tests.test_ladder import Named, good


def test_round_events_name_the_model_and_rung_of_each_attempt() -> None:
    cheap, strong = Named(name_="cheap", replies=["weak"]), Named(name_="strong", replies=["good"])
    graph = create_refine_graph([cheap, strong], good, strategy="chain").compile()
    events = [
        e
        for e in graph.stream({"task": "t"}, stream_mode="custom")
        if isinstance(e, dict) and e.get("type") == "round"
    ]
    assert [(e["model"], e["rung"]) for e in events] == [
        ("test:cheap", 0),
        ("test:cheap", 0),
        ("test:strong", 1),
    ]


def test_without_a_ladder_round_events_name_the_model_and_no_rung() -> None:
    graph = create_refine_graph(Named(name_="only", replies=["good"]), good).compile()
    events: list[Any] = list(graph.stream({"task": "t"}, stream_mode="custom"))
    rounds = [e for e in events if e.get("type") == "round"]
    assert [(e["model"], e["rung"]) for e in rounds] == [("test:only", None)]
