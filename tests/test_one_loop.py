"""The graph and the agent run the same round: same attempts, stop reasons and result.

Both drive `_round.evaluate_round`; for the same scripted answers and evaluations they
must agree on every attempt (index, response, parent, move, score, verdict), the stop
reason and the result, over every stop reason and strategy, sync and async.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from langgraph_refine import (
    Budget,
    Evaluation,
    RefineMiddleware,
    RefineResult,
    create_refine_graph,
)
from tests.fakes import AgentModel

TASK = "Describe the Eiffel Tower."

SCORES = {"a": 0.2, "b": 0.5, "c": 0.5, "d": 0.5, "e": 0.95, "f": 0.4, "g": 0.3}
"""Each scripted answer's score; "p" passes outright."""


def judge(response: str, state: Any) -> Evaluation:
    if response == "p":
        return Evaluation(score=0.6, verdict="PASS", feedback="fine")
    return Evaluation(score=SCORES[response], verdict="FAIL", feedback=f"improve {response}")


def shape(result: RefineResult) -> dict[str, Any]:
    return {
        "attempts": [
            (a.index, a.response, a.parent, a.move, a.score, a.evaluation and a.evaluation.verdict)
            for a in result.attempts
        ],
        "stop_reason": result.stop_reason,
        "value": result.value,
        "score": result.score,
    }


CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "passed": (["a", "p"], {}),
    "target_reached": (["a", "b", "e"], {}),
    "max_iterations": (["a", "b", "f", "e"], {"max_iterations": 2, "patience": None}),
    "plateau": (["b", "c", "d", "e"], {"patience": 2}),
    "budget": (["a", "b", "f", "e"], {"budget": Budget(max_calls=2), "patience": None}),
    "confirmed": (["e", "a", "e", "e"], {"confirm_pass": True}),
}


def scripted_judge(case: str) -> Any:
    """The evaluator; with `confirm_pass`, the first confirmation disagrees."""
    if case != "confirmed":
        return judge
    calls: list[str] = []

    def judged(response: str, state: Any) -> Evaluation:
        calls.append(response)
        if len(calls) == 2:  # the confirmation of the first 0.95: it disagrees
            return Evaluation(score=0.3, verdict="FAIL", feedback="not really")
        return judge(response, state)

    return judged


def graph_run(answers: list[str], case: str, strategy: str, options: dict[str, Any]) -> Any:
    replies = iter(answers)
    graph = create_refine_graph(
        lambda state: next(replies),
        scripted_judge(case),
        strategy=strategy,  # type: ignore[arg-type]
        target_score=0.9,
        **options,
    ).compile(store=InMemoryStore(), checkpointer=InMemorySaver())
    return graph


CONFIG: Any = {"configurable": {"thread_id": "t"}}


def agent_run(answers: list[str], case: str, strategy: str, options: dict[str, Any]) -> Any:
    middleware = RefineMiddleware(
        scripted_judge(case),
        strategy=strategy,  # type: ignore[arg-type]
        target_score=0.9,
        **options,
    )
    agent = create_agent(AgentModel(replies=answers), tools=[], middleware=[middleware])
    return agent, middleware


@pytest.mark.parametrize("strategy", ["chain", "explore", "sample"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_graph_and_agent_agree(case: str, strategy: str) -> None:
    answers, options = CASES[case]
    graph = graph_run(answers, case, strategy, options)
    graph.invoke({"task": TASK}, CONFIG)
    from_graph = RefineResult.from_state(graph.get_state(CONFIG).values)
    agent, middleware = agent_run(answers, case, strategy, options)
    from_agent = middleware.result(agent.invoke({"messages": [HumanMessage(TASK)]}))
    assert shape(from_agent) == shape(from_graph)
    expected = {"budget": "budget_exhausted", "confirmed": "target_reached"}.get(case, case)
    assert from_graph.stop_reason == expected


@pytest.mark.parametrize("strategy", ["chain", "explore"])
async def test_graph_and_agent_agree_async(strategy: str) -> None:
    answers, options = CASES["confirmed"]
    graph = graph_run(answers, "confirmed", strategy, options)
    await graph.ainvoke({"task": TASK}, CONFIG)
    from_graph = RefineResult.from_state((await graph.aget_state(CONFIG)).values)
    agent, middleware = agent_run(answers, "confirmed", strategy, options)
    from_agent = middleware.result(await agent.ainvoke({"messages": [HumanMessage(TASK)]}))
    assert shape(from_agent) == shape(from_graph)
    # The agent now confirms a pass too: the first 0.95 was judged again and refused.
    first = from_agent.attempts[0].evaluation
    assert first is not None and "first_judgment" in first.details


def test_a_reviewers_edit_ends_both_loops_the_same_way() -> None:
    """An edit is a pending attempt with `move="edit"`; its evaluation stops with "edited"."""
    answers, options = ["a", "b", "f", "e"], {"human_review": "final", "max_iterations": 1}
    replies = iter(answers)
    graph = create_refine_graph(
        lambda state: next(replies),
        judge,
        strategy="chain",
        target_score=0.9,
        **options,
    ).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "g"}}
    graph.invoke({"task": TASK}, config)
    graph.invoke(Command(resume={"action": "edit", "response": "e"}), config)
    from_graph = RefineResult.from_state(graph.get_state(config).values)

    middleware = RefineMiddleware(judge, strategy="chain", target_score=0.9, **options)
    agent = create_agent(
        AgentModel(replies=answers), tools=[], middleware=[middleware], checkpointer=InMemorySaver()
    )
    agent_config = {"configurable": {"thread_id": "a"}}
    agent.invoke({"messages": [HumanMessage(TASK)]}, agent_config)
    out = agent.invoke(Command(resume={"action": "edit", "response": "e"}), agent_config)
    from_agent = middleware.result(out)
    assert shape(from_agent) == shape(from_graph)
    assert from_graph.stop_reason == "edited"
    assert from_graph.attempts[-1].move == "edit"
    assert from_graph.score == 0.95


# -- review and selection: the same answers, the same reviewer, the same run -------------

REVIEW_SCORES = {"a": 0.3, "b": 0.5, "c": 0.5, "d": 0.4, "e": 0.95, "E": 0.7, "f": 0.2}
"""Each scripted answer's (and a reviewer's edit's) score."""


def review_judge(response: str, state: Any) -> Evaluation:
    return Evaluation(score=REVIEW_SCORES[response], verdict=None, feedback=f"improve {response}")


def compare_by_score(task: str, first: str, second: str) -> str:
    """A comparer that prefers the higher-scored text (and so may disagree with ties)."""
    a, b = REVIEW_SCORES[first], REVIEW_SCORES[second]
    return "first" if a > b else "second" if b > a else "tie"


def reviewed_graph(answers: list[str], options: dict[str, Any]) -> Any:
    replies = iter(answers)
    return create_refine_graph(
        lambda state: next(replies), review_judge, target_score=0.9, **options
    ).compile(store=InMemoryStore(), checkpointer=InMemorySaver())


def reviewed_agent(answers: list[str], options: dict[str, Any]) -> tuple[Any, RefineMiddleware]:
    middleware = RefineMiddleware(review_judge, target_score=0.9, **options)
    agent = create_agent(
        AgentModel(replies=answers),
        tools=[],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
    )
    return agent, middleware


def answered(run: Any, first: Any, reviews: list[Any], config: Any) -> list[Any]:
    """Run, answering each review pause with the next scripted answer; the payloads seen."""
    shown: list[Any] = []
    out = run(first, config)
    for answer in reviews:
        if "__interrupt__" not in out:
            break
        shown.append(out["__interrupt__"][0].value)
        out = run(Command(resume=answer), config)
    assert "__interrupt__" not in out, "the scripted reviewer ran out of answers"
    return shown


def reviewed_shape(payload: Any) -> tuple[Any, ...]:
    return (payload["response"], payload["attempt"], payload["score"], payload["stop_reason"])


REVISE = {"action": "revise", "feedback": "make it better"}
LC_REJECT = {"decisions": [{"type": "reject", "message": "make it better"}]}
LC_EDIT = {
    "decisions": [{"type": "edit", "edited_action": {"name": "refine", "args": {"response": "E"}}}]
}

REVIEWED: dict[str, tuple[list[str], dict[str, Any], list[Any]]] = {
    "final approve": (
        ["a", "b", "c"],
        {"human_review": "final", "max_iterations": 1},
        [{"action": "approve"}],
    ),
    "final reject": (
        ["a", "b", "c"],
        {"human_review": "final", "max_iterations": 1},
        [{"action": "reject"}],
    ),
    "final edit": (
        ["a", "b", "c"],
        {"human_review": "final", "max_iterations": 1},
        [{"action": "edit", "response": "E"}],
    ),
    "final revise, approve": (
        ["b", "a", "c", "f"],
        {"human_review": "final", "max_iterations": 1},
        [REVISE, {"action": "approve"}],
    ),
    "final revise twice, reject": (
        ["b", "a", "c", "c", "f"],
        {"human_review": "final", "max_iterations": 1, "strategy": "explore"},
        [REVISE, REVISE, {"action": "reject"}],
    ),
    "final LangChain decisions": (
        ["a", "b", "c", "f"],
        {"human_review": "final", "max_iterations": 1},
        [LC_REJECT, LC_EDIT],
    ),
    "final LangChain approve": (
        ["a", "b", "c"],
        {"human_review": "final", "max_iterations": 1},
        [{"decisions": [{"type": "approve"}]}],
    ),
    "final LangChain reject": (
        ["a", "b", "c"],
        {"human_review": "final", "max_iterations": 1},
        [{"decisions": [{"type": "reject"}]}],
    ),
    "every_round sample continue": (
        ["a", "b", "c", "f"],
        {"human_review": "every_round", "strategy": "sample", "max_iterations": 2},
        [{"action": "continue"}] * 3,
    ),
    "every_round explore continue, revise": (
        ["a", "b", "d", "c", "f", "f"],
        {"human_review": "every_round", "strategy": "explore", "max_iterations": 3},
        [
            {"action": "continue"},
            REVISE,
            {"action": "continue"},
            {"action": "continue"},
        ],
    ),
    "every_round chain approve": (
        ["a", "b", "c"],
        {"human_review": "every_round", "strategy": "chain"},
        [{"action": "continue"}, {"action": "approve"}],
    ),
    "every_round edit": (
        ["a", "b", "c"],
        {"human_review": "every_round", "strategy": "chain"},
        [{"action": "continue"}, {"action": "edit", "response": "E"}],
    ),
    "every_round reject": (
        ["a", "b", "c"],
        {"human_review": "every_round", "strategy": "sample"},
        [{"action": "continue"}, {"action": "reject"}],
    ),
    "pairwise": (
        ["b", "c", "d", "f"],
        {
            "select": "pairwise",
            "comparer": compare_by_score,
            "strategy": "explore",
            "max_iterations": 3,
            "patience": None,
        },
        [],
    ),
    "pairwise, final revise, reject": (
        ["b", "c", "f", "c"],
        {
            "select": "pairwise",
            "comparer": compare_by_score,
            "strategy": "chain",
            "human_review": "final",
            "max_iterations": 1,
        },
        [REVISE, {"action": "reject"}],
    ),
    "pairwise budget note": (
        ["b", "c", "d", "f"],
        {
            "select": "pairwise",
            "comparer": compare_by_score,
            "strategy": "sample",
            "max_iterations": 2,
            "patience": None,
            "budget": Budget(max_calls=7),
        },
        [],
    ),
}


@pytest.mark.parametrize("case", list(REVIEWED))
def test_graph_and_agent_agree_under_review_and_selection(case: str) -> None:
    answers, options, reviews = REVIEWED[case]
    graph = reviewed_graph(answers, options)
    seen_by_graph = answered(
        graph.invoke, {"task": TASK}, reviews, {"configurable": {"thread_id": "g"}}
    )
    from_graph = RefineResult.from_state(
        graph.get_state({"configurable": {"thread_id": "g"}}).values
    )
    agent, middleware = reviewed_agent(answers, options)
    config = {"configurable": {"thread_id": "a"}}
    seen_by_agent = answered(agent.invoke, {"messages": [HumanMessage(TASK)]}, reviews, config)
    from_agent = middleware.result(agent.get_state(config).values)
    assert shape(from_agent) == shape(from_graph)
    assert from_agent.metadata.get("selection") == from_graph.metadata.get("selection")
    assert [reviewed_shape(p) for p in seen_by_agent] == [reviewed_shape(p) for p in seen_by_graph]
    assert len(seen_by_graph) == len(reviews)


async def test_graph_and_agent_agree_under_review_async() -> None:
    answers, options, reviews = REVIEWED["every_round explore continue, revise"]
    graph = reviewed_graph(answers, options)
    config: Any = {"configurable": {"thread_id": "g"}}
    shown: list[Any] = []
    out = await graph.ainvoke({"task": TASK}, config)
    agent, middleware = reviewed_agent(answers, options)
    agent_config: Any = {"configurable": {"thread_id": "a"}}
    agent_out = await agent.ainvoke({"messages": [HumanMessage(TASK)]}, agent_config)
    for answer in reviews:
        shown.append(
            (
                out["__interrupt__"][0].value["attempt"],
                agent_out["__interrupt__"][0].value["attempt"],
            )
        )
        out = await graph.ainvoke(Command(resume=answer), config)
        agent_out = await agent.ainvoke(Command(resume=answer), agent_config)
    from_graph = RefineResult.from_state((await graph.aget_state(config)).values)
    from_agent = middleware.result((await agent.aget_state(agent_config)).values)
    assert shape(from_agent) == shape(from_graph)
    assert all(g == a for g, a in shown)


def test_the_reported_divergences_are_gone() -> None:
    """Every-round review with `continue` keeps the strategy's moves; a revise is a "revise"."""
    answers, options, reviews = REVIEWED["every_round sample continue"]
    agent, middleware = reviewed_agent(answers, options)
    config = {"configurable": {"thread_id": "a"}}
    answered(agent.invoke, {"messages": [HumanMessage(TASK)]}, reviews, config)
    moves = [a.move for a in middleware.result(agent.get_state(config).values).attempts]
    assert moves == ["sample", "sample", "sample"]

    answers, options, reviews = REVIEWED["final revise, approve"]
    agent, middleware = reviewed_agent(answers, options)
    answered(agent.invoke, {"messages": [HumanMessage(TASK)]}, reviews, config)
    result = middleware.result(agent.get_state(config).values)
    assert [a.move for a in result.attempts] == ["sample", "refine", "revise"]
    assert result.attempts[2].parent == 0  # the reviewed attempt: the best, not the latest


@pytest.mark.parametrize("review", [None, "final", "every_round"])
def test_a_budget_raise_skips_the_review_and_raises_the_same_result(review: str | None) -> None:
    from langgraph_refine import BudgetExhaustedError

    answers = ["a", "b", "c", "f"]
    options: dict[str, Any] = {
        "strategy": "chain",
        "budget": Budget(max_calls=3),
        "on_budget_exhausted": "raise",
        "patience": None,
        "human_review": review,
    }
    graph = reviewed_graph(answers, options)
    with pytest.raises(BudgetExhaustedError) as from_graph:
        answered(graph.invoke, {"task": TASK}, [{"action": "continue"}] * 3, CONFIG)
    agent, _ = reviewed_agent(answers, options)
    with pytest.raises(BudgetExhaustedError) as from_agent:
        answered(
            agent.invoke, {"messages": [HumanMessage(TASK)]}, [{"action": "continue"}] * 3, CONFIG
        )
    assert from_graph.value.result is not None and from_agent.value.result is not None
    assert shape(from_agent.value.result) == shape(from_graph.value.result)
    assert str(from_agent.value) == str(from_graph.value)


# -- models resolved once ----------------------------------------------------------------


def test_the_graph_and_the_agent_resolve_judge_and_comparer_by_one_rule() -> None:
    from langgraph_refine._loop._resolve import loop_models
    from langgraph_refine.evaluators import LLMJudge, combine, llm_judge, panel
    from tests.fakes import ScriptedChatModel

    writer, judge_model = AgentModel(replies=["x"]), ScriptedChatModel(replies=["y"])

    def compared_with(models: Any) -> Any:
        return getattr(models.comparer, "model", None)

    for evaluator in (
        panel(llm_judge(judge_model), review_judge),
        combine(review_judge, judge_model),
    ):
        graph = loop_models(writer, evaluator)
        agent = loop_models(None, evaluator, own_model=True, option="models")
        # An LLM judge inside a panel or combine compares, in both.
        assert compared_with(graph) is judge_model and compared_with(agent) is judge_model

    # Without an evaluator: the graph's generator judges and compares; the agent's own
    # model does, once it runs (nothing resolved yet), unless judge_model names one.
    graph = loop_models(writer, None)
    assert isinstance(graph.evaluator, LLMJudge) and graph.evaluator.model is writer
    assert compared_with(graph) is writer and graph.judge_model is writer
    agent = loop_models(None, None, own_model=True)
    assert (agent.evaluator, agent.comparer, agent.judge_model) == (None, None, None)
    for models in (
        loop_models(writer, None, judge_model=judge_model),
        loop_models(None, None, judge_model=judge_model, own_model=True),
    ):
        assert isinstance(models.evaluator, LLMJudge) and models.evaluator.model is judge_model
        assert compared_with(models) is judge_model

    # A callable evaluator: the graph compares with its generator, the agent with its own.
    assert compared_with(loop_models(writer, review_judge)) is writer
    assert loop_models(None, review_judge, own_model=True).comparer is None
    with pytest.raises(ValueError, match="judge_model is only used when evaluator is None"):
        loop_models(None, review_judge, judge_model=judge_model, own_model=True)


def test_a_ladder_naming_one_model_twice_is_refused_alike() -> None:
    from tests.fakes import ScriptedChatModel

    twice = [ScriptedChatModel(replies=["a"]), ScriptedChatModel(replies=["b"])]
    with pytest.raises(ValueError, match=r"generator\[0\] and generator\[1\] .* more than once"):
        create_refine_graph(twice, review_judge)
    with pytest.raises(ValueError, match=r"models\[0\] and models\[1\] .* more than once"):
        RefineMiddleware(review_judge, models=twice)


def test_a_reject_under_pairwise_selection_keeps_the_score_choice_in_both() -> None:
    from langgraph_refine._decisions._end import REJECTED_NOTE

    answers, options, reviews = REVIEWED["pairwise, final revise, reject"]
    graph = reviewed_graph(answers, options)
    answered(graph.invoke, {"task": TASK}, reviews, CONFIG)
    from_graph = RefineResult.from_state(graph.get_state(CONFIG).values)
    agent, middleware = reviewed_agent(answers, options)
    answered(agent.invoke, {"messages": [HumanMessage(TASK)]}, reviews, CONFIG)
    from_agent = middleware.result(agent.get_state(CONFIG).values)
    for result in (from_graph, from_agent):
        selection = result.metadata["selection"]
        assert (selection["method"], selection["note"]) == ("score", REJECTED_NOTE)
        assert selection["comparisons"] == []  # the reviewer's stop is not overruled
        assert result.stop_reason == "rejected"
