"""An agent with `RefineMiddleware`, served by `langgraph dev`, driven as a chat client drives it.

The served graph is `examples/chat_server` (its own `langgraph.json`); its model is a
scripted OpenAI-compatible server on loopback that answers `Answer N.` (N counts the
agent's answers in the conversation) and judges `Answer 1.` 0.4 and any later answer a
PASS. The client streams a run with the LangGraph SDK as agent-chat-ui does
(`stream_mode=["messages-tuple", "custom", "values"]`) and the tests check what a chat
would render from it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from tests.test_server import scripted_openai

pytestmark = [pytest.mark.server, pytest.mark.slow]

TASK = "Tell me about the Eiffel Tower."
FEEDBACK = "Say where it is."
LOOP_PROMPT = "Your answer was evaluated"


def chat_script(body: dict[str, Any]) -> str:
    """The agent's answers and the judge's verdicts (see the module's docstring)."""
    prompt = "\n".join(str(m.get("content")) for m in body["messages"])
    rated = re.search(r"<response_to_rate>\s*(.*?)\s*</response_to_rate>", prompt, re.S)
    if body.get("response_format") or rated:
        first = rated is not None and rated.group(1) == "Answer 1."
        verdict = (
            {"verdict": "NEEDS_IMPROVEMENT", "score": 0.4, "feedback": FEEDBACK}
            if first
            else {"verdict": "PASS", "score": 0.95, "feedback": "good"}
        )
        return json.dumps(verdict)
    answers = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    return f"Answer {answers + 1}."


@pytest.fixture(scope="module")
def chat_model_server() -> Iterator[ThreadingHTTPServer]:
    with scripted_openai(chat_script) as server:
        yield server


@pytest.fixture(scope="module")
def chat_server(
    chat_model_server: ThreadingHTTPServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`langgraph dev` serving `examples/chat_server/langgraph.json`."""
    from examples.batch_on_server import serve

    logs = tmp_path_factory.mktemp("chat-server") / "server.log"
    base_url = f"http://127.0.0.1:{chat_model_server.server_address[1]}/v1"
    config = "examples/chat_server/langgraph.json"
    with serve(base_url, "scripted-model", logs=logs, config=config) as url:
        yield url


class Chat:
    """One run streamed as a chat client streams it, and what it would render."""

    def __init__(self, url: str, graph: str = "chat_agent") -> None:
        from langgraph_sdk import get_sync_client

        self.client = get_sync_client(url=url)
        self.thread_id = self.client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": TASK}]}
        self.parts = list(
            self.client.runs.stream(
                self.thread_id,
                graph,
                input=request,
                stream_mode=["messages-tuple", "custom", "values"],
            )
        )

    def streamed(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The `messages-tuple` parts: (message or chunk, metadata)."""
        return [(p.data[0], p.data[1]) for p in self.parts if p.event == "messages"]

    def rendered(self) -> dict[str, str]:
        """What a chat shows: each message id's text, its chunks joined in order."""
        shown: dict[str, str] = {}
        for message, _ in self.streamed():
            text = message.get("content")
            text = text if isinstance(text, str) else json.dumps(text)
            if message.get("type", "").endswith("Chunk"):
                shown[message["id"]] = shown.get(message["id"], "") + text
            else:
                shown[message["id"]] = text
        return shown

    def custom(self) -> list[dict[str, Any]]:
        return [p.data for p in self.parts if p.event == "custom"]

    def values(self) -> list[dict[str, Any]]:
        return [p.data for p in self.parts if p.event == "values"]


@pytest.fixture(scope="module")
def chat(chat_server: str) -> Iterator[Chat]:
    chat = Chat(chat_server)
    yield chat
    chat.client.close()  # its connections, closed here rather than by a later collection


@pytest.fixture(scope="module")
def drafts_chat(chat_server: str) -> Iterator[Chat]:
    chat = Chat(chat_server, "chat_agent_drafts")
    yield chat
    chat.client.close()


def test_the_chat_never_shows_a_judge_reply(chat: Chat, chat_model_server: Any) -> None:
    judged = [b for b in chat_model_server.requests if b.get("response_format")]
    assert len(judged) == 2, "the loop judged both answers"
    assert chat.streamed(), "the chat got messages"
    for message, metadata in chat.streamed():
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        assert '"verdict"' not in text and '"score"' not in text, message  # the judge's JSON
        assert "nostream" not in (metadata.get("tags") or [])
    assert "Answer 2." in chat.rendered().values()


def test_the_rounds_reach_the_custom_stream(chat: Chat) -> None:
    rounds = [e for e in chat.custom() if e.get("type") == "round"]
    assert [(r["iteration"], r["score"], r["response"]) for r in rounds] == [
        (0, 0.4, "Answer 1."),
        (1, 0.95, "Answer 2."),
    ]
    assert rounds[0]["feedback"] == FEEDBACK
    assert [e["stop_reason"] for e in chat.custom() if e.get("type") == "stop"] == ["passed"]


def test_the_final_state_is_the_clean_transcript(chat: Chat) -> None:
    def transcript(values: dict[str, Any]) -> list[tuple[str, str]]:
        return [(m["type"], m["content"]) for m in values["messages"]]

    clean = [("human", TASK), ("ai", "Answer 2.")]
    assert transcript(chat.values()[-1]) == clean
    state = chat.client.threads.get_state(chat.thread_id)
    values: Any = state["values"]
    assert state["next"] == []
    assert transcript(values) == clean
    assert values["refine_stop_reason"] == "passed"


def test_the_chat_never_shows_the_loops_prompt(chat: Chat) -> None:
    assert not [t for t in chat.rendered().values() if LOOP_PROMPT in t]


def test_the_chat_shows_only_the_answer_the_loop_returns(chat: Chat) -> None:
    assert list(chat.rendered().values()) == ["Answer 2."]


def test_the_conversation_is_clean_at_every_step(chat: Chat) -> None:
    for values in chat.values():
        for message in values["messages"]:
            assert LOOP_PROMPT not in str(message["content"])
            assert message["content"] != "Answer 1."  # the rejected draft never joins it


def test_with_drafts_each_answer_streams_under_its_attempt(drafts_chat: Chat) -> None:
    shown = drafts_chat.rendered()
    assert list(shown.values()) == ["Answer 1.", "Answer 2."]
    attempts = {
        message["id"]: metadata.get("refine_attempt")
        for message, metadata in drafts_chat.streamed()
    }
    assert list(attempts.values()) == [0, 1]
    assert not [t for t in shown.values() if LOOP_PROMPT in t or '"verdict"' in t]
    # The answer joins the conversation under the id its draft streamed with.
    last = drafts_chat.values()[-1]["messages"][-1]
    assert (last["id"], last["content"]) == (list(shown)[1], "Answer 2.")


EDITED = {"name": "review_answer", "args": {"response": "It is in Paris."}}


def reviewed(url: str, answer: Any) -> dict[str, Any]:
    """A reviewed chat run paused for its review, then resumed with `answer` in a new run."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url)
    try:
        thread = client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": TASK}]}
        client.runs.wait(thread, "chat_agent_reviewed", input=request)
        paused = client.threads.get_state(thread)
        assert paused["next"], "the run pauses for the review"
        (interrupt,) = paused["tasks"][0]["interrupts"]
        assert interrupt["value"]["action_requests"][0]["args"] == {"response": "Answer 2."}
        # A new run on the same thread: the server builds a fresh agent to resume it.
        client.runs.wait(thread, "chat_agent_reviewed", command={"resume": answer})
        values: dict[str, Any] = client.threads.get_state(thread)["values"]
        return values
    finally:
        client.close()


@pytest.mark.parametrize(
    ("answer", "final"),
    [
        ({"action": "approve"}, "Answer 2."),
        ({"action": "edit", "response": "It is in Paris."}, "It is in Paris."),
        ({"action": "reject"}, "Answer 2."),
        ({"decisions": [{"type": "approve"}]}, "Answer 2."),
        (
            {"decisions": [{"type": "edit", "edited_action": EDITED}]},
            "It is in Paris.",
        ),
        ({"decisions": [{"type": "reject"}]}, "Answer 2."),
    ],
)
def test_a_review_resumes_on_the_server_whatever_the_answer(
    chat_server: str, answer: Any, final: str
) -> None:
    # The judge is the agent's own model, known to the fresh agent only through its run.
    values = reviewed(chat_server, answer)
    last = values["messages"][-1]
    assert (last["type"], last["content"]) == ("ai", final)
