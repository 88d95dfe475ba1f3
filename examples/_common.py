"""Shared by the examples: which model to talk to.

Every example runs against any OpenAI-compatible endpoint: set `OPENAI_BASE_URL`,
`OPENAI_API_KEY` and `REFINE_MODEL` (e.g. `gpt-4o-mini`), or start the local model with
`python -m langgraph_refine.local_model run -- python examples/<name>.py`.
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel


def default_model(temperature: float = 0.7) -> BaseChatModel:
    """The chat model named by the environment, over the OpenAI protocol."""
    from langchain_openai import ChatOpenAI

    base_url = os.environ.get("OPENAI_BASE_URL") or os.environ.get("LANGGRAPH_REFINE_LOCAL_BASE_URL")
    if not base_url and not os.environ.get("OPENAI_API_KEY"):
        raise SystemExit(
            "No model configured: set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, "
            "REFINE_MODEL), or run: python -m langgraph_refine.local_model run -- "
            "python examples/<example>.py"
        )
    return ChatOpenAI(
        base_url=base_url,
        api_key=os.environ.get("OPENAI_API_KEY", "local"),  # type: ignore[arg-type]
        model=os.environ.get("REFINE_MODEL", "gpt-4o-mini"),
        temperature=temperature,
        max_tokens=400,
        max_retries=0,
        seed=7,
    )
