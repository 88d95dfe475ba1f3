"""Shared by the examples: which model to talk to, and how to show a result.

Every example runs against any OpenAI-compatible endpoint: set `OPENAI_BASE_URL`,
`OPENAI_API_KEY` and `REFINE_MODEL` (e.g. `gpt-4o-mini`), or start the local model with
`python -m tools.local_model run -- python examples/<name>.py`.

Sampling is fixed (a seed, modest `max_tokens`) so that a run sends the same requests
every time it sees the same replies: that is what lets the tests replay recorded traffic.
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel

from langgraph_refine import RefineResult

SEED = 7
MAX_TOKENS = 256
LOCAL_MODEL = "smollm2"


def openai_model(
    *,
    base_url: str | None,
    model: str,
    api_key: str,
    temperature: float = 0.7,
    max_tokens: int = MAX_TOKENS,
    seed: int = SEED,
) -> BaseChatModel:
    """A chat model over the OpenAI protocol with the examples' fixed sampling settings.

    Client-side retries are off: the loop's own retry policy handles transient errors.
    """
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=base_url,
        api_key=api_key,
        model=model,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        max_retries=0,
    )


def default_model(temperature: float = 0.7) -> BaseChatModel:
    """The chat model named by the environment, over the OpenAI protocol."""
    local_url = os.environ.get("LANGGRAPH_REFINE_LOCAL_BASE_URL")
    base_url = os.environ.get("OPENAI_BASE_URL") or local_url
    if not base_url and not os.environ.get("OPENAI_API_KEY"):
        raise SystemExit(
            "No model configured: set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, "
            "REFINE_MODEL), or run: python -m tools.local_model run -- "
            "python examples/<example>.py"
        )
    fallback = LOCAL_MODEL if local_url and base_url == local_url else "gpt-4o-mini"
    return openai_model(
        base_url=base_url,
        model=os.environ.get("REFINE_MODEL", fallback),
        api_key=os.environ.get("OPENAI_API_KEY", "local"),
        temperature=temperature,
    )


def show(result: RefineResult) -> None:
    """Print the loop's outcome: how it stopped, the score of every round, the best answer."""
    scores = ", ".join(f"{score:.2f}" for score in result.score_history)
    print(f"stopped: {result.stop_reason} after {result.iterations} refinement round(s)")
    print(f"scores: {scores}")
    score = "-" if result.score is None else f"{result.score:.2f}"
    print(f"best (score {score}, verdict {result.verdict or '-'}):\n")
    print(result.value)
