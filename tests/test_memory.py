"""Memory policies: which earlier attempts the refinement prompt shows; the default is bounded."""

from __future__ import annotations

import pytest

from langgraph_refine import Attempt, Evaluation, GeneratorNode
from langgraph_refine._decisions._memory import select_attempts, validate_memory


def attempts(*score_values: float) -> list[Attempt]:
    return [
        Attempt(
            index=i,
            response=f"answer-{i} " + "x" * 600,
            evaluation=Evaluation(score=s, feedback=f"feedback-{i} " + "y" * 150),
        )
        for i, s in enumerate(score_values)
    ]


def prompt(memory: object, history: list[Attempt]) -> str:
    # Memory chooses among the attempts of the chain (strategy="chain": every attempt).
    node = GeneratorNode(lambda s: "", memory=memory, strategy="chain")  # type: ignore[arg-type]
    return str(node.prompt({"task": "THE TASK", "attempts": history})[-1].content)


def test_first_prompt_is_the_task() -> None:
    assert prompt("best_and_last", []) == "THE TASK"


def test_best_and_last_shows_best_and_latest_with_feedback() -> None:
    text = prompt("best_and_last", attempts(0.2, 0.9, 0.3, 0.4))
    assert "THE TASK" in text
    assert "answer-1" in text and "feedback-1" in text  # best
    assert "answer-3" in text and "feedback-3" in text  # latest
    assert "answer-0" not in text and "answer-2" not in text


def test_best_and_last_when_latest_is_best_shows_the_previous_one_too() -> None:
    text = prompt("best_and_last", attempts(0.1, 0.2, 0.9))
    assert text.count("<answer>") == 2
    assert "answer-1" in text and "answer-2" in text and "answer-0" not in text
    assert "also the best" in text


def test_last_shows_only_latest() -> None:
    text = prompt("last", attempts(0.9, 0.2, 0.3))
    assert "answer-2" in text and "feedback-2" in text
    assert "answer-0" not in text and "answer-1" not in text


def test_all_shows_every_attempt_and_feedback() -> None:
    text = prompt("all", attempts(0.1, 0.2, 0.3, 0.4))
    for i in range(4):
        assert f"answer-{i}" in text and f"feedback-{i}" in text


def test_int_window_shows_last_n() -> None:
    text = prompt(2, attempts(0.9, 0.2, 0.3, 0.4))
    assert "answer-2" in text and "answer-3" in text
    assert "answer-0" not in text and "answer-1" not in text


def test_default_memory_is_bounded() -> None:
    for round_2_scores in [(0.1, 0.2), (0.2, 0.1)]:
        round_2 = len(prompt("best_and_last", attempts(*round_2_scores)))
        round_10 = len(prompt("best_and_last", attempts(*[0.1 * (i % 3) for i in range(10)])))
        assert round_10 <= 1.2 * round_2  # two attempts, whatever the round


def test_reviewer_feedback_is_in_the_prompt() -> None:
    node = GeneratorNode(lambda s: "", strategy="chain")
    text = str(
        node.prompt(
            {"task": "T", "attempts": attempts(0.5), "reviewer_feedback": "use bullet points"}
        )[-1].content
    )
    assert "use bullet points" in text


@pytest.mark.parametrize("bad", ["everything", 0, -1, 1.5, None, True])
def test_invalid_memory_is_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="memory must be one of"):
        validate_memory(bad)


def test_select_attempts_labels() -> None:
    chosen = select_attempts(attempts(0.9, 0.1), "best_and_last")
    assert [label for label, _ in chosen] == ["best attempt so far", "latest attempt"]
