"""`make demo` (tools/demo.py) on a scripted OpenAI-compatible server: what it sends and prints.

The loop on the real local model is replayed in tests/test_examples.py (`test_demo_loop`).
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_refine._calls._models import DEFAULT_MAX_TOKENS, MAX_TOKENS_ENV
from tests.test_cli_helpers import MODEL_ENV, openai_server
from tools import demo

__all__ = ["openai_server"]  # a fixture, used by name


def reply_limits(server: Any) -> list[int | None]:
    """The reply limit of every request (langchain-openai sends it as max_completion_tokens)."""
    return [r.get("max_completion_tokens", r.get("max_tokens")) for r in server.requests]


@pytest.fixture
def configured(openai_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A scripted server named by the environment, as a user with OPENAI_API_KEY has it."""
    for name in (*MODEL_ENV, MAX_TOKENS_ENV):
        monkeypatch.delenv(name, raising=False)
    server = openai_server(lambda body: GOOD)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("REFINE_MODEL", "demo-m")
    return server


GOOD = (
    "The Turing test, proposed by Alan Turing in 1950, asks whether a machine can imitate "
    "a human in conversation well enough to fool an interrogator. A judge chats by text "
    "with two hidden partners, one a person and one a program, and must decide which is "
    "which. If the judge cannot reliably tell them apart, the program passes. One "
    "criticism, John Searle's Chinese room argument, holds that passing proves only "
    "skilful symbol shuffling: a system could answer fluently without understanding a "
    "single word, so the test measures imitation rather than thought."
)


def test_demo_runs_on_the_configured_model_with_a_reply_limit(
    configured: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.main(["--max-iterations", "1"]) == 0
    out = capsys.readouterr().out
    assert "Model: demo-m (from OPENAI_API_KEY)" in out
    assert "#0 (fresh sample): score 1.00" in out
    assert "Stopped: target_reached" in out
    assert "Attempts (which refined which):" in out
    assert [r["model"] for r in configured.requests] == ["demo-m"]
    assert reply_limits(configured) == [DEFAULT_MAX_TOKENS]


def test_demo_reply_limit_from_option_and_environment(
    configured: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_TOKENS_ENV, "123")
    assert demo.main(["--max-iterations", "0"]) == 0
    assert demo.main(["--max-iterations", "0", "--max-tokens", "77"]) == 0
    assert reply_limits(configured) == [123, 77]


def test_demo_refuses_a_bad_reply_limit_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        demo.main(["--max-tokens", "0"])
    assert exit_info.value.code == 2  # argparse's usage error
    assert "--max-tokens" in capsys.readouterr().err


def test_the_demo_evaluator_scores_looping_text_low_and_a_real_paragraph_high() -> None:
    looping = "The original answer was 80-200 words but edited to 20-1 sentences, " + (
        "edited to 20-1 sentences, " * 30
    )
    evaluator = demo.demo_evaluator()
    degenerate = evaluator(looping, {"task": demo.TASK, "attempts": []})
    good = evaluator(GOOD, {"task": demo.TASK, "attempts": []})
    assert good.score == 1.0
    assert degenerate.score < 0.5  # a word count alone gave it 1.00
    assert "appears" in degenerate.feedback  # says what repeats


def test_the_attempt_tree_shows_which_attempt_refined_which() -> None:
    from langgraph_refine import Attempt, Evaluation

    attempts = [
        Attempt(index=0, response="a", evaluation=Evaluation(score=0.5)),
        Attempt(index=1, response="b", parent=0, evaluation=Evaluation(score=0.4)),
        Attempt(index=2, response="c", evaluation=Evaluation(score=0.6)),
        Attempt(index=3, response="d", parent=2, evaluation=Evaluation(score=0.9)),
        Attempt(index=4, response="e", parent=0),
    ]
    assert demo.attempt_tree(attempts) == [
        "#0 score 0.50",
        "├─ #1 score 0.40",
        "└─ #4 not evaluated",
        "#2 score 0.60",
        "└─ #3 score 0.90",
    ]
