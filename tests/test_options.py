"""Build-time validation: every invalid option raises ValueError naming it and its range."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_refine import create_refine_graph
from tests.fakes import scores


def build(**options: Any) -> Any:
    return create_refine_graph(lambda s: "x", scores(1.0), **options)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("target_score", 1.5, r"target_score must be in \[0, 1\], got 1.5"),
        ("target_score", -0.1, r"target_score must be in \[0, 1\]"),
        ("target_score", float("nan"), "target_score"),
        ("max_iterations", -1, "max_iterations must be an integer >= 0, got -1"),
        ("max_iterations", 2.5, "max_iterations"),
        ("patience", -1, "patience must be an integer >= 1, or 0 to disable the plateau rule;"),
        ("min_delta", -0.01, "min_delta must be a number >= 0"),
        ("memory", "everything", "memory must be one of"),
        ("memory", 0, "memory must be one of"),
        (
            "human_review",
            "sometimes",
            "human_review must be one of None, 'final', 'every_round'; got 'sometimes'",
        ),
        ("budget", {"max_calls": 3}, "budget must be a Budget"),
        ("name", "", "name must be a non-empty string"),
    ],
)
def test_invalid_option(option: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build(**{option: value})


@pytest.mark.parametrize("evaluator", [42, "judge-me", object()])
def test_non_callable_evaluator(evaluator: Any) -> None:
    with pytest.raises(ValueError, match="evaluator must be callable"):
        create_refine_graph(lambda s: "x", evaluator)


def test_empty_evaluator_list() -> None:
    with pytest.raises(ValueError, match="empty list"):
        create_refine_graph(lambda s: "x", [])


def test_default_judge_needs_a_model() -> None:
    with pytest.raises(ValueError, match="judge_model"):
        create_refine_graph(lambda s: "x")


def test_bad_generator() -> None:
    with pytest.raises(ValueError, match="generator must be"):
        create_refine_graph(42, scores(1.0))  # type: ignore[arg-type]


def test_valid_edge_values_are_accepted() -> None:
    build(target_score=0.0, max_iterations=0, patience=None, min_delta=0.0, memory=1)
    build(target_score=1.0, patience=1, memory="all", human_review="every_round")
