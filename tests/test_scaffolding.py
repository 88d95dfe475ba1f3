"""Nothing of the loop in the answer: a reply copying the loop's prompt is cleaned of it.

Headings, `<answer>` tags, score and feedback lines and quoted earlier attempts come out
before the reply is evaluated, kept or returned; a reply made only of them is FAIL with
feedback that says so, and its evaluator is not called. Graph and agent, sync and async.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage

from langgraph_refine import Evaluation, RefineMiddleware, arefine, refine
from langgraph_refine._decisions._prompts import (
    SCAFFOLDING_ONLY_FEEDBACK,
    scaffolding,
    without_scaffolding,
)
from langgraph_refine.evaluators import combine, contains_all, word_count
from tests.fakes import AgentModel, ScriptedChatModel

TASK = "Write one line about rain on a tin roof."
FIRST = "Rain taps.\nThe roof hums."


def echo_then(answer: str) -> Any:
    """A reply that copies the whole prompt back, then answers."""

    def reply(messages: list[BaseMessage]) -> str:
        if len(messages) == 1:  # the single form: all after the task
            copied = str(messages[0].content).split("# Your earlier attempts", 1)[1]
        else:  # the conversation: the loop's own turns after the task
            copied = "\n".join(str(m.content) for m in messages[1:] if isinstance(m, HumanMessage))
        return f"{copied}\n\n{answer}" if answer else copied

    return reply


class Grader:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, response: str, state: Any) -> Evaluation:
        self.seen.append(response)
        score = 0.95 if "tin" in response else 0.4
        return Evaluation(score=score, feedback="[contains_all] score 0.50: Missing the word tin.")


def test_a_reply_copying_the_refinement_prompt_keeps_only_its_answer() -> None:
    grader = Grader()
    for form in ("messages", "single"):
        generator = ScriptedChatModel(replies=[FIRST, echo_then("Rain drums the tin roof.")])
        result = refine(generator, TASK, grader, max_iterations=1, prompt_form=form)
        assert result.attempts[1].response == "Rain drums the tin roof.", form
        assert grader.seen[-1] == "Rain drums the tin roof."
        assert result.value == "Rain drums the tin roof."


def test_an_earlier_answers_own_lines_stay() -> None:
    generator = ScriptedChatModel(replies=[FIRST, echo_then(FIRST + "\nOn the tin roof.")])
    result = refine(generator, TASK, Grader(), max_iterations=1, prompt_form="single")
    assert result.attempts[1].response == "Rain taps.\nThe roof hums.\nOn the tin roof."


def test_a_reply_of_nothing_but_the_prompt_is_fail_and_not_judged() -> None:
    grader = Grader()
    generator = ScriptedChatModel(replies=[FIRST, echo_then("")])
    result = refine(generator, TASK, grader, max_iterations=1, patience=None)
    second = result.attempts[1]
    assert second.evaluation is not None
    assert (second.evaluation.verdict, second.score) == ("FAIL", 0.0)
    assert second.evaluation.feedback == SCAFFOLDING_ONLY_FEEDBACK
    assert grader.seen == [FIRST]  # the evaluator never saw the copied prompt
    assert result.value == FIRST


async def test_async_alike_with_a_real_combined_check() -> None:
    check = combine(word_count(3, 12), contains_all(["tin"]))
    generator = ScriptedChatModel(replies=[FIRST, echo_then("Rain drums the tin roof.")])
    result = await arefine(generator, TASK, check, max_iterations=1)
    assert result.value == "Rain drums the tin roof."
    assert "[contains_all]" not in result.value and "</answer>" not in result.value


def test_the_agent_cleans_its_answers_of_the_loops_turns_too() -> None:
    def copies_feedback(messages: list[BaseMessage]) -> str:
        return f"{messages[-1].content}\nRain drums the tin roof."

    middleware = RefineMiddleware(Grader(), max_iterations=1)
    agent = create_agent(
        AgentModel(replies=[FIRST, copies_feedback]), tools=[], middleware=[middleware]
    )
    result = middleware.result(agent.invoke({"messages": [HumanMessage(TASK)]}))
    assert result.attempts[1].response == "Rain drums the tin roof."


def test_a_line_of_the_task_is_never_removed() -> None:
    lines = scaffolding(["# Task\nWrite one line.\n# What to do\nImprove it."], ["Write one line."])
    assert lines == frozenset({"# Task", "# What to do", "Improve it."})
    assert without_scaffolding("# Task\nWrite one line.", lines) == "Write one line."


async def test_the_agent_async_alike() -> None:
    def copies_feedback(messages: list[BaseMessage]) -> str:
        return f"{messages[-1].content}"

    middleware = RefineMiddleware(Grader(), max_iterations=1, patience=None)
    agent = create_agent(
        AgentModel(replies=[FIRST, copies_feedback]), tools=[], middleware=[middleware]
    )
    result = middleware.result(await agent.ainvoke({"messages": [HumanMessage(TASK)]}))
    second = result.attempts[1].evaluation
    assert second is not None and second.feedback == SCAFFOLDING_ONLY_FEEDBACK
    assert result.value == FIRST
