"""The compiled refine graph as a node of larger graphs: keys, messages, loops, interrupts."""

from __future__ import annotations

import asyncio
import operator
import re
import sys
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_refine import Evaluation, RefineResult, arefine, create_refine_graph, refine
from tests.conftest import POSTGRES_URI_ENV, postgres_uri
from tests.fakes import ScriptedChatModel


class Loop:
    """A callable generator and evaluator pair that records what each loop saw."""

    def __init__(self, label: str, scores: list[float]) -> None:
        self.label = label
        self.scores = scores
        self.generated: list[str] = []
        self.seen_attempts: list[list[str]] = []  # attempt responses visible to each call
        self.evaluated: list[str] = []

    def generate(self, state: Any) -> str:
        self.seen_attempts.append([a.response for a in state["attempts"]])
        text = f"{self.label}:{state['task']}:{len(state['attempts'])}"
        self.generated.append(text)
        return text

    def evaluate(self, response: str, state: Any) -> Evaluation:
        assert response.startswith(f"{self.label}:"), "a loop was shown another loop's attempt"
        self.evaluated.append(response)
        index = int(response.rsplit(":", 1)[1])
        return Evaluation(score=self.scores[min(index, len(self.scores) - 1)], feedback="more")

    def graph(self, **options: Any) -> Any:
        options.setdefault("patience", None)
        options.setdefault("name", self.label)
        return create_refine_graph(self.generate, self.evaluate, **options).compile()


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


class TaskState(TypedDict):
    task: str
    response: str
    steps: Annotated[list[str], operator.add]


# -- a parent keyed by task / response -----------------------------------------------------


def test_refine_graph_as_a_node_reads_task_and_writes_response() -> None:
    loop = Loop("a", [0.2, 0.95])
    builder = StateGraph(TaskState)
    builder.add_node("refine", loop.graph())
    builder.add_node("after", lambda state: {"steps": [f"got {state['response']}"]})
    builder.add_edge(START, "refine")
    builder.add_edge("refine", "after")
    builder.add_edge("after", END)
    out = builder.compile().invoke({"task": "poem", "steps": []})
    assert out["response"] == "a:poem:1"
    assert out["steps"] == ["got a:poem:1"]
    # The loop's own keys stay inside it: the parent sees task / response / its own keys only.
    assert set(out) == {"task", "response", "steps"}
    assert loop.evaluated == ["a:poem:0", "a:poem:1"]


def test_only_the_output_schema_crosses_into_the_parent() -> None:
    class Wide(TaskState):
        attempts: list[Any]
        stop_reason: str

    loop = Loop("a", [0.95])
    builder = StateGraph(Wide)
    builder.add_node("refine", loop.graph())
    builder.add_edge(START, "refine")
    out = builder.compile().invoke(
        {"task": "t", "steps": [], "attempts": ["parent's own"], "stop_reason": "parent's"}
    )
    # The parent's same-named keys are neither read as loop state nor overwritten.
    assert out["attempts"] == ["parent's own"]
    assert out["stop_reason"] == "parent's"
    assert out["response"] == "a:t:0"
    assert loop.seen_attempts == [[]]


# -- a parent on MessagesState -------------------------------------------------------------


def test_messages_parent_takes_the_last_human_message_and_gets_one_ai_message() -> None:
    model = ScriptedChatModel(replies=["first try", "better try"])
    scores = iter([0.3, 0.95])
    refine_graph = create_refine_graph(model, lambda r, s: next(scores)).compile()
    builder = StateGraph(MessagesState)
    builder.add_node("refine", refine_graph)
    builder.add_edge(START, "refine")
    parent = builder.compile(checkpointer=InMemorySaver())
    cfg = thread()
    history = [
        HumanMessage("an old question"),
        AIMessage("an old answer"),
        HumanMessage("Write a limerick."),
    ]
    out = parent.invoke({"messages": history}, cfg)
    messages = out["messages"]
    assert [m.type for m in messages] == ["human", "ai", "human", "ai"]
    assert messages[-1].content == "better try"
    assert [m.content for m in messages[:3]] == [m.content for m in history]
    assert model.prompts[0] == "Write a limerick."
    assert "response" not in out  # MessagesState has no such key


def test_messages_parent_second_turn_on_the_same_thread() -> None:
    model = ScriptedChatModel(replies=["answer one", "answer two"])
    refine_graph = create_refine_graph(model, lambda r, s: 1.0).compile()
    builder = StateGraph(MessagesState)
    builder.add_node("refine", refine_graph)
    builder.add_edge(START, "refine")
    parent = builder.compile(checkpointer=InMemorySaver())
    cfg = thread()
    parent.invoke({"messages": [HumanMessage("question one")]}, cfg)
    out = parent.invoke({"messages": [HumanMessage("question two")]}, cfg)
    assert [m.content for m in out["messages"]] == [
        "question one",
        "answer one",
        "question two",
        "answer two",
    ]
    assert model.prompts == ["question one", "question two"]


def test_subgraph_compiled_with_checkpointer_true_starts_each_turn_fresh() -> None:
    # checkpointer=True keeps the subgraph's state between the parent's turns on a thread;
    # the loop still starts every turn at attempt 0 with the new question.
    seen: list[tuple[str, int]] = []

    def generate(state: Any) -> str:
        seen.append((state["task"], len(state["attempts"])))
        return f"answer to {state['task']}"

    refine_graph = create_refine_graph(generate, lambda r, s: 1.0).compile(checkpointer=True)
    builder = StateGraph(MessagesState)
    builder.add_node("refine", refine_graph)
    builder.add_edge(START, "refine")
    parent = builder.compile(checkpointer=InMemorySaver())
    cfg = thread()
    parent.invoke({"messages": [HumanMessage("one")]}, cfg)
    out = parent.invoke({"messages": [HumanMessage("two")]}, cfg)
    assert seen == [("one", 0), ("two", 0)]
    assert [m.content for m in out["messages"]] == ["one", "answer to one", "two", "answer to two"]


def test_messages_parent_with_an_interrupt_appends_only_after_the_review() -> None:
    model = ScriptedChatModel(replies=["draft"])
    refine_graph = create_refine_graph(model, lambda r, s: 0.95, human_review="final").compile()
    builder = StateGraph(MessagesState)
    builder.add_node("refine", refine_graph)
    builder.add_edge(START, "refine")
    parent = builder.compile(checkpointer=InMemorySaver())
    cfg = thread()
    out = parent.invoke({"messages": [HumanMessage("Say hi.")]}, cfg)
    assert out["__interrupt__"][0].value["task"] == "Say hi."
    assert [m.type for m in parent.get_state(cfg).values["messages"]] == ["human"]
    out = parent.invoke(Command(resume={"action": "edit", "response": "Hi!"}), cfg)
    assert [(m.type, m.content) for m in out["messages"]] == [("human", "Say hi."), ("ai", "Hi!")]
    assert len(model.calls) == 1


# -- two loops in one parent -----------------------------------------------------------------


def test_two_refine_nodes_in_sequence_keep_separate_loop_state() -> None:
    first, second = Loop("a", [0.3, 0.6, 0.4]), Loop("b", [0.95])

    def next_task(state: TaskState) -> dict[str, Any]:
        return {"task": f"polish({state['response']})", "steps": ["handoff"]}

    builder = StateGraph(TaskState)
    builder.add_node("draft", first.graph(max_iterations=2))
    builder.add_node("handoff", next_task)
    builder.add_node("polish", second.graph())
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "handoff")
    builder.add_edge("handoff", "polish")
    parent = builder.compile(checkpointer=InMemorySaver())
    cfg = thread()
    out = parent.invoke({"task": "t", "steps": []}, cfg)
    assert out["response"] == "b:polish(a:t:1):0"
    # The second loop started from attempt 0 and never saw the first loop's attempts.
    assert second.seen_attempts == [[]]
    assert first.seen_attempts == [[], ["a:t:0"], ["a:t:0", "a:t:1"]]
    assert first.evaluated == ["a:t:0", "a:t:1", "a:t:2"]


class ParallelState(TypedDict):
    task: str
    response: Annotated[list[str], operator.add]


def test_two_refine_nodes_in_parallel_branches_do_not_clobber_each_other() -> None:
    # Two loops write `response` in the same step, so the parent gives it a reducer.
    left, right = Loop("left", [0.1, 0.5, 0.2]), Loop("right", [0.95])

    def collect(state: dict[str, Any]) -> dict[str, Any]:
        return {"response": [state["response"]]}

    def wrap(loop: Loop, **options: Any) -> Callable[[ParallelState], dict[str, Any]]:
        compiled = loop.graph(**options)

        def node(state: ParallelState) -> dict[str, Any]:
            return collect(compiled.invoke({"task": state["task"]}))

        return node

    builder = StateGraph(ParallelState)
    builder.add_node("left", wrap(left, max_iterations=2))
    builder.add_node("right", wrap(right))
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    parent = builder.compile(checkpointer=InMemorySaver())
    out = parent.invoke({"task": "t", "response": []}, thread())
    assert sorted(out["response"]) == ["left:t:1", "right:t:0"]
    assert left.seen_attempts == [[], ["left:t:0"], ["left:t:0", "left:t:1"]]
    assert right.seen_attempts == [[]]


class TwoAnswers(TypedDict):
    task: str
    short: str
    long: str


def test_parallel_subgraph_nodes_with_their_own_output_keys() -> None:
    # The documented pattern: one small adapter per loop maps the loop's `response`
    # onto the parent's own key, so the branches never write the same channel.
    short, long = Loop("short", [0.4, 0.95]), Loop("long", [0.2, 0.3, 0.99])
    short_graph, long_graph = short.graph(), long.graph(max_iterations=3)

    builder = StateGraph(TwoAnswers)
    builder.add_node("short_loop", lambda s: {"short": short_graph.invoke(s)["response"]})
    builder.add_node("long_loop", lambda s: {"long": long_graph.invoke(s)["response"]})
    builder.add_edge(START, "short_loop")
    builder.add_edge(START, "long_loop")
    parent = builder.compile(checkpointer=InMemorySaver())
    cfg = thread()
    out = parent.invoke({"task": "t"}, cfg)
    assert (out["short"], out["long"]) == ("short:t:1", "long:t:2")
    assert short.evaluated == ["short:t:0", "short:t:1"]
    assert long.evaluated == ["long:t:0", "long:t:1", "long:t:2"]


# -- interrupts inside the refine subgraph ---------------------------------------------------


def reviewed_parent(loop: Loop, checkpointer: Any, **options: Any) -> tuple[Any, list[str]]:
    before_runs: list[str] = []

    def before(state: TaskState) -> dict[str, Any]:
        before_runs.append(state["task"])
        return {"steps": ["before"]}

    builder = StateGraph(TaskState)
    builder.add_node("before", before)
    # No checkpointer of its own: the subgraph persists into the parent's.
    builder.add_node("refine", loop.graph(human_review="final", **options))
    builder.add_node("after", lambda state: {"steps": ["after"]})
    builder.add_edge(START, "before")
    builder.add_edge("before", "refine")
    builder.add_edge("refine", "after")
    return builder.compile(checkpointer=checkpointer), before_runs


def test_interrupt_inside_the_subgraph_is_resumed_from_the_parent(checkpointer: Any) -> None:
    loop = Loop("a", [0.2, 0.5, 0.4])
    parent, before_runs = reviewed_parent(loop, checkpointer, max_iterations=2)
    cfg = thread()

    out = parent.invoke({"task": "t", "steps": []}, cfg)
    [interrupt] = out["__interrupt__"]
    assert interrupt.value["response"] == "a:t:1"
    snapshot = parent.get_state(cfg, subgraphs=True)
    assert snapshot.next == ("refine",)
    assert snapshot.tasks[0].state.next == ("review",)
    assert [i.id for i in snapshot.interrupts] == [interrupt.id]

    # A malformed answer from the parent: the subgraph's review stays pending.
    out = parent.invoke(Command(resume={"action": "ship it"}), cfg)
    assert "ship it" in out["__interrupt__"][0].value["error"]
    assert parent.get_state(cfg).next == ("refine",)

    out = parent.invoke(Command(resume={"action": "revise", "feedback": "more colour"}), cfg)
    payload = out["__interrupt__"][0].value
    assert payload["iteration"] == 3 and "error" not in payload
    assert (payload["attempt"], payload["best_attempt"]) == (3, 1)  # the revision is shown

    out = parent.invoke(Command(resume={"action": "approve"}), cfg)
    assert "__interrupt__" not in out
    assert out["response"] == "a:t:3"  # approving approves what was shown
    assert out["steps"] == ["before", "after"]
    # Resuming restarted neither the parent's earlier node nor any model call.
    assert before_runs == ["t"]
    assert loop.generated == ["a:t:0", "a:t:1", "a:t:2", "a:t:3"]
    assert loop.evaluated == loop.generated
    assert loop.seen_attempts[3] == ["a:t:0", "a:t:1", "a:t:2"]


def test_subgraph_inside_a_node_function_resumes_without_repeating_calls() -> None:
    loop = Loop("a", [0.3, 0.5])
    refine_graph = loop.graph(human_review="final", max_iterations=1)
    wrapper_runs: list[str] = []

    def ask(state: TaskState) -> dict[str, Any]:
        # Code before the subgraph call runs again on resume; the subgraph itself resumes.
        wrapper_runs.append(state["task"])
        return {"response": refine_graph.invoke({"task": state["task"]})["response"]}

    builder = StateGraph(TaskState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    parent = builder.compile(checkpointer=InMemorySaver())
    cfg = thread()
    parent.invoke({"task": "t", "steps": []}, cfg)
    # A reviewer's edit is evaluated too (it is an attempt of its own).
    out = parent.invoke(Command(resume={"action": "edit", "response": "a:human text:9"}), cfg)
    assert out["response"] == "a:human text:9"
    assert loop.evaluated[-1] == "a:human text:9"
    assert loop.generated == ["a:t:0", "a:t:1"]
    assert wrapper_runs == ["t", "t"]


def test_subgraph_state_lives_in_the_parents_checkpointer_across_restarts(tmp_path: Any) -> None:
    path = str(tmp_path / "parent.sqlite")
    cfg = thread()
    loop = Loop("a", [0.2, 0.95])
    with SqliteSaver.from_conn_string(path) as saver:
        parent, _ = reviewed_parent(loop, saver)
        parent.invoke({"task": "t", "steps": []}, cfg)
        assert parent.get_state(cfg).next == ("refine",)

    # A new process: fresh graph objects over the same database.
    with SqliteSaver.from_conn_string(path) as saver:
        parent, before_runs = reviewed_parent(loop, saver)
        assert parent.get_state(cfg).interrupts[0].value["response"] == "a:t:1"
        out = parent.invoke(Command(resume={"action": "approve"}), cfg)
    assert out["response"] == "a:t:1"
    assert loop.generated == ["a:t:0", "a:t:1"]
    assert before_runs == []


def test_a_checkpointer_of_the_subgraphs_own_is_bypassed_inside_a_parent(tmp_path: Any) -> None:
    # What docs/embedding.md says: inside a parent the subgraph persists into the
    # parent's checkpointer; a saver compiled into the subgraph is not used there.
    path = str(tmp_path / "parent.sqlite")
    cfg = thread()
    loop = Loop("a", [0.2, 0.95])
    own = InMemorySaver()

    def build(saver: Any) -> Any:
        builder = StateGraph(TaskState)
        sub = create_refine_graph(loop.generate, loop.evaluate, human_review="final")
        builder.add_node("refine", sub.compile(checkpointer=own))
        builder.add_edge(START, "refine")
        return builder.compile(checkpointer=saver)

    with SqliteSaver.from_conn_string(path) as saver:
        build(saver).invoke({"task": "t", "steps": []}, cfg)
    assert list(own.list(None)) == []
    with SqliteSaver.from_conn_string(path) as saver:
        out = build(saver).invoke(Command(resume={"action": "approve"}), cfg)
    assert out["response"] == "a:t:1"
    assert loop.generated == ["a:t:0", "a:t:1"]


class Pair(TypedDict):
    task: str
    left: str
    right: str


def two_reviewed_loops() -> tuple[Any, Loop, Loop]:
    left, right = Loop("left", [0.4, 0.95]), Loop("right", [0.99])
    left_graph = left.graph(human_review="final")
    right_graph = right.graph(human_review="final")

    builder = StateGraph(Pair)
    builder.add_node("left_loop", lambda s: {"left": left_graph.invoke(s)["response"]})
    builder.add_node("right_loop", lambda s: {"right": right_graph.invoke(s)["response"]})
    builder.add_edge(START, "left_loop")
    builder.add_edge(START, "right_loop")
    return builder.compile(checkpointer=InMemorySaver()), left, right


def test_several_pending_interrupts_resumed_with_the_id_map() -> None:
    parent, left, right = two_reviewed_loops()
    cfg = thread()
    out = parent.invoke({"task": "t"}, cfg)
    interrupts = {i.value["name"]: i for i in out["__interrupt__"]}
    assert set(interrupts) == {"left", "right"}
    assert len(parent.get_state(cfg).interrupts) == 2
    assert interrupts["left"].value["response"] == "left:t:1"

    out = parent.invoke(
        Command(
            resume={
                interrupts["left"].id: {"action": "approve"},
                interrupts["right"].id: {"action": "edit", "response": "right:edited:9"},
            }
        ),
        cfg,
    )
    assert "__interrupt__" not in out
    assert (out["left"], out["right"]) == ("left:t:1", "right:edited:9")
    assert left.generated == ["left:t:0", "left:t:1"]
    assert right.generated == ["right:t:0"]


def test_id_map_with_one_malformed_answer_keeps_only_that_review_pending() -> None:
    parent, left, right = two_reviewed_loops()
    cfg = thread()
    out = parent.invoke({"task": "t"}, cfg)
    ids = {i.value["name"]: i.id for i in out["__interrupt__"]}
    out = parent.invoke(
        Command(resume={ids["left"]: {"action": "edit"}, ids["right"]: {"action": "reject"}}),
        cfg,
    )
    [pending] = out["__interrupt__"]
    assert pending.value["name"] == "left"
    assert "'response'" in pending.value["error"]
    assert pending.id != ids["left"]  # a new interrupt: the old answer is not replayed
    snapshot = parent.get_state(cfg)
    assert [i.id for i in snapshot.interrupts] == [pending.id]

    out = parent.invoke(Command(resume={pending.id: {"action": "reject"}}), cfg)
    assert "__interrupt__" not in out
    assert (out["left"], out["right"]) == ("left:t:1", "right:t:0")
    assert left.generated == ["left:t:0", "left:t:1"] and right.generated == ["right:t:0"]


def test_a_single_resume_value_is_ambiguous_with_several_pending_reviews() -> None:
    parent, _left, _right = two_reviewed_loops()
    cfg = thread()
    parent.invoke({"task": "t"}, cfg)
    with pytest.raises(Exception, match="multiple pending interrupts"):
        parent.invoke(Command(resume={"action": "approve"}), cfg)
    assert len(parent.get_state(cfg).interrupts) == 2


def as_list(left_value: list[str] | None, right_value: str | list[str]) -> list[str]:
    """Reducer: collect the plain-string `response` each loop writes."""
    items = right_value if isinstance(right_value, list) else [right_value]
    return [*(left_value or []), *items]


class Collected(TypedDict):
    task: str
    response: Annotated[list[str], as_list]


def test_parallel_subgraph_nodes_with_reviews_resume_independently() -> None:
    left, right = Loop("left", [0.2, 0.9]), Loop("right", [0.95])
    builder = StateGraph(Collected)
    builder.add_node("left", left.graph(human_review="final"))
    builder.add_node("right", right.graph(human_review="final"))
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    parent = builder.compile(checkpointer=InMemorySaver())
    cfg = thread()
    out = parent.invoke({"task": "t"}, cfg)
    ids = {i.value["name"]: i.id for i in out["__interrupt__"]}
    assert set(ids) == {"left", "right"}
    out = parent.invoke(Command(resume={ids["right"]: {"action": "approve"}}), cfg)
    # Answering one review leaves the other pending; nothing re-ran.
    assert [i.value["name"] for i in out["__interrupt__"]] == ["left"]
    out = parent.invoke(Command(resume={ids["left"]: {"action": "approve"}}), cfg)
    assert sorted(out["response"]) == ["left:t:1", "right:t:0"]
    assert left.generated == ["left:t:0", "left:t:1"] and right.generated == ["right:t:0"]


# -- streaming from a parent -----------------------------------------------------------------


def test_custom_events_reach_the_parent_with_subgraphs_true() -> None:
    loop = Loop("a", [0.2, 0.5, 0.95])
    builder = StateGraph(TaskState)
    builder.add_node("refine", loop.graph())
    builder.add_edge(START, "refine")
    parent = builder.compile()
    events = list(parent.stream({"task": "t", "steps": []}, stream_mode="custom", subgraphs=True))
    rounds = [e for ns, e in events if e["type"] == "round"]
    stops = [e for ns, e in events if e["type"] == "stop"]
    assert [r["iteration"] for r in rounds] == [0, 1, 2]
    assert [r["best_score"] for r in rounds] == [0.2, 0.5, 0.95]
    assert all({"score", "verdict", "feedback"} <= r.keys() for r in rounds)
    assert [s["stop_reason"] for s in stops] == ["target_reached"]
    assert all(ns and ns[0].startswith("refine:") for ns, _ in events)


@pytest.mark.parametrize("is_async", [False, True])
def test_a_loop_a_node_runs_itself_streams_to_the_parent_with_subgraphs_true(
    is_async: bool,
) -> None:
    # refine()/arefine() inside a node: no one in the call receives custom events, so the
    # loop's events go where a subgraph's would, to a parent streaming with subgraphs=True.
    loop = Loop("a", [0.2, 0.5, 0.95])

    def node(state: TaskState) -> dict[str, Any]:
        result = refine(loop.generate, state["task"], loop.evaluate, patience=None)
        return {"response": result.value}

    async def anode(state: TaskState) -> dict[str, Any]:
        result = await arefine(loop.generate, state["task"], loop.evaluate, patience=None)
        return {"response": result.value}

    builder = StateGraph(TaskState)
    builder.add_node("outer", anode if is_async else node)
    builder.add_edge(START, "outer")
    parent = builder.compile()
    payload = {"task": "t", "steps": []}
    if is_async:

        async def collect() -> list[Any]:
            stream = parent.astream(payload, stream_mode="custom", subgraphs=True)
            return [event async for event in stream]

        async def without() -> list[Any]:
            return [event async for event in parent.astream(payload, stream_mode="custom")]

        events, plain = asyncio.run(collect()), asyncio.run(without())
    else:
        events = list(parent.stream(payload, stream_mode="custom", subgraphs=True))
        plain = list(parent.stream(payload, stream_mode="custom"))
    assert [e["iteration"] for _, e in events if e["type"] == "round"] == [0, 1, 2]
    assert [e["stop_reason"] for _, e in events if e["type"] == "stop"] == ["target_reached"]
    assert plain == []  # without subgraphs=True, as for a subgraph


def test_result_can_be_read_from_the_subgraph_state_while_paused() -> None:
    loop = Loop("a", [0.2, 0.5])
    parent, _ = reviewed_parent(loop, InMemorySaver(), max_iterations=1)
    cfg = thread()
    parent.invoke({"task": "t", "steps": []}, cfg)
    sub_state = parent.get_state(cfg, subgraphs=True).tasks[0].state
    partial = RefineResult.from_state(sub_state.values)
    assert partial.score_history == [0.2, 0.5]
    assert partial.value == "a:t:1"


def test_embedded_agent_example() -> None:
    from examples.embedded_agent import main

    short = "A lighthouse stands on the rock."
    good = "The lighthouse sweeps its light through thick fog " + " ".join(["and waves"] * 8)
    model = ScriptedChatModel(replies=[short, good])
    messages = main(model)
    assert [m.type for m in messages] == ["human", "ai", "human", "ai", "ai"]
    assert messages[3].content == good  # the loop's best answer, once
    assert messages[4].content == "Anything else I should write?"
    assert model.prompts[0] == "Describe a lighthouse in fog in 20 to 60 words."
    assert short in model.prompts[1]  # the refinement saw the first attempt


# -- the documentation's snippets run as written ---------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs"
DOC_DB_URI = "postgresql://postgres:postgres@localhost:5432/postgres"


def python_blocks(page: Path) -> list[str]:
    """The page's ```python blocks, except those marked as needing a running server."""
    blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)
    return [b for b in blocks if not b.startswith("# needs")]


@pytest.mark.parametrize("page", ["checkpointing.md", "human-review.md", "embedding.md"])
def test_doc_page_snippets_run(page: str, tmp_path: Path, monkeypatch: Any) -> None:
    blocks = python_blocks(DOCS / page)
    assert len(blocks) >= 4
    source = "\n".join(blocks)
    if DOC_DB_URI in source:
        uri = postgres_uri()
        if not uri:
            pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
        source = source.replace(DOC_DB_URI, uri)
    monkeypatch.chdir(tmp_path)  # the snippets' SQLite files land here
    # A registered module, as for a script: typing.get_type_hints resolves the
    # snippets' TypedDict annotations through sys.modules.
    module = types.ModuleType(f"docs_{page.split('.')[0].replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(source, str(DOCS / page), "exec"), module.__dict__)
