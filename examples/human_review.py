"""A refine loop that waits for a human before it finishes.

The loop runs with `human_review="final"` on a SQLite checkpointer: when it would stop,
it pauses with `interrupt()`; the program shows the reviewer the best answer and resumes
with the decision (`approve`, `edit`, `reject` or `revise`). Because the pause is
persisted, the decision could come from another process, hours later: run the resume
step with the same database and thread id.

Run: `python examples/human_review.py` (asks on the console when it is a terminal, and
otherwise asks for one revision, then approves).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph_refine import RefineResult, create_refine_graph
from langgraph_refine.evaluators import word_count

Reviewer = Callable[[dict[str, Any]], dict[str, Any]]


def console_reviewer(payload: dict[str, Any]) -> dict[str, Any]:
    """Ask on the terminal: a(pprove), e(dit), r(eject) or v (revise with feedback)."""
    if payload.get("error"):
        print(f"! {payload['error']}")
    print(f"\nBest answer (score {payload['score']}, {payload['stop_reason']}):\n")
    print(payload["response"])
    choice = input("\n[a]pprove, [e]dit, [r]eject, re[v]ise? ").strip().lower()[:1]
    if choice == "e":
        return {"action": "edit", "response": input("Your text: ")}
    if choice == "v":
        return {"action": "revise", "feedback": input("What should change? ")}
    return {"action": {"a": "approve", "r": "reject"}.get(choice, choice)}


def scripted_reviewer() -> Reviewer:
    """Ask for one revision, then approve."""
    answers: Iterator[dict[str, Any]] = iter(
        [{"action": "revise", "feedback": "Make it calmer and mention the sea."}]
    )

    def review(payload: dict[str, Any]) -> dict[str, Any]:
        print(f"reviewing attempt {payload['attempt']} (score {payload['score']})")
        return next(answers, {"action": "approve"})

    return review


def run(model: BaseChatModel, database: Path, reviewer: Reviewer) -> RefineResult:
    """Start the loop, then answer every review until it finishes."""
    config: RunnableConfig = {"configurable": {"thread_id": "human-review-example"}}
    with SqliteSaver.from_conn_string(str(database)) as saver:
        graph = create_refine_graph(
            model, word_count(15, 40), human_review="final", max_iterations=2
        ).compile(checkpointer=saver)
        graph.invoke({"task": "Describe a harbour at dawn in 15 to 40 words."}, config)
        # The run is paused in the `review` node; the payload says what to review.
        while (snapshot := graph.get_state(config)).interrupts:
            decision = reviewer(snapshot.interrupts[0].value)
            graph.invoke(Command(resume=decision), config)
        return RefineResult.from_state(graph.get_state(config).values)


def main(model: BaseChatModel | None = None, reviewer: Reviewer | None = None) -> RefineResult:
    """Run the reviewed loop and print the outcome."""
    try:
        from examples._common import default_model
    except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
        from _common import default_model  # type: ignore[no-redef,import-not-found]

    if reviewer is None:
        reviewer = console_reviewer if sys.stdin.isatty() else scripted_reviewer()
    with tempfile.TemporaryDirectory() as folder:
        result = run(model or default_model(), Path(folder) / "review.sqlite", reviewer)
    print(f"\n{result.stop_reason}: {result.value}")
    return result


if __name__ == "__main__":
    main()
