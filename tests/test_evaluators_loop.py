"""Evaluators inside full refine loops: their feedback reaches the generator's prompt."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import Budget, arefine, create_refine_graph, evaluators, refine
from tests.fakes import ScriptedChatModel, judge_reply

FIB_TESTS = """
def test_small():
    assert fib(1) == 1

def test_ten():
    assert fib(10) == 55
"""
BUGGY = "```python\ndef fib(n):\n    return n\n```"
FIXED = (
    "```python\ndef fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
    "        a, b = b, a + b\n    return a\n```"
)


def test_word_count_feedback_reaches_the_generator_through_the_graph() -> None:
    model = ScriptedChatModel(replies=["Owls hunt.", "Owls hunt small mammals at night, silently."])
    graph = create_refine_graph(model, evaluators.word_count(5, 8)).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    final = graph.invoke({"task": "Describe owls in 5 to 8 words."}, config)
    assert final["response"] == "Owls hunt small mammals at night, silently."
    refinement_prompt = model.prompts[1]
    assert "Describe owls in 5 to 8 words." in refinement_prompt
    assert "The response has 2 words, but it must have 5-8 words" in refinement_prompt
    assert "add at least 3 words." in refinement_prompt
    attempts = graph.get_state(config).values["attempts"]
    assert [a.evaluation.score for a in attempts] == [0.4, 1.0]


def test_contains_all_names_missing_words_to_the_generator() -> None:
    model = ScriptedChatModel(replies=["A river.", "A river, a lamp and an owl."])
    result = refine(
        model, "Use river, lamp, owl.", evaluators.contains_all(["river", "lamp", "owl"])
    )
    assert result.score_history == pytest.approx([1 / 3, 1.0])
    assert 'Missing 2 of 3 required words: "lamp", "owl"' in model.prompts[1]
    assert result.stop_reason == "target_reached"


def test_python_tests_failures_reach_the_generator() -> None:
    model = ScriptedChatModel(replies=[BUGGY, FIXED])
    result = refine(model, "Write fib(n).", evaluators.python_tests(FIB_TESTS))
    assert result.score_history == [0.5, 1.0]
    assert result.value == FIXED
    prompt = model.prompts[1]
    assert "1 of 2 tests failed" in prompt
    assert "test_ten: AssertionError: assert fib(10) == 55, where fib(10) is 10" in prompt


def test_json_schema_paths_reach_the_generator() -> None:
    schema = {
        "type": "object",
        "required": ["name", "age"],
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    }
    model = ScriptedChatModel(
        replies=['{"name": "Ada", "age": "36"}', '{"name": "Ada", "age": 36}']
    )
    result = refine(model, "Extract the person.", evaluators.json_schema(schema))
    assert result.score_history == [0.0, 1.0]
    assert json.loads(result.value) == {"name": "Ada", "age": 36}
    assert "at $.age: '36' is not of type 'integer'" in model.prompts[1]


def test_llm_judge_feedback_reaches_the_generator_and_counts_two_calls_per_round() -> None:
    model = ScriptedChatModel(
        replies=[
            "draft one",
            judge_reply(0.3, feedback="Mention the owl's silent flight."),
            "draft two",
            judge_reply(0.95, "PASS", "Good."),
        ]
    )
    result = refine(model, "Write about owls.", evaluators.llm_judge(model, criteria="accurate"))
    assert result.stop_reason == "passed"
    assert result.usage.calls == 4
    assert "Mention the owl's silent flight." in model.prompts[2]
    assert "<response_to_rate>\ndraft one\n</response_to_rate>" in model.prompts[1]


def test_combined_feedback_is_labelled_in_the_prompt() -> None:
    model = ScriptedChatModel(replies=["An owl.", "An owl sat by a lamp near the river."])
    ev = evaluators.combine(
        evaluators.word_count(5, 12), evaluators.contains_all(["owl", "lamp", "river"])
    )
    result = refine(model, "One sentence with owl, lamp, river.", ev)
    assert result.score == 1.0
    prompt = model.prompts[1]
    assert "[word_count] score 0.40: The response has 2 words" in prompt
    assert '[contains_all] score 0.33: Missing 2 of 3 required words: "lamp", "river"' in prompt


def test_a_list_of_ready_evaluators_is_combined() -> None:
    model = ScriptedChatModel(replies=["An owl."])
    result = refine(
        model,
        "task",
        [evaluators.word_count(1, 5), evaluators.matches_regex(r"lamp")],
        max_iterations=0,
    )
    assert result.score == 0.5
    assert "[matches_regex] score 0.00" in result.feedback


def test_deterministic_evaluators_cost_no_model_calls() -> None:
    model = ScriptedChatModel(replies=["a", "a b", "a b c"])
    result = refine(
        model,
        "task",
        evaluators.word_count(3, 4),
        budget=Budget(max_calls=3),
        patience=None,
        max_iterations=5,
    )
    assert result.usage.calls == 3
    assert result.score == 1.0


async def test_async_loop_with_python_tests_and_an_async_reward() -> None:
    async def brevity(task: str, response: str) -> float:
        return -len(response)

    model = ScriptedChatModel(replies=[BUGGY, FIXED])
    ev = evaluators.combine(
        evaluators.python_tests(FIB_TESTS),
        evaluators.reward_model(brevity, low=-500, high=0),
        weights=[9, 1],
    )
    result = await arefine(model, "Write fib(n).", ev, target_score=0.95)
    assert result.value == FIXED
    assert result.attempts[0].evaluation is not None
    assert result.attempts[0].evaluation.details["scores"]["python_tests"] == 0.5
    assert "[python_tests] score 0.50" in model.prompts[1]
    assert "[brevity] score" in model.prompts[1]
