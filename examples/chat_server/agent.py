"""A chat agent whose answers the refine loop improves, served to chat clients.

Serve it with LangGraph Server and talk to it from any chat client that speaks the
LangGraph API (LangChain's agent-chat-ui, LangGraph Studio, the SDK):

    REFINE_MODEL=openai:gpt-4o-mini langgraph dev --config examples/chat_server/langgraph.json

The graph ids are `chat_agent` (the best answer reaches the chat once),
`chat_agent_drafts` (every draft streams, tagged with its attempt) and
`chat_agent_reviewed` (a person approves, edits, rejects or asks for a revision first;
agent-chat-ui's "Mark as Resolved" ends with the best answer, as a rejection does).
`REFINE_MODEL` is a `"provider:model"` string or a model name served over the OpenAI protocol
(`OPENAI_BASE_URL` / `OPENAI_API_KEY` point at any OpenAI-compatible server); the same
model answers and judges (the middleware's evaluator is None: the agent's own model).

What a chat gets: the judge's replies are the loop's own model calls and never reach the
`messages` stream (the SDK's `messages-tuple`); the loop's rounds reach the `custom`
stream (one `{"type": "round", ...}` per evaluated answer, a `{"type": "stop", ...}` at
the end); the thread's state ends as the request, any tool calls, and the best answer.
Run from the repository root (the configuration's paths are relative to it). A chat
client drives it as `tests/test_chat_server.py` does:
`client.runs.stream(thread_id, "chat_agent", input={"messages": [...]},
stream_mode=["messages-tuple", "custom", "values"])`.

The progress a chat renders: `progress_ui="refine_progress"` shows the rounds as one
generative-UI card ("round 1: score 0.4, refining", "round 2: judging…" while the judge
works, "round 2: score 0.95, passed"), updated in place and kept in the state key `ui`; its
title says what the answer shown is ("Passed", "Best of 2 answers: no rounds left");
agent-chat-ui shows it where the loading dots were, and under the answer at the end. Its
component is `progress.tsx`, registered for the three graphs under `"ui"` in
`langgraph.json`: `langgraph dev` bundles it with Node.js (20.16 or later, with npm: it
runs `npx @langchain/langgraph-ui`, fetched from the npm registry the first time; `make
install` fetches it); `webapp.py` (under `"http"`) makes the component's script load in
a chat served from another address. To watch it,
serve the graph as above and open agent-chat-ui (`npx create-agent-chat-app`, or
https://agentchat.vercel.app) on `http://localhost:2024` with the graph id `chat_agent`.
Its Refresh button on an answer runs the loop again, a new answer in the old one's place
(see "Regenerating an answer" in docs/agents.md).
"""

from __future__ import annotations

import os
from typing import Any

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import tool

from langgraph_refine import RefineMiddleware

MODEL_ENV = "REFINE_MODEL"
PROGRESS_UI = "refine_progress"
"""The progress card's component (`progress.tsx`, registered under `"ui"` in langgraph.json)."""
SYSTEM_PROMPT = "You are a helpful assistant. Answer in two or three sentences."
FACTS = {
    "eiffel tower": "The Eiffel Tower was completed in 1889 in Paris; it is 330 metres tall.",
}


@tool
def lookup(topic: str) -> str:
    """Look up facts about a topic."""
    key = topic.strip().lower()
    return next((facts for name, facts in FACTS.items() if name in key), "No facts found.")


def chat_model(environ: dict[str, str] | None = None) -> BaseChatModel:
    """The model named by `REFINE_MODEL`; a bare name is served over the OpenAI protocol.

    Raises:
        ValueError: If `REFINE_MODEL` is unset.
    """
    env = os.environ if environ is None else environ
    name = env.get(MODEL_ENV, "").strip()
    if not name:
        raise ValueError(
            f"{MODEL_ENV} is not set: set it to a 'provider:model' string (e.g. "
            "'openai:gpt-4o-mini') or a model name served over the OpenAI protocol"
        )
    if ":" not in name:
        name = f"openai:{name}"
    model: BaseChatModel = init_chat_model(name, max_retries=0)
    return model


def build_agent(
    model: BaseChatModel, *, stream_drafts: bool = False, human_review: Any = None
) -> Any:
    """The agent: the model, a lookup tool, and the loop judging each final answer.

    With `stream_drafts=False` (the middleware's default) the chat gets the best answer
    once, whole; with `True` every answer streams as it is written, each chunk's metadata
    naming its attempt (`refine_attempt`), so a chat can replace a draft by the next.
    """
    refine = RefineMiddleware(
        max_iterations=2,
        target_score=0.9,
        stream_drafts=stream_drafts,
        human_review=human_review,
        progress_ui=PROGRESS_UI,
    )
    return create_agent(
        model,
        tools=[lookup],
        system_prompt=SYSTEM_PROMPT,
        middleware=[refine],
        name="chat_agent",
    )


def chat_agent() -> Any:
    """The served graph (a factory: the model is read when the server loads it)."""
    return build_agent(chat_model())


def chat_agent_drafts() -> Any:
    """The served graph that streams every draft (`stream_drafts=True`)."""
    return build_agent(chat_model(), stream_drafts=True)


def chat_agent_reviewed() -> Any:
    """The served graph that asks a person before it answers (`human_review="final"`).

    The server builds a fresh agent for every run, so the review's answer (a LangChain
    decision from agent-chat-ui, or the loop's own `{"action": ...}`) is applied by
    another agent than the one that paused: the judge is that run's model.
    """
    return build_agent(chat_model(), human_review="final")
