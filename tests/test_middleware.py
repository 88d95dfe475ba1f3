"""RefineMiddleware inside a real `langchain.agents.create_agent`, with scripted models."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine import (
    Attempt,
    Budget,
    BudgetExhaustedError,
    Evaluation,
    RefineMiddleware,
    ReviewInputError,
    ReviewNode,
    create_refine_graph,
)
from langgraph_refine._loop._review_schema import review_answer_schema
from tests.fakes import (
    LOOKUPS,
    AgentModel,
    ScriptedChatModel,
    call_tool,
    judge_reply,
    lookup,
    scores,
)


def feedback_evaluator(word: str) -> Any:
    def evaluate(response: str, state: Any) -> Evaluation:
        if word in response:
            return Evaluation(score=1.0, feedback="good")
        return Evaluation(score=0.2, feedback=f"mention {word}")

    return evaluate


def ask(text: str = "Tell me about the Eiffel Tower.") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def agent_for(model: AgentModel, middleware: RefineMiddleware, **kwargs: Any) -> Any:
    return create_agent(model, tools=[lookup], middleware=[middleware], **kwargs)


# -- the loop ---------------------------------------------------------------------------


def test_refines_the_final_answer_with_the_feedback_and_keeps_the_tools() -> None:
    LOOKUPS.clear()
    model = AgentModel(
        replies=[
            call_tool("eiffel", "c1"),
            "It is a tower.",
            call_tool("eiffel city", "c2"),
            "It is a tower in Paris.",
        ]
    )
    middleware = RefineMiddleware(feedback_evaluator("Paris"))
    out = agent_for(model, middleware).invoke(ask())

    # The feedback reached the model as a human message after the first final answer...
    third_prompt = model.calls[2]
    assert isinstance(third_prompt[-1], HumanMessage)
    assert "mention Paris" in third_prompt[-1].text
    assert "score 0.20" in third_prompt[-1].text
    # ...and the agent could use its tools again in the refinement round.
    assert LOOKUPS == ["eiffel", "eiffel city"]
    assert isinstance(model.calls[3][-1], ToolMessage)
    last = out["messages"][-1]
    assert isinstance(last, AIMessage) and last.text == "It is a tower in Paris."
    result = middleware.result(out)
    assert result.stop_reason == "target_reached"
    assert [a.response for a in result.attempts] == ["It is a tower.", "It is a tower in Paris."]
    assert result.score_history == [0.2, 1.0]
    assert out["refine_task"] == "Tell me about the Eiffel Tower."
    # Four model calls, each counted with its tokens.
    assert result.usage.calls == 4
    assert result.usage.total_tokens == 4 * 15


def test_evaluator_sees_the_task_and_earlier_attempts() -> None:
    seen: list[tuple[str, list[str]]] = []

    def evaluate(response: str, state: Any) -> float:
        seen.append((state["task"], [a.response for a in state["attempts"]]))
        return 0.1

    model = AgentModel(replies=["a", "b"])
    agent_for(model, RefineMiddleware(evaluate, max_iterations=1)).invoke(ask("the task"))
    assert seen == [("the task", []), ("the task", ["a"])]


@pytest.mark.parametrize(
    ("evaluator", "options", "reason", "answers"),
    [
        (lambda r, s: Evaluation(score=0.1, verdict="PASS"), {}, "passed", 1),
        (scores(0.3, 0.95), {}, "target_reached", 2),
        (scores(0.1, 0.2, 0.3), {"max_iterations": 2}, "max_iterations", 3),
        (scores(0.5, 0.4, 0.5), {"patience": 2}, "plateau", 3),
        (scores(0.5, 0.55), {"patience": 1, "min_delta": 0.1}, "plateau", 2),
    ],
)
def test_stops_by_each_stop_rule(
    evaluator: Any, options: dict[str, Any], reason: str, answers: int
) -> None:
    model = AgentModel(replies=["a0", "a1", "a2", "a3", "a4", "a5"])
    middleware = RefineMiddleware(evaluator, **options)
    out = agent_for(model, middleware).invoke(ask())
    result = middleware.result(out)
    assert result.stop_reason == reason
    assert len(result.attempts) == answers
    assert len(model.calls) == answers  # no model call after the stop


def test_ends_on_the_best_answer_not_a_later_regression() -> None:
    model = AgentModel(replies=["first", "best", "worse"])
    middleware = RefineMiddleware(scores(0.4, 0.7, 0.3), max_iterations=2, patience=None)
    out = agent_for(model, middleware).invoke(ask())
    # The conversation is clean: the request and the best answer once; no evaluation turn.
    assert [(m.type, m.text) for m in out["messages"]] == [
        ("human", "Tell me about the Eiffel Tower."),
        ("ai", "best"),
    ]
    assert middleware.result(out).value == "best"
    assert [a.response for a in middleware.result(out).attempts] == ["first", "best", "worse"]
    assert out["refine_response"] == "best"


def test_keep_evaluation_turns_keeps_every_answer_and_feedback() -> None:
    model = AgentModel(replies=["first", "best", "worse"])
    middleware = RefineMiddleware(
        scores(0.4, 0.7, 0.3), max_iterations=2, patience=None, keep_evaluation_turns=True
    )
    out = agent_for(model, middleware).invoke(ask())
    texts = [m.text for m in out["messages"] if isinstance(m, AIMessage)]
    assert texts == ["first", "best", "worse", "best"]  # the best, appended as the last
    feedback = [m.text for m in out["messages"][1:] if isinstance(m, HumanMessage)]
    assert len(feedback) == 2 and feedback[0].startswith("Your answer was evaluated")


def test_a_clean_conversation_keeps_the_tool_calls_and_earlier_turns() -> None:
    model = AgentModel(replies=["earlier answer", "one", call_tool("x", "c1"), "two"])
    middleware = RefineMiddleware(scores(1.0, 0.4, 0.9), max_iterations=2)
    agent = agent_for(model, middleware, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "clean"}}
    agent.invoke(ask("earlier"), config)  # an earlier run: its turns stay as they ended
    out = agent.invoke(ask("later"), config)
    kinds = [(m.type, bool(getattr(m, "tool_calls", None))) for m in out["messages"]]
    assert kinds == [
        ("human", False),
        ("ai", False),
        ("human", False),
        ("ai", True),
        ("tool", False),
        ("ai", False),
    ]
    texts = [m.text for m in out["messages"]]
    assert texts[:3] == ["earlier", "earlier answer", "later"] and texts[-1] == "two"
    assert not any("evaluated" in text for text in texts)


def test_a_new_run_on_the_thread_starts_a_new_loop() -> None:
    model = AgentModel(replies=["one", "two"])
    middleware = RefineMiddleware(lambda r, s: 1.0)
    agent = agent_for(model, middleware, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke(ask("first"), config)
    out = agent.invoke(ask("second"), config)
    result = middleware.result(out)
    assert [a.response for a in result.attempts] == ["two"]
    assert out["refine_task"] == "second"
    # Attempts survive the checkpointer as models (strict msgpack in `make test`).
    saved = agent.get_state(config).values["refine_attempts"]
    assert all(isinstance(a, Attempt) for a in saved)


async def test_async_agent_with_an_async_evaluator() -> None:
    async def evaluate(response: str, state: Any) -> Evaluation:
        return Evaluation(score=1.0 if "Paris" in response else 0.0, feedback="say Paris")

    model = AgentModel(replies=["a tower", "in Paris"])
    middleware = RefineMiddleware(evaluate)
    out = await agent_for(model, middleware).ainvoke(ask())
    assert out["messages"][-1].text == "in Paris"
    assert "say Paris" in model.calls[1][-1].text


def test_llm_judge_on_judge_model() -> None:
    judge = ScriptedChatModel(
        replies=[judge_reply(0.3, feedback="add the year"), judge_reply(1.0, "PASS", "ok")]
    )
    model = AgentModel(replies=["a tower", "a tower from 1889"])
    middleware = RefineMiddleware(judge_model=judge)
    out = agent_for(model, middleware).invoke(ask())
    assert out["messages"][-1].text == "a tower from 1889"
    assert "add the year" in model.calls[1][-1].text
    assert "a tower from 1889" in judge.calls[1][-1].text
    result = middleware.result(out)
    assert result.stop_reason == "passed"
    assert result.usage.calls == 4  # two agent calls, two judge calls


# -- budget -----------------------------------------------------------------------------


def test_budget_counts_agent_calls_and_stops_before_the_next_one() -> None:
    model = AgentModel(replies=[call_tool("x", "c1"), "a", "b", "c"])
    middleware = RefineMiddleware(scores(0.2, 0.5, 0.1), budget=Budget(max_calls=3))
    out = agent_for(model, middleware).invoke(ask())
    assert len(model.calls) == 3  # tool-calling turn, "a", "b"; no fourth call
    result = middleware.result(out)
    assert result.stop_reason == "budget_exhausted"
    assert result.value == "b"
    assert out["messages"][-1].text == "b"
    # The answers and the feedback turns are gone; the tool call stays.
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]


def test_budget_counts_judge_calls() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.4, feedback="more")])
    model = AgentModel(replies=["a", "b"])
    middleware = RefineMiddleware(judge_model=judge, budget=Budget(max_calls=3))
    out = agent_for(model, middleware).invoke(ask())
    # agent, judge; a second answer could not be judged under max_calls=3: not asked.
    assert (len(model.calls), len(judge.calls)) == (1, 1)
    result = middleware.result(out)
    assert result.stop_reason == "budget_exhausted"
    assert [a.evaluation is not None for a in result.attempts] == [True]
    assert result.value == "a"
    assert out["messages"][-1].text == "a"


def test_budget_counts_tokens() -> None:
    model = AgentModel(replies=["a", "b", "c"])
    middleware = RefineMiddleware(lambda r, s: 0.1, budget=Budget(max_tokens=30))
    out = agent_for(model, middleware).invoke(ask())
    assert len(model.calls) == 2  # 15 tokens a call: the third would start at 30
    assert middleware.result(out).stop_reason == "budget_exhausted"


def test_budget_raise_carries_the_best_result() -> None:
    model = AgentModel(replies=["good", "worse", "never"])
    middleware = RefineMiddleware(
        scores(0.6, 0.3), budget=Budget(max_calls=2), on_budget_exhausted="raise"
    )
    with pytest.raises(BudgetExhaustedError) as caught:
        agent_for(model, middleware).invoke(ask())
    assert caught.value.result.value == "good"
    assert caught.value.result.stop_reason == "budget_exhausted"
    assert len(model.calls) == 2


# -- human review -----------------------------------------------------------------------


def reviewed_agent(
    mode: str, replies: list[Any], evaluator: Any, **options: Any
) -> tuple[Any, AgentModel, RefineMiddleware, dict[str, Any]]:
    model = AgentModel(replies=replies)
    middleware = RefineMiddleware(evaluator, human_review=mode, **options)  # type: ignore[arg-type]
    agent = agent_for(model, middleware, checkpointer=InMemorySaver())
    return agent, model, middleware, {"configurable": {"thread_id": "review"}}


def pending_review(agent: Any, config: dict[str, Any]) -> Any:
    state = agent.get_state(config)
    assert state.next == ("RefineMiddleware.after_agent",)
    (interrupt,) = state.interrupts
    return interrupt


def test_review_payload_and_schema_are_the_graphs() -> None:
    agent, _, _, config = reviewed_agent("final", ["a", "b"], scores(0.6, 0.4), max_iterations=1)
    out = agent.invoke(ask("the task"), config)
    interrupt = pending_review(agent, config)
    assert out["__interrupt__"][0].value == interrupt.value
    view = {
        "task": "the task",
        "attempts": agent.get_state(config).values["refine_attempts"],
        "stop_reason": "max_iterations",
    }
    assert interrupt.value == ReviewNode("final").payload(view)
    assert interrupt.value["response"] == "a"  # the best, not the latest
    assert interrupt.response_schema == review_answer_schema(interrupt.value["actions"])


@pytest.mark.parametrize(
    ("answer", "reason", "value"),
    [
        ({"action": "approve"}, "approved", "a"),
        ({"action": "edit", "response": "edited text"}, "edited", "edited text"),
        ({"action": "reject"}, "rejected", "a"),
    ],
)
def test_review_approve_edit_reject_repeat_no_model_call(
    answer: dict[str, Any], reason: str, value: str
) -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.6), judge_reply(0.4)])
    agent, model, middleware, config = reviewed_agent(
        "final", ["a", "b"], None, judge_model=judge, max_iterations=1
    )
    agent.invoke(ask(), config)
    pending_review(agent, config)
    calls = (len(model.calls), len(judge.calls))
    assert calls == (2, 2)

    out = agent.invoke(Command(resume=answer), config)

    # Resuming repeats no model call; an edit is judged once more (it is an attempt).
    edited = 1 if reason == "edited" else 0
    assert (len(model.calls), len(judge.calls)) == (calls[0], calls[1] + edited)
    result = middleware.result(out)
    assert (result.stop_reason, result.value) == (reason, value)
    assert out["messages"][-1].text == value
    assert agent.get_state(config).next == ()
    if edited:
        assert value in str(judge.calls[-1][-1].content)
        assert result.attempts[-1].move == "edit" and result.score == 0.4  # the edit's
        assert result.usage.calls == 5


def test_review_revise_runs_one_more_round_with_the_reviewers_feedback() -> None:
    agent, model, middleware, config = reviewed_agent(
        "final", ["a", "b", "c"], scores(0.5, 0.4, 0.7), max_iterations=1
    )
    agent.invoke(ask(), config)
    agent.invoke(Command(resume={"action": "revise", "feedback": "shorter please"}), config)
    # Past max_iterations: exactly one more answer, which saw the request; then review again.
    assert len(model.calls) == 3
    assert "shorter please" in model.calls[2][-1].text
    interrupt = pending_review(agent, config)
    assert interrupt.value["response"] == "c"
    out = agent.invoke(Command(resume={"action": "approve"}), config)
    assert len(model.calls) == 3
    result = middleware.result(out)
    assert (result.stop_reason, result.value) == ("approved", "c")
    assert result.attempts[2].instruction == "shorter please"


def test_every_round_review_continue_lets_the_stop_rules_decide() -> None:
    agent, model, middleware, config = reviewed_agent("every_round", ["a", "b"], scores(0.3, 0.95))
    agent.invoke(ask(), config)
    interrupt = pending_review(agent, config)
    assert interrupt.value["actions"][-1] == "continue"
    assert interrupt.value["stop_reason"] is None
    agent.invoke(Command(resume={"action": "continue"}), config)
    assert len(model.calls) == 2
    assert "score 0.30" in model.calls[1][-1].text  # the evaluator's feedback went back
    interrupt = pending_review(agent, config)  # reviewed again, about the latest answer
    assert (interrupt.value["response"], interrupt.value["stop_reason"]) == ("b", "target_reached")
    out = agent.invoke(Command(resume={"action": "continue"}), config)
    assert middleware.result(out).stop_reason == "target_reached"
    assert out["messages"][-1].text == "b"


def test_a_malformed_review_answer_asks_again_with_the_error() -> None:
    agent, model, _, config = reviewed_agent("final", ["a"], lambda r, s: 1.0)
    agent.invoke(ask(), config)
    agent.invoke(Command(resume={"action": "edit"}), config)
    interrupt = pending_review(agent, config)
    assert "'response'" in interrupt.value["error"]
    out = agent.invoke(Command(resume={"action": "edit", "response": "fixed"}), config)
    assert out["messages"][-1].text == "fixed"
    assert len(model.calls) == 1


def test_budget_raise_skips_the_review() -> None:
    agent, model, _, config = reviewed_agent(
        "final",
        ["a", "b"],
        lambda r, s: 0.1,
        budget=Budget(max_calls=1),
        on_budget_exhausted="raise",
    )
    with pytest.raises(BudgetExhaustedError):
        agent.invoke(ask(), config)
    assert agent.get_state(config).interrupts == ()
    assert len(model.calls) == 1


@pytest.mark.parametrize("mode", ["final", "every_round"])
def test_the_schema_accepts_exactly_what_the_review_applies(mode: Any) -> None:
    import jsonschema

    actions = ReviewNode(mode).actions

    schema = review_answer_schema(actions)
    node = ReviewNode("every_round")
    payload = {"response": "r"}
    candidates: list[Any] = [
        {"action": "approve"},
        {"action": "edit", "response": "x"},
        {"action": "edit", "response": "  "},
        {"action": "edit"},
        {"action": "reject"},
        {"action": "revise", "feedback": "f"},
        {"action": "revise", "feedback": ""},
        {"action": "continue"},
        {"action": "nope"},
        {},
    ]
    for value in candidates:
        valid = jsonschema.Draft202012Validator(schema).is_valid(value)
        try:
            node.apply(payload, value)
            applied = value["action"] in actions
        except ReviewInputError:
            applied = False
        assert valid == applied, value


# -- stream events ----------------------------------------------------------------------


def test_round_and_stop_events_match_the_graphs() -> None:
    model = AgentModel(replies=["a", "b"])
    agent = agent_for(model, RefineMiddleware(scores(0.4, 0.9)))
    events = list(agent.stream(ask(), stream_mode="custom"))
    assert [e["type"] for e in events] == ["round", "round", "stop"]
    assert [e["score"] for e in events[:2]] == [0.4, 0.9]
    assert events[1]["best_score"] == 0.9
    assert events[2]["stop_reason"] == "target_reached"

    graph = create_refine_graph(lambda s: "x", scores(0.4, 0.9)).compile()
    graph_events = list(graph.stream({"task": "t"}, stream_mode="custom"))
    assert [set(e) for e in events] == [set(e) for e in graph_events]


# -- options and the optional dependency ------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"evaluator": lambda r, s: 1.0, "judge_model": ScriptedChatModel()}, "judge_model"),
        ({"evaluator": lambda r, s: 1.0, "target_score": 1.5}, "target_score"),
        ({"evaluator": lambda r, s: 1.0, "patience": -1}, "patience"),
        ({"evaluator": lambda r, s: 1.0, "human_review": "always"}, "human_review"),
        ({"evaluator": lambda r, s: 1.0, "on_budget_exhausted": "ignore"}, "on_budget_exhausted"),
        ({"evaluator": lambda r, s: 1.0, "budget": {"max_calls": 1}}, "budget"),
        ({"evaluator": 3}, "evaluator"),
    ],
)
def test_invalid_options_fail_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RefineMiddleware(**kwargs)


def test_without_langchain_the_package_imports_and_the_middleware_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['langchain'] = None\n"
        "import langgraph_refine\n"
        "from langgraph_refine import *\n"
        "try:\n"
        "    langgraph_refine.RefineMiddleware\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'langgraph-refine[agents]'" in done.stdout


def test_the_research_example_runs_with_a_tool_calling_model() -> None:
    from examples import research_agent_middleware as example

    model = AgentModel(
        replies=[
            AIMessage(
                "",
                tool_calls=[{"name": "lookup", "args": {"topic": "Eiffel Tower"}, "id": "c1"}],
            ),
            "It was completed in 1889.",
            "Completed in 1889, designed by Gustave Eiffel's firm, 330 metres tall.",
        ]
    )
    messages, result = example.main(model)
    assert "330 metres" in model.calls[1][-1].text  # the tool's facts reached the model
    assert result.stop_reason == "target_reached"
    assert result.score_history[0] < 1.0
    assert messages[-1].text == result.value == model.replies[-1]


def test_review_without_a_checkpointer_fails_before_any_model_call() -> None:
    model = AgentModel(replies=["a"])
    middleware = RefineMiddleware(lambda r, s: 0.5, human_review="final")
    with pytest.raises(ValueError, match="human_review needs a checkpointer"):
        agent_for(model, middleware).invoke(ask())
    assert model.calls == []
