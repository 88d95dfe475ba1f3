"""The exported nodes work in a topology of the user's own, with an extended state."""

from __future__ import annotations

from examples.custom_topology import build_graph

from tests.fakes import ScriptedChatModel


def test_custom_graph_runs_the_loop_with_extra_state() -> None:
    short = "A lighthouse."
    good = " ".join(["word"] * 50)
    model = ScriptedChatModel(replies=[short, good])
    state = (
        build_graph(model)
        .compile()
        .invoke({"task": "Describe a lighthouse. Be brief.", "attempts": []})
    )
    assert state["title"] == "Describe a lighthouse"
    assert state["published"].startswith("# Describe a lighthouse\n\n" + good)
    assert [a.index for a in state["attempts"]] == [0, 1]
    assert state["stop_reason"] == "target_reached"
    # memory="last": the second prompt shows the first answer and its word-count feedback
    assert short in model.prompts[1]
