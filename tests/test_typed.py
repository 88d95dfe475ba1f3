"""Typed responses (`output_schema=`): the loop refines an object, not only a string.

Scripted models stand in for the provider here; the recorded example
(`examples/structured_extraction.py`, tests/test_examples.py) runs the same path on the
real local model with llama.cpp's grammar-enforced json_schema.
"""

from __future__ import annotations

import doctest
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel, Field

from langgraph_refine import (
    Attempt,
    Evaluation,
    RefineResult,
    arefine,
    create_refine_graph,
    evaluators,
    refine,
)
from langgraph_refine import _typed as typed_module
from langgraph_refine._loop._driver import strict_serde
from langgraph_refine._result import RESULT_KEYS
from tests.fakes import AgentModel, ScriptedChatModel, judge_reply, scores

TASK = "Extract the person: Ada Lovelace, 36, mathematician."


class Person(BaseModel):
    name: str
    age: int = Field(ge=0, le=150)


SCHEMA: dict[str, Any] = {
    "title": "Person",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
GOOD = '{"name": "Ada Lovelace", "age": 36}'


class RecordingModel(ScriptedChatModel):
    """Records the arguments `with_structured_output` was called with."""

    structured_calls: list[dict[str, Any]] = Field(default_factory=list)

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, method: str = "json_schema", **kwargs: Any
    ) -> Runnable[Any, Any]:
        self.structured_calls.append(
            {"schema": schema, "include_raw": include_raw, "method": method}
        )
        return super().with_structured_output(schema, include_raw=include_raw, method=method)


def counting(score: float = 1.0) -> Any:
    seen: list[Any] = []

    def evaluate(response: str, state: Any) -> float:
        seen.append(response)
        return score

    evaluate.seen = seen  # type: ignore[attr-defined]
    return evaluate


# -- a pydantic model --------------------------------------------------------------------


def test_a_pydantic_model_round_trips_through_structured_output() -> None:
    model = RecordingModel(replies=["not json at all", '{"name": "Ada Lovelace"}', GOOD])
    evaluate = counting(1.0)
    result = refine(model, TASK, evaluate, output_schema=Person, max_iterations=3, patience=None)

    # The provider's structured output, json_schema method, raw reply kept.
    assert model.structured_calls[0] == {
        "schema": Person.model_json_schema(),  # as a JSON schema: the loop validates
        "include_raw": True,
        "method": "json_schema",
    }
    first, second, third = result.attempts
    # Invalid replies are attempts, FAIL with score 0 and the errors as feedback...
    assert first.response == "not json at all" and first.output is None
    assert first.evaluation is not None
    assert (first.evaluation.verdict, first.evaluation.score) == ("FAIL", 0.0)
    assert "not valid JSON" in first.evaluation.feedback
    assert second.output is None
    assert second.evaluation is not None
    assert "- at $.age: Field required" in second.evaluation.feedback
    assert second.evaluation.details["output_errors"] == ["at $.age: Field required"]
    # ...and the evaluator is never called on them.
    assert evaluate.seen == [GOOD]
    # The valid one: JSON text, plain JSON output, typed result.
    assert third.response == GOOD
    assert third.output == {"name": "Ada Lovelace", "age": 36}
    assert isinstance(result.output, Person)
    assert result.output == Person(name="Ada Lovelace", age=36)
    assert result.value == GOOD
    assert result.stop_reason == "target_reached"


def test_the_next_round_sees_the_reply_and_its_validation_errors() -> None:
    model = ScriptedChatModel(replies=['{"name": "Ada", "age": -4}', GOOD])
    refine(model, TASK, counting(), output_schema=Person, max_iterations=1, patience=None)
    first_prompt, refinement = (str(call[-1].content) for call in model.calls)
    # Every prompt ends with the schema, so the model knows the object's shape.
    assert '"required":["name","age"]' in first_prompt
    assert "matches this JSON Schema" in refinement
    # The refinement shows the object as JSON and the validation errors.
    assert '{"name": "Ada", "age": -4}' in refinement
    assert "- at $.age: Input should be greater than or equal to 0" in refinement


def test_a_provider_without_structured_output_is_asked_through_the_prompt() -> None:
    model = ScriptedChatModel(replies=["```json\n" + GOOD + "\n```"], structured=False)
    result = refine(model, TASK, counting(), output_schema=Person, max_iterations=0)
    assert "matches this JSON Schema" in str(model.calls[0][-1].content)
    assert result.output == Person(name="Ada Lovelace", age=36)  # fenced JSON is read too
    assert result.attempts[0].response == GOOD


# -- a JSON schema dict ------------------------------------------------------------------


def test_a_json_schema_dict_round_trips() -> None:
    model = RecordingModel(replies=['{"name": "Ada", "age": "old"}', GOOD])
    result = refine(model, TASK, counting(), output_schema=SCHEMA, max_iterations=2)
    assert model.structured_calls[0]["schema"]["title"] == "Person"
    first = result.attempts[0]
    assert first.evaluation is not None and first.evaluation.score == 0.0
    assert "- at $.age: 'old' is not of type 'integer'" in first.evaluation.feedback
    assert "'old' is not of type 'integer'" in str(model.calls[1][-1].content)
    assert result.output == {"name": "Ada Lovelace", "age": 36}
    assert type(result.output) is dict


def test_an_invalid_output_schema_fails_at_build_time() -> None:
    with pytest.raises(ValueError, match="output_schema must be a pydantic model class"):
        create_refine_graph(ScriptedChatModel(), counting(), output_schema="Person")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="the JSON schema itself is invalid"):
        create_refine_graph(ScriptedChatModel(), counting(), output_schema={"type": "nope"})


def test_without_output_schema_there_is_no_output() -> None:
    result = refine(lambda state: GOOD, TASK, counting(), max_iterations=0)
    assert result.output is None and result.attempts[0].output is None


# -- generators of every kind ------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [Person(name="Ada Lovelace", age=36), {"name": "Ada Lovelace", "age": 36}, GOOD],
    ids=["instance", "dict", "json-text"],
)
def test_a_callable_generator_may_return_the_object_a_dict_or_json(reply: Any) -> None:
    result = refine(lambda state: reply, TASK, counting(), output_schema=Person, max_iterations=0)
    assert result.output == Person(name="Ada Lovelace", age=36)
    assert result.value == GOOD


async def test_an_async_callable_generator_returns_the_object() -> None:
    async def generate(state: Any) -> Person:
        return Person(name="Ada Lovelace", age=36)

    result = await arefine(generate, TASK, counting(), output_schema=Person, max_iterations=0)
    assert result.output == Person(name="Ada Lovelace", age=36)


def test_a_graph_generator_s_structured_response_is_used() -> None:
    call = {"name": "Person", "args": {"name": "Ada Lovelace", "age": 36}, "id": "c1"}
    agent = create_agent(
        AgentModel(replies=[AIMessage("", tool_calls=[call])]),
        tools=[],
        response_format=ToolStrategy(Person),
    )
    seen: list[Any] = []

    def spy(state: Any) -> Any:
        output = agent.invoke(state)
        seen.append(output.get("structured_response"))
        return output

    result = refine(RunnableLambda(spy), TASK, counting(), output_schema=Person, max_iterations=0)
    assert seen == [Person(name="Ada Lovelace", age=36)]
    assert result.output == Person(name="Ada Lovelace", age=36)


def test_a_graph_generator_without_a_structured_response_has_its_last_message_parsed() -> None:
    graph = RunnableLambda(lambda state: {"messages": [*state["messages"], AIMessage(GOOD)]})
    result = refine(graph, TASK, counting(), output_schema=SCHEMA, max_iterations=0)
    assert result.output == {"name": "Ada Lovelace", "age": 36}


def test_candidates_keep_each_object_and_the_best_one_wins() -> None:
    model = ScriptedChatModel(replies=["oops", '{"name": "A", "age": 1}', GOOD])
    pick = evaluators.reward_model(lambda task, response: 1.0 if "Lovelace" in response else 0.5)
    result = refine(model, TASK, pick, output_schema=Person, candidates=3, max_iterations=0)
    attempt = result.attempts[0]
    assert [c.output for c in attempt.candidates] == [
        None,
        {"name": "A", "age": 1},
        {"name": "Ada Lovelace", "age": 36},
    ]
    assert attempt.candidates[0].evaluation is not None
    assert attempt.candidates[0].evaluation.verdict == "FAIL"
    assert attempt.output == {"name": "Ada Lovelace", "age": 36}
    assert result.output == Person(name="Ada Lovelace", age=36)


# -- evaluators on typed responses -------------------------------------------------------


def test_the_llm_judge_sees_the_object_pretty_printed() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(1.0, "PASS", "fine")])
    refine(lambda s: GOOD, TASK, output_schema=Person, judge_model=judge, max_iterations=0)
    prompt = str(judge.calls[0][-1].content)
    assert '{\n  "name": "Ada Lovelace",\n  "age": 36\n}' in prompt


def test_json_schema_and_text_evaluators_work_on_the_json_text_unchanged() -> None:
    combined = [evaluators.json_schema(Person), evaluators.contains_all(["Lovelace"])]
    result = refine(lambda s: GOOD, TASK, combined, output_schema=Person, max_iterations=0)
    assert result.score == 1.0


def test_an_evaluator_gets_the_typed_object_through_its_annotation() -> None:
    got: list[Any] = []

    def adult(person: Person, state: Any) -> Evaluation:
        got.append(person)
        return Evaluation(score=1.0 if person.age >= 18 else 0.0, feedback="checked")

    def named(person: dict[str, Any], state: Any) -> float:
        got.append(person)
        return 1.0 if person["name"] else 0.0

    result = refine(lambda s: GOOD, TASK, [adult, named], output_schema=Person, max_iterations=0)
    assert got == [Person(name="Ada Lovelace", age=36), {"name": "Ada Lovelace", "age": 36}]
    assert result.score == 1.0
    # Called directly on text that is no such object, it fails without being called.
    evaluation = evaluators.CallableEvaluator(adult).evaluate('{"age": 3}', {})
    assert (evaluation.score, evaluation.verdict) == (0.0, "FAIL")
    assert "- at $.name: Field required" in evaluation.feedback
    assert len(got) == 2


# -- what the graph gives its caller -----------------------------------------------------


def test_the_graph_writes_output_for_its_parent_and_response_stays_json_text() -> None:
    graph = create_refine_graph(lambda s: GOOD, counting(), output_schema=Person).compile()
    out = graph.invoke({"task": TASK})
    assert out["response"] == GOOD
    assert out["output"] == {"name": "Ada Lovelace", "age": 36}


def test_stream_events_carry_the_object() -> None:
    graph = create_refine_graph(
        ScriptedChatModel(replies=["nope", GOOD]), counting(), output_schema=Person, patience=None
    ).compile()
    events = [e for e in graph.stream({"task": TASK}, stream_mode="custom")]
    rounds = [e for e in events if e["type"] == "round"]
    assert [r["output"] for r in rounds] == [None, {"name": "Ada Lovelace", "age": 36}]
    stop = next(e for e in events if e["type"] == "stop")
    assert stop["output"] == {"name": "Ada Lovelace", "age": 36}


def test_a_run_context_sets_the_schema_per_run() -> None:
    model = ScriptedChatModel(replies=[GOOD])
    graph = create_refine_graph(model, counting()).compile()
    out = graph.invoke(
        {"task": TASK}, context={"output_schema": SCHEMA}, output_keys=[*RESULT_KEYS, "output"]
    )
    assert out["output"] == {"name": "Ada Lovelace", "age": 36}
    assert "matches this JSON Schema" in str(model.calls[0][-1].content)
    before = len(model.calls)
    with pytest.raises(ValueError, match="the JSON schema itself is invalid"):
        graph.invoke({"task": TASK}, context={"output_schema": {"type": 3}})
    assert len(model.calls) == before  # refused before any model call


def test_typed_attempts_round_trip_a_strict_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_STRICT_MSGPACK", "true")
    saver = InMemorySaver(serde=strict_serde())
    graph = create_refine_graph(
        ScriptedChatModel(replies=["nope", GOOD]), counting(), output_schema=Person, patience=None
    ).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "typed"}}
    graph.invoke({"task": TASK}, config)
    values = graph.get_state(config).values
    attempts = values["attempts"]
    assert all(isinstance(a, Attempt) for a in attempts)
    assert [a.output for a in attempts] == [None, {"name": "Ada Lovelace", "age": 36}]
    result = RefineResult.from_state(values, output_schema=typed_module.OutputSchema(Person))
    assert result.output == Person(name="Ada Lovelace", age=36)
    # Read without the schema, the output is the plain JSON value.
    assert RefineResult.from_state(values).output == {"name": "Ada Lovelace", "age": 36}


def test_an_edited_review_answer_is_read_as_the_object() -> None:
    saver = InMemorySaver(serde=strict_serde())
    graph = create_refine_graph(
        lambda s: GOOD, counting(0.1), output_schema=Person, human_review="final", max_iterations=0
    ).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "edit"}}
    graph.invoke({"task": TASK}, config)
    edited = '{"name": "Augusta Ada King", "age": 36}'
    out = graph.invoke(Command(resume={"action": "edit", "response": edited}), config)
    assert out["response"] == edited
    assert out["output"] == {"name": "Augusta Ada King", "age": 36}
    edit = graph.get_state(config).values["attempts"][-1]
    assert edit.output == {"name": "Augusta Ada King", "age": 36}  # the edit's own object


def test_an_edit_that_is_no_valid_object_fails_without_the_evaluator() -> None:
    evaluate = counting(0.1)
    graph = create_refine_graph(
        lambda s: GOOD, evaluate, output_schema=Person, human_review="final", max_iterations=0
    ).compile(checkpointer=InMemorySaver(serde=strict_serde()))
    config = {"configurable": {"thread_id": "bad-edit"}}
    graph.invoke({"task": TASK}, config)
    graph.invoke(Command(resume={"action": "edit", "response": '{"name": 3}'}), config)
    edit = graph.get_state(config).values["attempts"][-1]
    assert edit.output is None and edit.evaluation is not None
    assert (
        edit.evaluation.verdict == "FAIL" and "at $.age: Field required" in edit.evaluation.feedback
    )
    assert evaluate.seen == [GOOD]


def test_messages_state_parents_get_the_json_text_as_the_answer() -> None:
    graph = create_refine_graph(lambda s: GOOD, counting(), output_schema=Person).compile()
    out = graph.invoke({"messages": [("human", TASK)]})
    last: BaseMessage = out["messages"][-1]
    assert json.loads(last.text) == {"name": "Ada Lovelace", "age": 36}


def test_the_module_examples_run() -> None:
    failures, tried = doctest.testmod(typed_module, optionflags=doctest.ELLIPSIS)
    assert failures == 0 and tried > 0


def test_scores_helper_is_untouched_by_typing() -> None:
    # An untyped loop still refuses objects from a generator, naming output_schema.
    with pytest.raises(TypeError, match="output_schema"):
        refine(lambda s: {"a": 1}, TASK, scores(1.0), max_iterations=0)


def test_a_reply_breaking_a_constraint_the_provider_did_not_enforce_is_kept_and_refined() -> None:
    # Real ChatOpenAI against a scripted server: the reply is JSON of the right shape but
    # breaks `ge=0` (grammars do not enforce ranges); it must become a FAIL attempt with
    # the errors, not an exception from the client's own validation.
    from langchain_openai import ChatOpenAI

    from tests.fault_server import FaultServer

    replies = iter(['{"name": "Ada", "age": -1}', GOOD])
    with FaultServer(content=lambda request, number: next(replies)).serve() as server:
        model = ChatOpenAI(base_url=server.base_url, api_key="k", model="m", max_retries=0)
        result = refine(model, TASK, counting(), output_schema=Person, max_iterations=1)
    first = result.attempts[0]
    assert first.output is None and first.evaluation is not None
    assert "at $.age: Input should be greater than or equal to 0" in first.evaluation.feedback
    assert result.output == Person(name="Ada Lovelace", age=36)
