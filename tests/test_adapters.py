"""Generator adapters: the kind is decided once, and each kind answers in one reply record."""

from __future__ import annotations

import contextvars
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from pydantic import BaseModel

from langgraph_refine import refine
from langgraph_refine._loop._adapters import (
    CallableAdapter,
    ChatAdapter,
    RunnableAdapter,
    adapt,
    adapt_ladder,
)
from langgraph_refine._loop._generate import GeneratorNode
from langgraph_refine._typed import OutputSchema
from tests.fakes import ScriptedChatModel

SRC = Path(__file__).resolve().parent.parent / "src" / "langgraph_refine"


class City(BaseModel):
    name: str


def write(state: Any) -> str:
    return "draft"


def test_each_kind_gets_its_adapter_and_name() -> None:
    chat = adapt(ScriptedChatModel())
    graph = adapt(RunnableLambda(lambda x: AIMessage("a")))
    plain = adapt(write)
    assert (type(chat), type(graph), type(plain)) == (ChatAdapter, RunnableAdapter, CallableAdapter)
    assert plain.name == "write" and not plain.takes_prompt and not plain.can_shorten
    assert chat.takes_prompt and chat.can_shorten
    assert adapt(chat) is chat  # an adapter is taken as it is


def test_a_generator_that_is_no_kind_is_refused_naming_its_type() -> None:
    with pytest.raises(ValueError, match="got int"):
        adapt(3)


def test_a_ladder_is_a_list_of_adapters_and_bad_rungs_are_named() -> None:
    rungs = adapt_ladder([write, ScriptedChatModel()])
    assert [type(r) for r in rungs] == [CallableAdapter, ChatAdapter]
    with pytest.raises(ValueError, match="empty ladder"):
        adapt_ladder([])
    with pytest.raises(ValueError, match=r"generator\[1\] of the ladder"):
        adapt_ladder([write, 3])


def test_the_chat_adapter_reads_a_structured_reply_once_reasoning_apart() -> None:
    raw = AIMessage('<think>hm</think>{"name": "Oslo"}')
    reply = adapt(ScriptedChatModel()).read(
        {"raw": raw, "parsed": None, "parsing_error": None}, 0, OutputSchema(City)
    )
    assert (reply.output, reply.reasoning, reply.evaluation) == ({"name": "Oslo"}, "hm", None)


def test_the_generate_step_never_tests_the_kind() -> None:
    """The kind is tested in one module; the generate step asks its adapter."""
    pattern = re.compile(r"isinstance\([^)]*(BaseChatModel|Runnable|Pregel|CompiledStateGraph)")
    found = {p.name for p in SRC.rglob("*.py") if pattern.search(p.read_text())}
    assert found == {"_kinds.py"}
    assert GeneratorNode(write).adapter.name == "write"


def test_no_class_is_longer_than_250_lines() -> None:
    """A class that outgrows this is doing two jobs: split it, as EvaluatorNode was.

    Declared fields (an annotated name and the docstring under it, as `LoopOptions`
    declares each option) are a table, not behaviour: they do not count.
    """
    import ast

    def declared(node: ast.ClassDef) -> int:
        lines = 0
        for i, stmt in enumerate(node.body):
            after = node.body[i - 1] if i else None
            is_doc = isinstance(stmt, ast.Expr) and isinstance(after, ast.AnnAssign)
            if isinstance(stmt, ast.AnnAssign) or is_doc:
                lines += (stmt.end_lineno or stmt.lineno) - stmt.lineno + 1
        return lines

    long = {
        f"{path.name}:{node.name}": size
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
        for size in [node.end_lineno - node.lineno + 1 - declared(node)]
        if size > 250
    }
    assert long == {}


def test_every_attempt_names_the_generator_that_wrote_it() -> None:
    result = refine(ScriptedChatModel(replies=["a", "b"]), "t", lambda r, s: 0.1, max_iterations=1)
    assert [a.model for a in result.attempts] == ["ScriptedChatModel", "ScriptedChatModel"]
    result = refine(write, "t", lambda r, s: 1.0)
    assert result.attempts[0].model == "write"


def test_a_typed_evaluator_gets_the_attempts_object_without_decoding_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import langgraph_refine._typed as typed

    decoded: list[str] = []
    real = typed._decode
    monkeypatch.setattr(typed, "_decode", lambda text: (decoded.append(text), real(text))[1])
    seen: list[City] = []

    def has_name(city: City, state: Any) -> float:
        seen.append(city)
        return 1.0

    result = refine(lambda s: '{"name": "Oslo"}', "t", has_name, output_schema=City)
    assert seen == [City(name="Oslo")] and result.output == City(name="Oslo")
    assert decoded == ['{"name": "Oslo"}']  # the generator's reply only


def test_a_schema_is_built_once_and_the_result_reads_the_graphs_own() -> None:
    from langgraph_refine import create_refine_graph
    from langgraph_refine._result import loop_schema

    assert OutputSchema.coerce(City) is OutputSchema.coerce(City)
    assert OutputSchema.coerce({"type": "object"}) is OutputSchema.coerce({"type": "object"})
    graph = create_refine_graph(write, lambda r, s: 1.0, output_schema=City).compile()
    assert loop_schema(graph) is OutputSchema.coerce(City)
    assert loop_schema(create_refine_graph(write, lambda r, s: 1.0).compile()) is None


def test_a_loop_nested_in_a_generator_leaves_the_outer_result_alone() -> None:
    def inner(state: Any) -> str:
        return refine(lambda s: "inner draft", "inner", lambda r, s: 1.0).value

    outer = refine(inner, "outer", lambda r, s: 1.0)
    assert outer.value == "inner draft" and outer.attempts[0].model == "inner"


def test_the_driver_builds_the_result_finalize_decided_from_the_final_state() -> None:
    # The graph runs in a context that shares nothing with the driver's, so no context
    # variable could carry a result across: the driver reads the final state, and its
    # result is the one the finalize step announced.
    from langgraph_refine import create_refine_graph
    from langgraph_refine._loop._driver import Driver, run_config, run_flow, run_through

    class FreshContext:
        def __init__(self, graph: Any) -> None:
            self.graph, self.checkpointer = graph, graph.checkpointer

        def stream(self, *args: Any, **kwargs: Any) -> Any:
            yield from contextvars.Context().run(lambda: list(self.graph.stream(*args, **kwargs)))

    events: list[dict[str, Any]] = []
    scores = iter([0.4, 0.9])
    graph = create_refine_graph(
        lambda s: f"draft {len(s['attempts'])}", lambda r, s: next(scores), max_iterations=1
    ).compile()
    config = run_config(None, durable=False, thread_id=None, max_iterations=1)
    driver = Driver(FreshContext(graph), config, on_event=events.append)
    result = run_through(run_flow("t", durable=False), driver)
    [stop] = [e for e in events if e["type"] == "stop"]
    assert (result.value, result.score, result.stop_reason, result.iterations) == (
        stop["response"],
        stop["score"],
        stop["stop_reason"],
        stop["iterations"],
    )
    assert result.value == "draft 1" and result.best_index == 1


def test_a_reviewed_durable_run_returns_the_result_of_the_threads_final_state() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_refine import RefineResult, create_refine_graph

    saver = InMemorySaver()
    result = refine(
        write,
        "t",
        lambda r, s: 0.5,
        max_iterations=0,
        human_review="final",
        reviewer=lambda payload: {"action": "approve"},
        checkpointer=saver,
        thread_id="reviewed",
    )
    assert result.stop_reason == "approved" and result.value == "draft"
    graph = create_refine_graph(write, lambda r, s: 0.5, human_review="final").compile(
        checkpointer=saver
    )
    state = graph.get_state({"configurable": {"thread_id": "reviewed"}})
    assert RefineResult.from_state(state) == result


def test_no_context_variable_carries_a_result_between_the_steps_and_the_driver() -> None:
    from langgraph_refine import _result
    from langgraph_refine._loop import _driver, _ends, _run

    for module in (_driver, _ends, _result, _run):
        held = [n for n, v in vars(module).items() if isinstance(v, contextvars.ContextVar)]
        assert held == [], f"{module.__name__} holds context variables {held}"
