"""The accepted forms of `generator` and `evaluator` (contract: create_refine_graph)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from langgraph_refine import Evaluation, create_refine_graph, refine
from tests.fakes import ScriptedChatModel, judge_reply, scores


def generator_of(builder: Any) -> Any:
    return builder.nodes["generate"].runnable.generator


@pytest.mark.parametrize(
    ("spec", "model_name"), [("openai:gpt-test", "gpt-test"), ("plain-name", "plain-name")]
)
def test_model_string_is_resolved_with_init_chat_model(
    monkeypatch: pytest.MonkeyPatch, spec: str, model_name: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    generator = generator_of(create_refine_graph(spec, scores(1.0)))
    assert isinstance(generator, ChatOpenAI)
    assert generator.model_name == model_name
    assert generator.max_retries == 0  # the loop's retry policy is the only one


def test_evaluator_list_is_combined_with_equal_weights() -> None:
    result = refine(lambda s: "x", "t", [lambda r, s: 1.0, lambda r, s: 0.5], max_iterations=0)
    evaluation = result.attempts[0].evaluation
    assert evaluation is not None
    assert evaluation.score == pytest.approx(0.75)
    assert [p["weight"] for p in evaluation.details["parts"]] == [1.0, 1.0]


def test_chat_model_evaluator_is_used_as_judge() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.95, "PASS", "fine")])
    result = refine(lambda s: "answer", "t", judge)
    assert result.stop_reason == "passed"
    assert len(judge.calls) == 1
    assert "<response_to_rate>" in str(judge.calls[0][-1].content)
    assert result.usage.calls == 2  # generator + judge


def test_default_judge_uses_judge_model() -> None:
    generator = ScriptedChatModel(replies=["answer"])
    judge = ScriptedChatModel(replies=[judge_reply(0.95, "PASS")])
    result = refine(generator, "t", judge_model=judge)
    assert result.stop_reason == "passed"
    assert len(generator.calls) == 1 and len(judge.calls) == 1


def test_default_judge_falls_back_to_the_generator_model() -> None:
    model = ScriptedChatModel(replies=["answer", judge_reply(0.95, "PASS")])
    result = refine(model, "t")
    assert result.stop_reason == "passed"
    assert len(model.calls) == 2
    assert "<response_to_rate>" in str(model.calls[1][-1].content)


def test_judge_model_with_an_explicit_evaluator_is_rejected() -> None:
    with pytest.raises(ValueError, match="judge_model is only used when evaluator is None"):
        create_refine_graph(lambda s: "x", scores(1.0), judge_model=ScriptedChatModel())


def test_evaluation_returned_by_callable_is_kept_whole() -> None:
    evaluation = Evaluation(score=0.4, feedback="more", verdict="FAIL", details={"a": 1})
    result = refine(lambda s: "x", "t", lambda r, s: evaluation, max_iterations=0)
    assert result.attempts[0].evaluation == evaluation
