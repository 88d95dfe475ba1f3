"""Reasoning kept apart: a model's thinking is kept on `Attempt.reasoning`, out of `response`.

It never reaches an evaluator (the LLM judge included) nor a refinement prompt, whether
the model wrote it as `<think>` blocks in the content, in a `reasoning_content` field,
or as reasoning content blocks.
"""

from __future__ import annotations

import doctest
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from langgraph_refine import _reasoning, refine
from langgraph_refine._reasoning import split_reasoning, split_think_tags
from tests.fakes import ScriptedChatModel, judge_reply

TASK = "What is the capital of France?"
SECRET = "SECRET-CHAIN-OF-THOUGHT"


class ReasoningModel(ScriptedChatModel):
    """Replies `answer N` with its reasoning put where `form` says."""

    form: str = "think"

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        message = super()._next(messages)
        n = len(self.calls)
        thought, answer = f"{SECRET} {n}", f"Paris, answer {n}."
        if self.form == "think":
            return message.model_copy(update={"content": f"<think>{thought}</think>\n{answer}"})
        if self.form == "additional_kwargs":
            kwargs = {"reasoning_content": thought}
            return message.model_copy(update={"content": answer, "additional_kwargs": kwargs})
        if self.form == "response_metadata":
            meta = {"reasoning_content": thought}
            return message.model_copy(update={"content": answer, "response_metadata": meta})
        blocks = [{"type": "reasoning", "reasoning": thought}, {"type": "text", "text": answer}]
        return message.model_copy(update={"content": blocks})


FORMS = ["think", "additional_kwargs", "response_metadata", "blocks"]


@pytest.mark.parametrize("form", FORMS)
def test_reasoning_never_reaches_an_evaluator_or_a_refinement_prompt(form: str) -> None:
    model = ReasoningModel(form=form)
    seen: list[str] = []

    def evaluate(response: str, state: Any) -> float:
        seen.append(response)
        return 0.2

    result = refine(model, TASK, evaluate, max_iterations=2, patience=None, strategy="chain")
    assert seen == ["Paris, answer 1.", "Paris, answer 2.", "Paris, answer 3."]
    assert [a.reasoning for a in result.attempts] == [f"{SECRET} {n}" for n in (1, 2, 3)]
    assert [a.response for a in result.attempts] == seen
    prompts = [str(m.content) for call in model.calls for m in call]
    assert any("Paris, answer 1." in p for p in prompts)  # the answer is refined...
    assert not any(SECRET in p for p in prompts)  # ...its reasoning never shown


@pytest.mark.parametrize("form", ["think", "additional_kwargs"])
def test_the_llm_judge_never_sees_the_reasoning(form: str) -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.2), judge_reply(1.0, "PASS", "good")])
    result = refine(ReasoningModel(form=form), TASK, judge_model=judge, max_iterations=1)
    assert len(judge.calls) == 2
    judged = [str(m.content) for call in judge.calls for m in call]
    assert any("Paris, answer 1." in p for p in judged)
    assert not any(SECRET in p for p in judged)
    assert result.attempts[0].reasoning == f"{SECRET} 1"


def test_a_callable_generator_s_think_tags_are_kept_apart_too() -> None:
    result = refine(lambda s: f"<think>{SECRET}</think>Paris.", TASK, lambda r, s: 1.0)
    assert (result.value, result.attempts[0].reasoning) == ("Paris.", SECRET)


def test_reasoning_before_a_typed_reply_does_not_break_the_object() -> None:
    class City(BaseModel):
        name: str

    model = ScriptedChatModel(replies=[f'<think>{SECRET}</think>{{"name": "Paris"}}'])
    result = refine(model, TASK, lambda r, s: 1.0, output_schema=City, max_iterations=0)
    assert result.output == City(name="Paris")
    assert result.attempts[0].reasoning == SECRET
    assert SECRET not in result.value


def test_round_events_carry_the_reasoning_for_display() -> None:
    from langgraph_refine import create_refine_graph

    graph = create_refine_graph(ReasoningModel(), lambda r, s: 1.0).compile()
    rounds = [e for e in graph.stream({"task": TASK}, stream_mode="custom") if e["type"] == "round"]
    assert rounds[0]["reasoning"] == f"{SECRET} 1"
    assert SECRET not in rounds[0]["response"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no reasoning here", ("no reasoning here", None)),
        ("<think>a</think>b<think>c</think>d", ("bd", "a\n\nc")),
        ("<THINK>\nplan\n</THINK>\n\nanswer", ("answer", "plan")),
        ("opened in the prompt</think>answer", ("answer", "opened in the prompt")),
        ("answer<think>cut off mid-thought", ("answer", "cut off mid-thought")),
        ("<thinking>x</thinking>y", ("y", "x")),
    ],
)
def test_think_tags_in_every_shape(text: str, expected: tuple[str, str | None]) -> None:
    assert split_think_tags(text) == expected


def test_every_reasoning_place_is_gathered() -> None:
    message = AIMessage(
        [{"type": "thinking", "thinking": "blocks"}, {"type": "text", "text": "<think>t</think>A"}],
        additional_kwargs={"reasoning_content": "field"},
    )
    assert split_reasoning(message) == ("A", "field\n\nblocks\n\nt")
    assert split_reasoning(AIMessage("plain")) == ("plain", None)


def test_the_module_examples_run() -> None:
    failures, tried = doctest.testmod(_reasoning)
    assert failures == 0 and tried > 0


def test_the_middleware_judges_the_agent_s_answer_without_its_reasoning() -> None:
    from langchain.agents import create_agent

    from langgraph_refine import RefineMiddleware
    from tests.fakes import AgentModel

    seen: list[str] = []

    def evaluate(response: str, state: Any) -> float:
        seen.append(response)
        return 1.0

    middleware = RefineMiddleware(evaluate)
    agent = create_agent(
        AgentModel(replies=[f"<think>{SECRET}</think>Paris."]), tools=[], middleware=[middleware]
    )
    out = agent.invoke({"messages": [("human", TASK)]})
    assert seen == ["Paris."]
    assert middleware.result(out).attempts[0].reasoning == SECRET
