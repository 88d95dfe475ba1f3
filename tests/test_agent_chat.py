"""What a chat sees of an agent with `RefineMiddleware`: the request, tools, one answer.

A chat UI renders the agent's `messages` stream (LangChain's agent-chat-ui through the
SDK's `messages-tuple`) and its `values`. The loop's own turns (feedback, requests) never
appear in either; drafts appear only with `stream_drafts=True`, each chunk tagged with
its attempt; the best answer arrives once. Also: a ladder of the agent's models, and the
agent's own model as the judge.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk

from langgraph_refine import RefineMiddleware
from tests.fakes import AgentModel, call_tool, judge_reply, lookup, scores

REQUEST = "Tell me about the Eiffel Tower."
DRAFTS = ["first draft text", "better draft text", "worse draft text"]
LOOP_WORDS = ("evaluated", "Feedback", "improved")


class StreamingModel(AgentModel):
    """An agent model that streams its text answers word by word."""

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._next(messages)
        words = message.text.split(" ")
        for i, word in enumerate(words):
            text = word if i == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(text))
            if run_manager is not None:
                run_manager.on_llm_new_token(text, chunk=chunk)
            yield chunk


def chat(stream_drafts: bool) -> tuple[Any, RefineMiddleware]:
    middleware = RefineMiddleware(
        scores(0.4, 0.7, 0.3), max_iterations=2, patience=None, stream_drafts=stream_drafts
    )
    agent = create_agent(StreamingModel(replies=DRAFTS), tools=[], middleware=[middleware])
    return agent, middleware


def streamed(agent: Any) -> tuple[list[tuple[Any, dict[str, Any]]], dict[str, Any]]:
    """The messages stream's (chunk, metadata) pairs, and the final values."""
    pairs: list[tuple[Any, dict[str, Any]]] = []
    final: dict[str, Any] = {}
    for mode, data in agent.stream(
        {"messages": [HumanMessage(REQUEST)]}, stream_mode=["messages", "values"]
    ):
        if mode == "messages":
            pairs.append(data)
        else:
            final = data
    return pairs, final


def by_message(pairs: list[tuple[Any, dict[str, Any]]]) -> dict[str, str]:
    """The text of every streamed message, its chunks joined, by message id."""
    texts: dict[str, str] = {}
    for chunk, _ in pairs:
        texts[chunk.id] = texts.get(chunk.id, "") + chunk.text
    return texts


def test_without_drafts_the_chat_sees_the_best_answer_once_and_nothing_of_the_loop() -> None:
    agent, middleware = chat(stream_drafts=False)
    pairs, final = streamed(agent)
    texts = list(by_message(pairs).values())
    # One message reached the chat: the best answer, whole (one chunk), once.
    assert texts == ["better draft text"]
    assert len(pairs) == 1
    assert not any(word in text for text in texts for word in LOOP_WORDS)
    assert [(m.type, m.text) for m in final["messages"]] == [
        ("human", REQUEST),
        ("ai", "better draft text"),
    ]
    assert middleware.result(final).value == "better draft text"


def test_with_drafts_every_attempt_streams_tagged_with_its_index() -> None:
    agent, middleware = chat(stream_drafts=True)
    pairs, final = streamed(agent)
    attempts: dict[str, set[int]] = {}
    for chunk, metadata in pairs:
        attempts.setdefault(chunk.id, set()).add(metadata["refine_attempt"])
    texts = by_message(pairs)
    assert list(texts.values()) == DRAFTS  # token by token, each under its own id
    assert [attempts[message_id] for message_id in texts] == [{0}, {1}, {2}]
    assert len(pairs) > len(DRAFTS)  # streamed in chunks, not whole
    # The answer joins the conversation under its draft's id: a chat keeps what it showed.
    best_id = list(texts)[1]
    last = final["messages"][-1]
    assert (last.id, last.text) == (best_id, "better draft text")
    assert not any(word in text for text in texts.values() for word in LOOP_WORDS)
    assert middleware.result(final).attempts[1].response == "better draft text"


def test_with_drafts_a_draft_stays_in_view_until_the_next_one_replaces_it() -> None:
    model = StreamingModel(replies=[call_tool("eiffel", "c1"), *DRAFTS])
    middleware = RefineMiddleware(
        scores(0.4, 0.7, 0.3), max_iterations=2, patience=None, stream_drafts=True
    )
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    shown: list[list[str]] = []  # the AI texts a chat holds after each step
    final: dict[str, Any] = {}
    for values in agent.stream({"messages": [HumanMessage(REQUEST)]}, stream_mode="values"):
        texts = [m.text for m in values["messages"] if isinstance(m, AIMessage) and m.text]
        if not shown or shown[-1] != texts:
            shown.append(texts)
        final = values
    # Each draft stays while it is judged and while the next is written; then it is replaced.
    assert shown == [[], [DRAFTS[0]], [DRAFTS[1]], [DRAFTS[2]], [DRAFTS[1]]]
    assert [m.text for m in final["messages"] if isinstance(m, AIMessage) and m.text] == [DRAFTS[1]]
    # The model saw each answer once, as the loop's turn, never the chat's copy as well.
    for prompt in model.calls[1:]:
        texts = [m.text for m in prompt if isinstance(m, AIMessage)]
        assert len(texts) == len(set(texts)), texts
    assert middleware.result(final).value == DRAFTS[1]


def test_the_conversation_never_holds_a_loop_turn_or_a_draft_while_the_loop_runs() -> None:
    model = AgentModel(replies=[call_tool("eiffel", "c1"), *DRAFTS])
    middleware = RefineMiddleware(scores(0.4, 0.7, 0.3), max_iterations=2, patience=None)
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    for values in agent.stream({"messages": [HumanMessage(REQUEST)]}, stream_mode="values"):
        for message in values["messages"]:
            assert not (isinstance(message, HumanMessage) and message.text != REQUEST)
            assert not (isinstance(message, AIMessage) and message.text in DRAFTS[::2])
    # The model still saw its answers and the feedback, in order, after the tool turn.
    last_prompt = model.calls[-1]
    kinds = [type(m).__name__ for m in last_prompt]
    assert kinds == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert "score 0.70" in last_prompt[-1].text


class Cheap(AgentModel):
    """The ladder's cheap rung (named apart from the strong one by its class)."""


class Strong(AgentModel):
    """The ladder's strong rung."""


def test_a_ladder_makes_every_call_of_a_round_with_its_rung() -> None:
    cheap = Cheap(replies=[call_tool("eiffel", "c1"), "cheap one", "cheap two"])
    strong = Strong(replies=[call_tool("eiffel", "c2"), "strong answer"])
    own = AgentModel(replies=["never asked"])
    middleware = RefineMiddleware(
        scores(0.3, 0.3, 1.0), models=[cheap, strong], target_score=0.9, patience=None
    )
    out = create_agent(own, tools=[lookup], middleware=[middleware]).invoke(
        {"messages": [HumanMessage(REQUEST)]}
    )
    result = middleware.result(out)
    # Round 0: a tool turn and an answer, both by the cheap rung; round 1 did not raise
    # the best, so round 2 climbs: its tool turn and answer are the strong rung's.
    assert (len(cheap.calls), len(strong.calls), len(own.calls)) == (3, 2, 0)
    assert [a.response for a in result.attempts] == ["cheap one", "cheap two", "strong answer"]
    assert [a.model for a in result.attempts] == ["Cheap", "Cheap", "Strong"]
    assert [a.rung for a in result.attempts] == [0, 0, 1]
    assert result.stop_reason == "target_reached"


def test_a_ladder_rung_that_cannot_bind_tools_fails_before_any_call() -> None:
    class NoTools(AgentModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("this model calls no tools")

    cheap = NoTools(replies=["x"])
    middleware = RefineMiddleware(scores(1.0), models=[cheap, Strong(replies=["y"])])
    agent = create_agent(AgentModel(replies=["z"]), tools=[lookup], middleware=[middleware])
    with pytest.raises(ValueError, match=r"models\[0\] \(NoTools\) cannot bind the agent's tools"):
        agent.invoke({"messages": [HumanMessage(REQUEST)]})
    assert cheap.calls == []


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ([], "non-empty list"),
        ("openai:gpt-4o-mini", "non-empty list"),
        ([Cheap(), Cheap()], "more than once"),
    ],
)
def test_bad_ladders_are_refused_at_construction(models: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RefineMiddleware(scores(1.0), models=models)


def test_without_an_evaluator_the_agents_own_model_judges() -> None:
    model = AgentModel(
        replies=[
            "a tower",
            judge_reply(0.3, feedback="say where it is"),
            "a tower in Paris",
            judge_reply(1.0, "PASS", "good"),
        ]
    )
    middleware = RefineMiddleware()
    out = create_agent(model, tools=[], middleware=[middleware]).invoke(
        {"messages": [HumanMessage(REQUEST)]}
    )
    result = middleware.result(out)
    assert [a.response for a in result.attempts] == ["a tower", "a tower in Paris"]
    assert result.stop_reason == "passed"
    assert "say where it is" in model.calls[2][-1].text  # the judge's feedback came back


def test_pairwise_selection_in_the_agent_compares_the_best_answers() -> None:
    compared: list[tuple[str, str]] = []

    def prefer_later(task: str, first: str, second: str) -> str:
        compared.append((first, second))
        return "first" if first == "close second" else "second"

    middleware = RefineMiddleware(
        scores(0.8, 0.78, 0.2),
        max_iterations=2,
        patience=None,
        select="pairwise",
        select_margin=0.05,
        comparer=prefer_later,
    )
    model = AgentModel(replies=["top score", "close second", "far behind"])
    out = create_agent(model, tools=[], middleware=[middleware]).invoke(
        {"messages": [HumanMessage(REQUEST)]}
    )
    result = middleware.result(out)
    # The two answers within the margin are compared both ways; the comparer's choice wins.
    assert sorted(compared) == [("close second", "top score"), ("top score", "close second")]
    assert result.value == "close second" == out["messages"][-1].text
    assert result.metadata["selection"]["chosen"] == 1


def test_pairwise_without_a_comparer_uses_the_agents_own_model() -> None:
    model = AgentModel(replies=["one", "two", "second"])  # the last reply answers the comparison
    middleware = RefineMiddleware(
        scores(0.8, 0.8), max_iterations=1, patience=None, select="pairwise"
    )
    out = create_agent(model, tools=[], middleware=[middleware]).invoke(
        {"messages": [HumanMessage(REQUEST)]}
    )
    assert len(model.calls) == 4  # two answers, two comparisons (both orders)
    selection = middleware.result(out).metadata["selection"]
    assert selection["method"] == "pairwise" and len(selection["comparisons"]) == 1
    assert selection["comparer"] == "AgentModel"


def test_an_agent_asked_for_edits_answers_with_blocks_applied_to_its_answer() -> None:
    edit = "<<<<<<< SEARCH\nIt is a tower.\n=======\nIt is a tower in Paris.\n>>>>>>> REPLACE"
    model = AgentModel(replies=["It is a tower.", edit])
    middleware = RefineMiddleware(
        lambda r, s: 1.0 if "Paris" in r else 0.3, edits=True, target_score=1.0
    )
    out = create_agent(model, tools=[], middleware=[middleware]).invoke(
        {"messages": [HumanMessage(REQUEST)]}
    )
    result = middleware.result(out)
    assert "SEARCH/REPLACE" in model.calls[1][-1].text  # the feedback turn asked for edits
    assert [a.response for a in result.attempts] == ["It is a tower.", "It is a tower in Paris."]
    assert result.attempts[1].edits == 1
    assert out["messages"][-1].text == "It is a tower in Paris."


def test_memory_chooses_the_earlier_answers_the_agents_model_sees() -> None:
    model = AgentModel(replies=["a0", "a1", "a2", "a3"])
    middleware = RefineMiddleware(
        scores(0.5, 0.1, 0.2, 0.3), max_iterations=3, patience=None, memory="best_and_last"
    )
    create_agent(model, tools=[], middleware=[middleware]).invoke(
        {"messages": [HumanMessage(REQUEST)]}
    )
    # Before the last answer: the best (a0) and the latest (a2), each with its feedback.
    seen = [m.text for m in model.calls[3] if isinstance(m, AIMessage)]
    assert seen == ["a0", "a2"]
    everything = RefineMiddleware(scores(0.5, 0.1, 0.2, 0.3), max_iterations=3, patience=None)
    model = AgentModel(replies=["a0", "a1", "a2", "a3"])
    create_agent(model, tools=[], middleware=[everything]).invoke(
        {"messages": [HumanMessage(REQUEST)]}
    )
    assert [m.text for m in model.calls[3] if isinstance(m, AIMessage)] == ["a0", "a1", "a2"]


# -- the graph's drafts ------------------------------------------------------------------


def graph_chat(**options: Any) -> list[tuple[Any, dict[str, Any]]]:
    from langgraph_refine import create_refine_graph

    graph = create_refine_graph(
        StreamingModel(replies=DRAFTS),
        scores(0.4, 0.7, 0.3),
        max_iterations=2,
        patience=None,
        **options,
    ).compile()
    return [
        data for data in graph.stream({"messages": [HumanMessage(REQUEST)]}, stream_mode="messages")
    ]


def test_the_graph_streams_its_drafts_by_default_each_tagged_with_its_attempt() -> None:
    pairs = graph_chat()
    texts = by_message(pairs)
    assert list(texts.values())[:3] == DRAFTS
    tagged = {chunk.id: metadata.get("refine_attempt") for chunk, metadata in pairs}
    assert [tagged[message_id] for message_id in list(texts)[:3]] == [0, 1, 2]


def test_the_graph_without_drafts_sends_only_its_answer() -> None:
    pairs = graph_chat(stream_drafts=False)
    assert list(by_message(pairs).values()) == ["better draft text"]


def test_an_unpriced_rung_under_max_cost_is_refused_when_the_middleware_is_built() -> None:
    from langgraph_refine import Budget, UnknownPriceError
    from tests.test_ladder import Named

    class Priced(Named, AgentModel):
        """A named scripted model an agent can bind tools to."""

    PRICE = {"input": 0.0, "output": 1.0}
    budget = Budget(max_cost=1.0, prices={"test:cheap": PRICE})
    rungs = [Priced(name_="cheap"), Priced(name_="strong")]
    refused = r"models\[1\] of the ladder \(rung 1\): no price .*'strong'"
    with pytest.raises(UnknownPriceError, match=refused):
        RefineMiddleware(scores(1.0), models=rungs, budget=budget)
    priced = Budget(max_cost=1.0, prices={"test:cheap": PRICE, "test:strong": PRICE})
    RefineMiddleware(scores(1.0), models=rungs, budget=priced)  # every rung priced: built


# -- the loop's own turns are tagged as LangChain tags a harness's turns ----------------------


def test_the_loops_turns_carry_lc_source_and_its_name() -> None:
    from langchain_core.messages import get_notification_metadata

    model = AgentModel(replies=["first", "best", "worse"])
    middleware = RefineMiddleware(
        scores(0.4, 0.7, 0.3), max_iterations=2, patience=None, keep_evaluation_turns=True
    )
    out = create_agent(model, tools=[], middleware=[middleware]).invoke(
        {"messages": [HumanMessage(REQUEST)]}
    )
    humans = [m for m in out["messages"] if isinstance(m, HumanMessage)]
    request, *loop_turns = humans
    assert request.text == REQUEST and get_notification_metadata(request) is None
    assert len(loop_turns) == 2 and loop_turns[0].text.startswith("Your answer was evaluated")
    for turn in loop_turns:  # kept in the conversation (keep_evaluation_turns=True)
        assert turn.additional_kwargs["lc_source"] == "refine" and turn.name == "refine"
        assert get_notification_metadata(turn) == {"source": "refine"}
    # The same tagged turn is what the model was sent for its second answer.
    sent = [m for m in model.calls[1] if isinstance(m, HumanMessage)]
    assert [m.additional_kwargs.get("lc_source") for m in sent] == [None, "refine"]
