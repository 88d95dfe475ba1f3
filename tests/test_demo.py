"""`make demo` (tools/demo.py) on a scripted OpenAI-compatible server: what it sends and prints.

The loop on the real local model is replayed in tests/test_examples.py (`test_demo_loop`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_cli_helpers import MODEL_ENV, openai_server
from tools import demo
from tools.local_model import DEFAULT_MAX_TOKENS

__all__ = ["openai_server"]  # a fixture, used by name


def reply_limits(server: Any) -> list[int | None]:
    """The reply limit of every request (langchain-openai sends it as max_completion_tokens)."""
    return [r.get("max_completion_tokens", r.get("max_tokens")) for r in server.requests]


@pytest.fixture
def configured(openai_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A scripted server named by the environment, as a user with OPENAI_API_KEY has it."""
    for name in (*MODEL_ENV, demo.MAX_TOKENS_ENV):
        monkeypatch.delenv(name, raising=False)
    server = openai_server(lambda body: "word " * 100)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("REFINE_MODEL", "demo-m")
    return server


def test_demo_runs_on_the_configured_model_with_a_reply_limit(
    configured: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.main(["--max-iterations", "1"]) == 0
    out = capsys.readouterr().out
    assert "Model: demo-m (from OPENAI_API_KEY)" in out
    assert "round 0: score 1.00" in out  # 100 words: inside 80-200 at once
    assert "Stopped: target_reached" in out
    assert [r["model"] for r in configured.requests] == ["demo-m"]
    assert reply_limits(configured) == [DEFAULT_MAX_TOKENS]


def test_demo_reply_limit_from_option_and_environment(
    configured: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(demo.MAX_TOKENS_ENV, "123")
    assert demo.main(["--max-iterations", "0"]) == 0
    assert demo.main(["--max-iterations", "0", "--max-tokens", "77"]) == 0
    assert reply_limits(configured) == [123, 77]


@pytest.mark.parametrize("raw", ["0", "-5", "many", "1.5"])
def test_demo_refuses_a_bad_reply_limit_in_the_environment(raw: str) -> None:
    with pytest.raises(SystemExit, match=f"REFINE_MAX_TOKENS must be .*got '{raw}'"):
        demo.default_max_tokens({demo.MAX_TOKENS_ENV: raw})


def test_demo_refuses_a_bad_reply_limit_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        demo.main(["--max-tokens", "0"])
    assert exit_info.value.code == 2  # argparse's usage error
    assert "--max-tokens must be at least 1, got 0" in capsys.readouterr().err


def test_demo_reply_limit_defaults() -> None:
    assert demo.default_max_tokens({}) == DEFAULT_MAX_TOKENS == 400
    assert demo.default_max_tokens({demo.MAX_TOKENS_ENV: " "}) == DEFAULT_MAX_TOKENS
    assert demo.default_max_tokens({demo.MAX_TOKENS_ENV: "64"}) == 64
