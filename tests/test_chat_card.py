"""What a chat user reads on the loop's progress card (`progress_card`, pure).

The card must describe the answer the chat shows (after a reviewer's edit, the edit
and its score, not the best generated answer), count rounds as the answers the model
wrote, and head itself with something true: `"Refined"` only when an answer passed.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest

from langgraph_refine import Attempt, Evaluation
from langgraph_refine._decisions._card import ANSWER_STOPS, STOP_WORDS, progress_card
from langgraph_refine._state import MoveKind, StopReason


def attempt(index: int, score: float | None, move: MoveKind = "refine", **more: Any) -> Attempt:
    evaluation = Evaluation(score=score) if score is not None else None
    return Attempt(
        index=index, response=f"answer {index}", evaluation=evaluation, move=move, **more
    )


GENERATED = [attempt(0, 0.4, "sample"), attempt(1, 0.95)]
EDITED = [*GENERATED, attempt(2, 0.4, "edit", parent=1)]


def test_after_an_edit_the_card_describes_the_edit_the_chat_shows() -> None:
    card = progress_card(EDITED, "edited", done=True, answer=2)
    assert card["summary"] == (
        "done after 2 rounds: the reviewer's edit, score 0.4, edited by the reviewer"
    )
    assert (card["score"], card["best_score"]) == (0.4, 0.95)
    assert card["lines"] == [
        "round 1: score 0.4, refining",
        "round 2: score 0.95, taking the reviewer's edit",
        "the reviewer's edit: score 0.4, edited by the reviewer",
    ]
    assert card["title"] == "Edited by the reviewer"


def test_an_edit_that_ended_the_loop_is_the_answer_unless_another_is_named() -> None:
    assert progress_card(EDITED, "edited", done=True)["score"] == 0.4
    assert progress_card(EDITED, "edited", done=True, answer=1)["score"] == 0.95


def test_the_edit_being_judged_is_named_as_the_reviewers() -> None:
    card = progress_card(GENERATED, None, "edit", judging=True)
    assert card["summary"] == "the reviewer's edit: judging…"
    assert card["judging"] == 3


def test_an_approved_revision_is_the_answer_described_not_the_best() -> None:
    revision = attempt(2, 0.7, "revise")
    card = progress_card([*GENERATED, revision], "approved", done=True, answer=2)
    assert card["summary"] == "done after 3 rounds: round 3, score 0.7, approved"
    assert card["title"] == "Approved"


def test_without_an_answer_named_the_best_is_described() -> None:
    card = progress_card(GENERATED, "passed", done=True)
    assert card["summary"] == "done after 2 rounds: best score 0.95 (round 2), passed"
    assert (card["title"], card["score"]) == ("Passed", 0.95)


@pytest.mark.parametrize(
    ("stop", "title"),
    [
        ("passed", "Passed"),
        ("target_reached", "Target score reached"),
        ("max_iterations", "Best of 2 answers: no rounds left"),
        ("plateau", "Best of 2 answers: no longer improving"),
        ("rejected", "Best of 2 answers: rejected by the reviewer"),
        ("budget_exhausted", "Best of 2 answers: budget spent"),
        ("model_error", "Stopped: the model call failed"),
        ("interrupted", "Best of 2 answers: interrupted"),
    ],
)
def test_the_title_says_what_the_answer_shown_is(stop: StopReason, title: str) -> None:
    assert progress_card(GENERATED, stop, done=True)["title"] == title


def test_no_title_says_refined_or_passed_unless_an_answer_was_accepted() -> None:
    for stop in get_args(StopReason):
        title = progress_card(GENERATED, stop, done=True)["title"]
        accepted = stop in ANSWER_STOPS
        assert title.lower().startswith(STOP_WORDS[stop].lower()) == (
            accepted or STOP_WORDS[stop].startswith("stopped")
        ), (stop, title)
        assert "refined" not in title.lower()


def test_nothing_judged_says_it_stopped() -> None:
    card = progress_card([attempt(0, None, "sample")], "budget_exhausted", done=True)
    assert card["title"] == "Stopped: budget spent"
    assert card["summary"] == "done after 1 round: no answer was judged, budget spent"


def test_while_running_or_reviewing_the_title_says_so() -> None:
    assert progress_card(GENERATED[:1], None, "refine")["title"] == "Refining the answer…"
    reviewing = progress_card(GENERATED, "passed", reviewing=True)
    assert reviewing["title"] == "Awaiting your review"


def reviewed_agent() -> tuple[Any, Any]:
    """An agent whose answers score 0.6, 0.4, then 0.3, paused for a final review."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_refine import RefineMiddleware
    from tests.fakes import AgentModel

    scores = {"a": 0.6, "b": 0.4}

    def judged(response: str, state: Any) -> Evaluation:
        return Evaluation(score=scores.get(response, 0.3), feedback="more")

    refine = RefineMiddleware(
        judged, human_review="final", max_iterations=1, patience=None, progress_ui="card"
    )
    agent = create_agent(
        AgentModel(replies=["a", "b", "c"]),
        tools=[],
        middleware=[refine],
        checkpointer=InMemorySaver(),
    )
    return agent, {"configurable": {"thread_id": "t"}}


def test_an_approved_revision_is_what_the_agents_card_describes() -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command

    agent, config = reviewed_agent()
    agent.invoke({"messages": [HumanMessage("Write a tagline.")]}, config)
    agent.invoke(Command(resume={"action": "revise", "feedback": "Shorter."}), config)
    agent.invoke(Command(resume={"action": "approve"}), config)
    values = agent.get_state(config).values
    assert values["messages"][-1].text == "c"
    (card,) = values["ui"]
    assert card["props"]["summary"] == "done after 3 rounds: round 3, score 0.3, approved"
    assert card["props"]["score"] == 0.3
