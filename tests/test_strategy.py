"""Search strategies (`chain`, `explore`, `sample`), `Attempt.parent`, and prompt forms."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine import Attempt, Evaluation, create_refine_graph, refine
from langgraph_refine._strategy import choose_next
from tests.fakes import ScriptedChatModel, scores


def evaluated(index: int, score: float, parent: int | None = None) -> Attempt:
    return Attempt(
        index=index,
        response=f"r{index}",
        parent=parent,
        evaluation=Evaluation(score=score, feedback=f"fb{index}"),
    )


def drafts(n: int = 6) -> ScriptedChatModel:
    return ScriptedChatModel(replies=[f"draft {i}" for i in range(n)])


def run(strategy: str, values: tuple[float, ...], **options: Any) -> Any:
    model = drafts()
    result = refine(
        model,
        "Write a thing.",
        scores(*values),
        strategy=strategy,
        max_iterations=len(values) - 1,
        patience=None,
        target_score=1.0,
        **options,
    )
    return model, result


def test_chain_refines_the_latest_attempt_every_round() -> None:
    model, result = run("chain", (0.2, 0.5, 0.3, 0.4), prompt_form="single")
    assert [a.parent for a in result.attempts] == [None, 0, 1, 2]
    for k in range(1, 4):
        assert f"draft {k - 1}" in model.prompts[k]  # the refined attempt is shown


def test_sample_sends_the_task_alone_every_round() -> None:
    model, result = run("sample", (0.2, 0.5, 0.3, 0.4))
    assert [a.parent for a in result.attempts] == [None] * 4
    assert all(len(call) == 1 and call[0].content == "Write a thing." for call in model.calls)


def test_explore_refines_attempt_0_then_the_best_after_an_improvement() -> None:
    _, result = run("explore", (0.2, 0.5, 0.6))
    assert [a.parent for a in result.attempts] == [None, 0, 1]


def test_explore_after_a_round_that_did_not_help_refines_an_earlier_attempt_or_samples() -> None:
    attempts = [evaluated(0, 0.4), evaluated(1, 0.3, parent=0)]
    choices = {choose_next("explore", attempts, f"task {k}") for k in range(60)}
    assert None in choices  # sometimes a fresh sample
    assert choices & {0, 1}  # sometimes a refinement of an earlier attempt
    # Deterministic for the same task and round (a replayed round chooses the same).
    assert choose_next("explore", attempts, "t") == choose_next("explore", attempts, "t")


def test_explore_turns_away_from_an_attempt_refined_without_success() -> None:
    stuck = [evaluated(0, 0.5)] + [evaluated(k, 0.1, parent=0) for k in range(1, 6)]
    picks = [choose_next("explore", stuck, f"t{k}") for k in range(200)]
    assert picks.count(0) < 100  # refined five times without success: rarely chosen again


def test_choose_next_rules() -> None:
    attempts = [evaluated(0, 0.4), evaluated(1, 0.6, parent=0)]
    assert choose_next("chain", attempts, "t") == 1
    assert choose_next("sample", attempts, "t") is None
    assert choose_next("explore", attempts, "t") == 1  # it raised the best: refine the best
    assert choose_next("explore", attempts[:1], "t") == 0  # round 1 refines attempt 0
    assert choose_next("chain", [], "t") is None


def test_round_events_carry_the_parent() -> None:
    graph = create_refine_graph(
        drafts(), scores(0.2, 0.5), strategy="chain", max_iterations=1, patience=None
    ).compile()
    events = [e for e in graph.stream({"task": "t"}, stream_mode="custom") if e["type"] == "round"]
    assert [e["parent"] for e in events] == [None, 0]


@pytest.mark.parametrize("strategy", ["chain", "explore", "sample"])
def test_a_reviewer_revise_refines_the_reviewed_attempt(strategy: str) -> None:
    model = drafts()
    graph = create_refine_graph(
        model,
        scores(0.6, 0.2, 0.1),
        strategy=strategy,
        human_review="final",
        max_iterations=1,
        patience=None,
        prompt_form="single",
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": strategy}}
    graph.invoke({"task": "t"}, config)
    reviewed = graph.get_state(config).interrupts[0].value["attempt"]
    assert reviewed == 0  # the best
    graph.invoke(Command(resume={"action": "revise", "feedback": "add a title"}), config)
    attempts = graph.get_state(config).values["attempts"]
    assert attempts[-1].parent == reviewed
    assert "add a title" in model.prompts[-1] and "draft 0" in model.prompts[-1]


def test_messages_form_is_a_conversation() -> None:
    model = drafts()
    refine(
        model,
        "Write a thing.",
        lambda r, s: Evaluation(score=0.2, feedback="too short"),
        prompt_form="messages",
        strategy="chain",
        max_iterations=1,
        patience=None,
    )
    second = model.calls[1]
    assert [type(m) for m in second] == [HumanMessage, AIMessage, HumanMessage]
    assert second[0].content == "Write a thing."
    assert second[1].content == "draft 0"
    assert "too short" in str(second[2].content)


def test_single_form_is_one_message_and_callables_still_get_the_state() -> None:
    model = drafts()
    refine(model, "Task.", scores(0.2, 0.3), prompt_form="single", max_iterations=1)
    assert len(model.calls[1]) == 1 and "draft 0" in str(model.calls[1][0].content)
    seen: list[Any] = []

    def generator(state: Any) -> str:
        seen.append(state)
        return "x"

    refine(generator, "Task.", scores(0.2, 0.3), prompt_form="messages", max_iterations=1)
    assert seen[1]["task"] == "Task." and len(seen[1]["attempts"]) == 1


@pytest.mark.parametrize("form", ["messages", "single"])
def test_long_attempts_are_cut_in_the_next_prompt(form: str) -> None:
    model = ScriptedChatModel(replies=["x" * 20_000, "short"])
    refine(model, "T.", scores(0.1, 0.2), prompt_form=form, max_iterations=1, patience=None)
    sent = "\n".join(str(m.content) for m in model.calls[1])
    assert "x" * 8000 in sent and "x" * 8001 not in sent  # the default max_attempt_chars
    assert "12000 more characters not shown" in sent
