"""The served graphs' own schemas: options in the input, the result's score in the output.

In process, on a scripted model: what the input schema offers (derived from the options'
declaration), that an option given in the input means and fails as in the run's context,
that it lasts one run, that the library's graph keeps what a parent graph exchanges with
it, and which errors the served graphs' handler makes readable by an MCP host. The same
through a real `langgraph dev` and the `mcp` client is in `test_server.py`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import create_refine_graph
from langgraph_refine._decisions._options import (
    CONTEXT,
    CONTEXT_KEYS,
    DEFAULTS,
    LoopOptions,
    RefineContext,
    context_key,
    declaration,
    declared,
)
from langgraph_refine._loop._graph import loop_builder
from langgraph_refine._state import RefineInput, RefineOutput, Strategy
from langgraph_refine._tool import DESCRIPTION, from_text
from langgraph_refine.server import (
    SERVED_SCHEMAS,
    ExplainError,
    ServedInput,
    ServedOutput,
    as_served,
)
from tests.fakes import ScriptedChatModel, scores

REQUEST = {"task", "messages", "criteria"}
ROOT = Path(__file__).resolve().parents[1]


def served(*values: float, human_review: Any = None, checkpointer: Any = None) -> Any:
    """A graph built as the server builds its graphs, on a scripted model and scores."""
    model = ScriptedChatModel(replies=[f"draft {i}" for i in range(10)])
    options = LoopOptions.build(human_review=human_review, name="refine")
    builder = loop_builder(model, scores(*values), options, schemas=SERVED_SCHEMAS)
    builder.set_node_defaults(error_handler=ExplainError(needs_person=human_review is not None))
    return as_served(builder.compile(checkpointer=checkpointer))


def test_the_input_offers_the_request_and_every_option_a_run_may_set() -> None:
    schema = ServedInput.model_json_schema()
    properties = schema["properties"]
    # Every run-context key, from the declaration: a new option field appears here too.
    assert set(properties) == REQUEST | CONTEXT_KEYS
    fields = {context_key(name): name for name in declared(CONTEXT)}
    for key in CONTEXT_KEYS - REQUEST:
        assert properties[key]["description"] == declaration(fields[key]).tool
    assert properties["strategy"]["enum"] == list(get_args(Strategy))
    assert properties["max_iterations"]["type"] == "integer"
    assert properties["max_iterations"]["default"] == DEFAULTS.max_iterations
    assert properties["target_score"]["default"] == DEFAULTS.target_score
    assert {"type": "array", "items": {"type": "string"}} in properties["evaluator"]["anyOf"]
    assert "evaluator" in get_type_hints(RefineContext)  # the key's JSON type comes from there
    assert {"type": "array", "items": {"type": "string"}} in properties["criteria"]["anyOf"]
    assert properties["messages"]["type"] == "array"
    assert properties["budget"]["type"] == "object"
    assert set(properties["budget"]["properties"]) == {
        "max_calls",
        "max_tokens",
        "max_seconds",
        "max_cost",
    }
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["task"]


def test_the_description_and_schema_fit_a_host_and_read_in_its_words() -> None:
    graphs = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    assert graphs["refine"]["description"] == DESCRIPTION
    schema = json.dumps(ServedInput.model_json_schema())
    for graph in graphs.values():
        shown = graph["description"] + schema
        assert len(shown) <= 4000, len(shown)
        # No Python names: classes, modules, constants (a verdict is a host's word).
        python = r"RefineMiddleware|LoopOptions|pydantic|evaluators\.|[A-Z]{3,}_[A-Z_]+|\w+\(\)"
        assert set(re.findall(python, shown)) <= {"NEEDS_IMPROVEMENT"}


def test_an_unknown_input_key_is_refused_by_name_before_the_run() -> None:
    with pytest.raises(ValueError) as refused:
        served(0.5).invoke({"task": "t", "max_iteration": 2})
    message = str(refused.value)
    assert message.startswith("unknown argument(s) 'max_iteration': the arguments are")
    assert "max_iterations" in message and "messages" in message
    assert type(refused.value).__name__ == message  # no thread: named by its message
    # On a thread (an SDK client), a plain ValueError: the SDK shows type and message.
    config = {"configurable": {"thread_id": "typo"}}
    with pytest.raises(ValueError) as on_thread:
        served(0.5, checkpointer=InMemorySaver()).invoke({"task": "t", "budgett": {}}, config)
    assert type(on_thread.value) is ValueError
    assert str(on_thread.value).startswith("unknown argument(s) 'budgett'")


def test_the_output_holds_the_result_and_how_it_was_reached() -> None:
    graph = served(0.4, 0.95)
    output = graph.invoke({"task": "Write a haiku."})
    assert output == {
        "response": "draft 1",
        "messages": [],
        "score": 0.95,
        "verdict": None,  # a callable evaluator gives no verdict
        "stop_reason": "target_reached",
        "usage": output["usage"],
    }
    assert output["usage"].calls == 2
    assert set(graph.get_output_jsonschema()["properties"]) == set(get_type_hints(ServedOutput))


def test_the_library_graph_exchanges_what_it_did_with_a_parent() -> None:
    # The served schemas are the server's own: a parent graph embedding the loop still
    # sends RefineInput's keys and receives RefineOutput's.
    graph = create_refine_graph(lambda state: "x", scores(1.0)).compile()
    assert set(graph.get_input_jsonschema()["properties"]) == set(get_type_hints(RefineInput))
    assert set(graph.get_output_jsonschema()["properties"]) == set(get_type_hints(RefineOutput))
    assert set(graph.invoke({"task": "t"})) == {"response", "messages"}


def test_an_option_in_the_input_means_what_it_means_in_the_context() -> None:
    by_input = served(0.4, 0.5, 0.6).invoke({"task": "t", "max_iterations": 1})
    by_context = served(0.4, 0.5, 0.6).invoke({"task": "t"}, context={"max_iterations": 1})
    default = served(0.4, 0.5, 0.6).invoke({"task": "t"})
    assert by_input["stop_reason"] == by_context["stop_reason"] == "max_iterations"
    assert by_input["usage"].calls == by_context["usage"].calls == 2
    assert default["usage"].calls > 2


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        ({"max_iterations": -1}, -1),
        ({"target_score": 2}, 2),
        ({"strategy": "greedy"}, "greedy"),
        ({"budget": {"max_calls": "many"}}, "many"),
        ({"select_top": 1}, 1),
    ],
)
def test_a_bad_option_in_the_input_fails_as_in_the_context(
    bad: dict[str, Any], shown: object
) -> None:
    saver = InMemorySaver()  # a thread: the errors keep their types, as for an SDK client
    config = {"configurable": {"thread_id": "bad"}}
    with pytest.raises(ValueError) as by_context:
        served(0.5, checkpointer=saver).invoke({"task": "t"}, config, context=bad)
    with pytest.raises(ValueError) as by_input:
        served(0.5, checkpointer=saver).invoke({"task": "t", **bad}, config)
    assert type(by_input.value) is type(by_context.value)
    assert str(by_input.value) == str(by_context.value)
    assert str(by_input.value).endswith(repr(shown))


def test_an_option_set_differently_in_the_context_and_the_input_is_refused() -> None:
    graph = served(0.4, 0.5)
    with pytest.raises(ValueError, match=r"max_iterations: 2 in the context, 1 in the input"):
        graph.invoke({"task": "t", "max_iterations": 1}, context={"max_iterations": 2})
    same = graph.invoke({"task": "t", "max_iterations": 1}, context={"max_iterations": 1})
    assert same["stop_reason"] == "max_iterations"


def test_an_option_in_the_input_lasts_its_run_only() -> None:
    graph = served(0.4, 0.5, 0.6, 0.7, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "one thread"}}
    first = graph.invoke({"task": "t", "max_iterations": 0}, config)
    assert first["usage"].calls == 1
    assert graph.get_state(config).values["input_options"] == {"max_iterations": 0}
    second = graph.invoke({"task": "t"}, config)
    assert second["usage"].calls > 1  # the default, not the earlier run's 0
    assert graph.get_state(config).values["input_options"] == {}


def test_a_refused_run_without_a_thread_names_its_error_by_its_message() -> None:
    # LangGraph Server's MCP endpoint passes on a failed run's error type name alone.
    with pytest.raises(ValueError) as refused:
        served(0.5).invoke({"task": "t", "max_iterations": -1})
    message = "max_iterations must be an integer >= 0, got -1"
    assert type(refused.value).__name__ == str(refused.value) == message
    with pytest.raises(ValueError) as no_task:
        served(0.5).invoke({"task": " "})
    assert type(no_task.value).__name__.startswith("task must be a non-empty string")


def test_a_reviewed_graph_called_without_a_thread_says_to_call_refine() -> None:
    with pytest.raises(ValueError) as refused:
        served(0.5, human_review="final").invoke({"task": "t"})
    name = type(refused.value).__name__
    assert name == str(refused.value)
    assert "pauses for a person" in name and "call the `refine` tool instead" in name
    # On a thread the review pauses as before.
    graph = served(0.95, human_review="final", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reviewed"}}
    graph.invoke({"task": "t"}, config)
    assert graph.get_state(config).next == ("review",)


def failing(error: Exception, *, checkpointer: Any = None) -> Any:
    """A served graph whose generator fails with `error` (a refusal after `prepare`)."""
    model = ScriptedChatModel(replies=[error])
    options = LoopOptions.build(name="refine")
    builder = loop_builder(model, scores(0.5), options, schemas=SERVED_SCHEMAS)
    builder.set_node_defaults(error_handler=ExplainError())
    return as_served(builder.compile(checkpointer=checkpointer))


def test_every_refusal_of_a_call_without_a_thread_is_named_by_its_message() -> None:
    # Refused in `generate` (as a `max_tokens` above the cap is), not only in `prepare`.
    cap = "max_tokens=100000 in the run's context is above this deployment's cap of 512"
    with pytest.raises(ValueError) as refused:
        failing(ValueError(cap)).invoke({"task": "t"})
    assert type(refused.value).__name__ == str(refused.value) == cap
    # Any other error reads too, with its type.
    with pytest.raises(ValueError) as other:
        failing(KeyError("nope")).invoke({"task": "t"})
    assert type(other.value).__name__ == "KeyError: 'nope'"


def test_an_a2a_run_on_a_thread_names_its_error_by_its_message() -> None:
    # LangGraph Server's A2A endpoint answers a failed task with the type name too; its
    # runs say so in their metadata (`a2a`), on a thread of the task's context.
    thread = {"configurable": {"thread_id": "a2a"}}
    with pytest.raises(ValueError) as a2a:
        failing(ValueError("bad"), checkpointer=InMemorySaver()).invoke(
            {"task": "t"}, {**thread, "metadata": {"a2a": {}}}
        )
    assert type(a2a.value).__name__ == "bad"
    with pytest.raises(ValueError) as sdk:
        failing(ValueError("bad"), checkpointer=InMemorySaver()).invoke({"task": "t"}, thread)
    assert type(sdk.value) is ValueError


@pytest.mark.parametrize(
    ("answer", "stop_reason", "response"),
    [
        ("approve", "approved", "draft 0"),
        ("Reject.", "rejected", "draft 0"),
        ("edit: My own.", "edited", "My own."),
        ({"action": "edit", "response": "Mine."}, "edited", "Mine."),  # a data part's input
        ({"decisions": [{"type": "approve"}]}, "approved", "draft 0"),
    ],
)
def test_a_review_is_answered_in_text_or_as_the_input_of_a_run_on_its_thread(
    answer: Any, stop_reason: str, response: str
) -> None:
    from langgraph.types import Command

    graph = served(0.95, human_review="final", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "review"}}
    graph.invoke({"task": "t"}, config)
    # Text comes as a resume value (A2A's text reply); a dict as the next run's input.
    given = Command(resume=answer) if isinstance(answer, str) else answer
    output = graph.invoke(given, config)
    assert (output["stop_reason"], output["response"]) == (stop_reason, response)


def test_a_review_answered_with_a_request_in_text_runs_one_more_round() -> None:
    from langgraph.types import Command

    graph = served(0.95, 0.9, human_review="final", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "revise"}}
    graph.invoke({"task": "t"}, config)
    graph.invoke(Command(resume="Name the season."), config)
    payload = graph.get_state(config).tasks[0].interrupts[0].value
    assert payload["response"] == "draft 1"  # the revision is shown
    requests = [a.instruction for a in graph.get_state(config).values["attempts"]]
    assert requests[-1] == "Name the season."
    # Empty text is not an answer: the review asks again, saying how to answer in text.
    graph.invoke(Command(resume="edit: "), config)
    error = graph.get_state(config).tasks[0].interrupts[0].value["error"]
    assert "gives nothing after 'edit:'" in error and "'approve', 'reject'" in error


def test_values_a_host_sent_as_text_are_read_as_their_arguments_take_them() -> None:
    # The MCP Inspector's command line sends `--tool-arg max_iterations=0` as "0".
    given = {"task": "t", "max_iterations": "0", "budget": '{"max_calls": 5}', "edits": "true"}
    output = served(0.5, 0.6).invoke(given)
    assert (output["stop_reason"], output["usage"].calls) == ("max_iterations", 1)
    schema = ServedInput.model_json_schema()
    read = from_text({**given, "criteria": "Rhymes", "strategy": "chain"}, schema)
    assert read["max_iterations"] == 0 and read["budget"] == {"max_calls": 5}
    assert read["edits"] is True and read["strategy"] == "chain"
    assert read["criteria"] == "Rhymes"  # text, where text is taken
    assert from_text({"criteria": '["Rhymes"]'}, schema) == {"criteria": ["Rhymes"]}
    assert from_text({"target_score": "0.5", "task": "42"}, schema) == {
        "target_score": 0.5,
        "task": "42",
    }
