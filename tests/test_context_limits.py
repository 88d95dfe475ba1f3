"""Context limits: attempts are cut in refinement prompts, and a provider's context
overflow in the generator is retried once with the smallest prompt, then raised with
the best result so far and the checkpointed state intact."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import ContextLengthError, Evaluation, refine
from langgraph_refine._calls._retry import is_context_length_error
from tests.fault_server import FaultServer, Received, Reply, ok

LONG = "word " * 3000  # 15,000 characters


def overflow() -> Reply:
    """llama.cpp's answer to a prompt past the slot's context."""
    body = {
        "error": {
            "code": 400,
            "message": "request (2117 tokens) exceeds the available context size (2048 tokens)",
            "type": "exceed_context_size_error",
        }
    }
    return Reply(status=400, body=json.dumps(body).encode())


def long_drafts(request: Received, number: int) -> str:
    return f"draft {number} {LONG}"


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer(content=long_drafts).serve() as running:
        yield running


def chat(server: FaultServer) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key="k", model="m", max_retries=0)


def sent(request: Received) -> str:
    """Every message of a request, whichever prompt form the loop used."""
    return "\n".join(str(m["content"]) for m in request.body["messages"])


def feedback(response: str, state: Any) -> Evaluation:
    return Evaluation(score=0.2, feedback="Make it shorter.")


def test_the_overflow_error_is_recognised() -> None:
    import httpx
    import openai

    response = httpx.Response(400, request=httpx.Request("POST", "http://x"))
    exc = openai.BadRequestError(
        "Error code: 400 - request (2117 tokens) exceeds the available context size",
        response=response,
        body=None,
    )
    assert is_context_length_error(exc)
    other = openai.BadRequestError("Error code: 400 - bad value", response=response, body=None)
    assert not is_context_length_error(other)


def test_attempts_are_cut_in_the_refinement_prompt(server: FaultServer) -> None:
    refine(chat(server), "t", feedback, max_iterations=1, patience=None, max_attempt_chars=500)
    second = sent(server.received[1])
    assert "more characters not shown" in second
    assert len(second) < 2000  # not the 15,000-character attempt


def test_a_generator_overflow_is_retried_once_with_the_smallest_prompt(
    server: FaultServer,
) -> None:
    server.script(ok(), overflow(), ok())
    result = refine(chat(server), "t", feedback, max_iterations=1, patience=None)
    assert len(result.attempts) == 2
    assert result.attempts[1].parent == 0
    smallest = sent(server.received[2])
    assert "Make it shorter." in smallest  # the feedback is kept
    assert len(smallest) < 1500  # the attempt is cut short
    assert len(smallest) < len(sent(server.received[1]))


def test_a_second_overflow_raises_with_the_best_result_and_the_state_intact(
    server: FaultServer,
) -> None:
    server.script(ok(), overflow(), overflow())
    saver = InMemorySaver()
    with pytest.raises(ContextLengthError) as info:
        refine(
            chat(server),
            "t",
            feedback,
            max_iterations=2,
            patience=None,
            checkpointer=saver,
            thread_id="th",
        )
    assert "smallest form" in str(info.value)
    result = info.value.result
    assert result is not None
    assert result.value.startswith("draft 1")
    assert result.score == 0.2
    from langgraph_refine import create_refine_graph

    graph = create_refine_graph(chat(server), feedback).compile(checkpointer=saver)
    state = graph.get_state({"configurable": {"thread_id": "th"}})
    assert [a.index for a in state.values["attempts"]] == [0]


def test_a_task_that_does_not_fit_raises_with_no_result(server: FaultServer) -> None:
    server.script(overflow())
    with pytest.raises(ContextLengthError) as info:
        refine(chat(server), "t", feedback)
    assert info.value.result is None
    assert len(server.received) == 1  # nothing to cut: no second try


def test_an_edit_round_that_cannot_fit_keeps_the_loops_typed_result() -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    with FaultServer(content=lambda request, number: '{"name": "Oslo"}').serve() as running:
        running.script(ok(), overflow(), overflow())
        with pytest.raises(ContextLengthError) as info:
            refine(
                chat(running),
                "t",
                feedback,
                output_schema=City,
                edits=True,
                max_iterations=2,
                patience=None,
            )
    result = info.value.result
    assert result is not None and result.output == City(name="Oslo")
