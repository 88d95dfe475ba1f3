"""Checkpoints hold no models: no "Deserializing unregistered type" warning with any saver.

LangGraph logs that warning (and will block the type in a future release) when a saver's
serializer revives a class it was not told about. The loop's state keeps its models in
memory and plain data in checkpoints (`PlainDataChannel`, `plain_writes`), so a loop
checkpointed in a user's own `InMemorySaver()`, `SqliteSaver` or `PostgresSaver`, under
LangGraph's default settings or `LANGGRAPH_STRICT_MSGPACK=true`, reads back with no
warning; and threads written by release 0.1.0 (models in checkpoints) still load.
"""

from __future__ import annotations

import copy
import gc
import os
import pickle
import shutil
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command, Overwrite
from pydantic import BaseModel, ValidationError

from langgraph_refine import Attempt, RefineResult, Usage, create_refine_graph
from langgraph_refine._state import (
    PlainDataChannel,
    add_usage,
    dumped,
    merge_attempts,
    plain_writes,
)
from tests.conftest import POSTGRES_URI_ENV, postgres_uri

ROOT = Path(__file__).resolve().parents[1]
RELEASE_THREAD = ROOT / "tests" / "data" / "release_thread.sqlite"
SCORES = [0.4, 0.7, 0.6]

# Runs in a fresh interpreter (LangGraph reads LANGGRAPH_STRICT_MSGPACK at import): a
# paused-and-resumed loop, a loop as a node of a checkpointed parent, and an agent with
# RefineMiddleware, on each saver named (`memory`, `sqlite PATH`, `postgres URI LABEL`),
# with warnings as errors and LangGraph's serializer events recorded. LangGraph logs each
# warning once per process, so the savers share one: a warning fails the run whichever
# saver met the type first (a process each cost two seconds of imports six times over).
WORKER = r"""
import logging, sys, warnings
warnings.simplefilter("error")
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
events = []
register_serde_event_listener(events.append)

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict
from langgraph_refine import RefineMiddleware, RefineResult, create_refine_graph

SCORES = [0.4, 0.7, 0.6]
gen = lambda state: f"draft {len(state['attempts'])}"
ev = lambda response, state: SCORES[len(state["attempts"])]

def run(saver, label):
    graph = create_refine_graph(gen, ev, max_iterations=2, patience=None, human_review="final")
    graph = graph.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": label + "-review"}}
    graph.invoke({"task": "Write a tagline."}, cfg)
    graph.invoke(Command(resume={"action": "approve"}), cfg)
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert result.score_history == SCORES, result.score_history
    assert result.value == "draft 1", result.value

    class Parent(TypedDict):
        task: str
        response: str

    loop = create_refine_graph(gen, ev, max_iterations=2, patience=None).compile()
    parent = StateGraph(Parent).add_node("refine", loop).add_edge(START, "refine")
    parent = parent.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": label + "-parent"}}
    assert parent.invoke({"task": "Write a tagline."}, cfg)["response"] == "draft 1"
    parent.get_state(cfg, subgraphs=True)

    from langchain.agents import create_agent
    from tests.fakes import ScriptedChatModel
    refine = RefineMiddleware(lambda response, state: SCORES[len(state["attempts"])],
                              max_iterations=2, patience=None)
    model = ScriptedChatModel(replies=["one", "two", "three"])
    agent = create_agent(model, [], middleware=[refine], checkpointer=saver)
    cfg = {"configurable": {"thread_id": label + "-agent"}}
    agent.invoke({"messages": [("user", "Write a tagline.")]}, cfg)
    state = agent.get_state(cfg).values
    assert refine.result(state).score_history == SCORES

args = sys.argv[1:]
while args:
    kind = args.pop(0)
    if kind == "memory":
        run(InMemorySaver(), kind)
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        with SqliteSaver.from_conn_string(args.pop(0)) as saver:
            run(saver, kind)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver
        with PostgresSaver.from_conn_string(args.pop(0)) as saver:
            saver.setup()
            run(saver, kind + "-" + args.pop(0))
    assert events == [], (kind, events)
    print("clean", kind)
"""


@pytest.mark.postgres
@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_no_serializer_warning_with_any_saver(strict: bool, tmp_path: Path) -> None:
    uri = postgres_uri()
    if not uri:
        pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
    args = ["memory", "sqlite", str(tmp_path / "checkpoints.sqlite")]
    args += ["postgres", uri, f"{os.getpid()}-{tmp_path.name}-{strict}"]
    env = {k: v for k, v in os.environ.items() if k != "LANGGRAPH_STRICT_MSGPACK"}
    if strict:
        env["LANGGRAPH_STRICT_MSGPACK"] = "true"
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert proc.stdout.split() == ["clean", "memory", "clean", "sqlite", "clean", "postgres"]
    assert "Deserializing unregistered type" not in output, output[-4000:]
    assert "Blocked deserialization" not in output, output[-4000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-4000:]


def test_checkpoints_and_writes_hold_plain_data() -> None:
    # What reaches the serializer: plain data in the node's writes and the channels'
    # checkpoints; models again when the channel is read.
    attempt = Attempt(index=0, response="r", usage=Usage(calls=1))
    update = plain_writes({"attempts": [attempt], "pending": attempt, "usage": attempt.usage})
    assert update["attempts"] == [attempt.model_dump()]
    assert update["pending"] == attempt.model_dump()
    assert update["usage"] == Usage(calls=1).model_dump()

    channel = PlainDataChannel(list[Attempt], lambda left, right: [*left, *right])
    channel.update([[attempt.model_dump()]])
    assert channel.get() == [attempt]
    assert channel.checkpoint() == [attempt.model_dump()]
    assert channel.from_checkpoint([attempt.model_dump()]).get() == [attempt]


def test_a_nodes_own_dump_is_taken_back_as_its_model() -> None:
    # The dict a node wrote is the one the channel receives: the channel takes the model
    # it was dumped from instead of validating it again (`dumped`).
    attempt = Attempt(index=0, response="r", usage=Usage(calls=1))
    update = plain_writes({"pending": attempt, "usage": attempt.usage, "attempts": [attempt]})
    pending = PlainDataChannel(Attempt | None, lambda left, right: right)
    pending.update([update["pending"]])
    assert pending.get() is attempt
    assert merge_attempts([], update["attempts"])[0] is attempt
    assert add_usage(Usage(), update["usage"]) == attempt.usage
    # The same dump handed again (an in-process replay) still holds its model.
    again = PlainDataChannel(Attempt | None, lambda left, right: right)
    again.update([update["pending"]])
    assert again.get() is attempt


def test_a_dict_that_is_not_the_dump_is_validated() -> None:
    attempt = Attempt(index=0, response="r")
    plain = dumped(attempt)
    other = {**plain, "response": "changed"}  # equal keys, another object
    channel = PlainDataChannel(list[Attempt], lambda left, right: [*left, *right])
    channel.update([[other]])
    assert channel.get() == [attempt.model_copy(update={"response": "changed"})]
    with pytest.raises(ValidationError):
        merge_attempts([], [{**plain, "index": "not a number"}])
    # A dump of another model is no `Attempt`: its dict is validated (and fails here).
    with pytest.raises(ValidationError):
        merge_attempts([], [dumped(Usage())])


def test_a_dump_that_left_the_process_is_a_plain_dict() -> None:
    # Through a serializer, pickle or a deep copy a dump is plain data again, so what a
    # saver replays is validated; the model never reaches the serializer.
    attempt = Attempt(index=0, response="r")
    data = dumped(attempt)
    serde = JsonPlusSerializer()
    for copied in (
        serde.loads_typed(serde.dumps_typed(data)),
        pickle.loads(pickle.dumps(data)),
        copy.deepcopy(data),
    ):
        assert type(copied) is dict and copied == attempt.model_dump()
        revived = merge_attempts([], [copied])[0]
        assert revived == attempt and revived is not attempt


def test_nothing_outside_a_dump_keeps_its_model() -> None:
    # The model travels in its dump alone (no table beside it): once the dump is gone,
    # so is every reference the loop held to the model.
    attempt = Attempt(index=0, response="r")
    alive = weakref.ref(attempt)
    data = dumped(attempt)
    assert data.model is attempt
    del attempt, data
    gc.collect()
    assert alive() is None


def test_a_checkpointed_run_stores_plain_writes_and_values() -> None:
    # The models a node dumped are taken back in memory; the saver still sees plain data.
    saver = InMemorySaver()
    graph = create_refine_graph(
        lambda state: "draft", lambda response, state: 0.5, max_iterations=2, patience=None
    ).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "plain"}}
    graph.invoke({"task": "Write."}, cfg)
    stored = [
        saver.serde.loads_typed(value)
        for writes in saver.writes.values()
        for (_, _, value, _) in writes.values()
    ]
    stored += [saver.serde.loads_typed(blob) for blob in saver.blobs.values() if blob[0] != "empty"]
    assert stored and not any(_holds_model(value) for value in stored)
    assert RefineResult.from_state(graph.get_state(cfg)).score_history == [0.5, 0.5, 0.5]


def _holds_model(value: Any) -> bool:
    if isinstance(value, BaseModel):
        return True
    if isinstance(value, dict):
        return any(_holds_model(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_model(v) for v in value)
    return _holds_model(value.value) if isinstance(value, Overwrite) else False


def test_no_serializer_event_in_this_process() -> None:
    events: list[dict[str, Any]] = []
    register_serde_event_listener(events.append)
    graph = create_refine_graph(
        lambda state: f"draft {len(state['attempts'])}",
        lambda response, state: SCORES[len(state["attempts"])],
        max_iterations=2,
        patience=None,
        human_review="final",
    ).compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "events"}}
    graph.invoke({"task": "Write a tagline."}, cfg)
    graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert RefineResult.from_state(graph.get_state(cfg).values).score_history == SCORES
    assert [e for e in events if e.get("module", "").startswith("langgraph_refine")] == []


def _release_graphs(saver: Any) -> tuple[Any, Any]:
    def generate(state: Any) -> str:
        return f"draft {len(state['attempts'])}"

    def evaluate(response: str, state: Any) -> float:
        return SCORES[len(state["attempts"])]

    done = create_refine_graph(generate, evaluate, max_iterations=2, patience=None)
    reviewed = create_refine_graph(
        generate, evaluate, max_iterations=2, patience=None, human_review="final"
    )
    return done.compile(checkpointer=saver), reviewed.compile(checkpointer=saver)


def test_reads_and_resumes_a_thread_written_by_release_0_1(tmp_path: Path) -> None:
    # tests/data/release_thread.sqlite was written by 0.1.0 (tests/data/make_release_thread.py):
    # its checkpoints hold the models themselves. It still loads, and a paused review resumes.
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "release.sqlite"
    shutil.copy(RELEASE_THREAD, path)
    events: list[dict[str, Any]] = []
    register_serde_event_listener(events.append)
    with SqliteSaver.from_conn_string(str(path)) as saver:
        done, reviewed = _release_graphs(saver)
        finished = done.get_state({"configurable": {"thread_id": "finished"}}).values
        result = RefineResult.from_state(finished)
        assert result.score_history == SCORES
        assert result.value == "draft 1" and result.stop_reason == "max_iterations"
        assert all(isinstance(a, Attempt) for a in finished["attempts"])
        assert isinstance(finished["usage"], Usage)

        cfg = {"configurable": {"thread_id": "paused"}}
        payload = reviewed.get_state(cfg).interrupts[0].value
        assert payload["response"] == "draft 1" and payload["score"] == 0.7
        reviewed.invoke(Command(resume={"action": "approve"}), cfg)
        resumed = RefineResult.from_state(reviewed.get_state(cfg).values)
        assert resumed.stop_reason == "approved" and resumed.value == "draft 1"
        assert resumed.score_history == SCORES
    if os.environ.get("LANGGRAPH_STRICT_MSGPACK") == "true":
        # Strict mode revives the old models through the graph's own allowlist.
        assert [e for e in events if e["kind"] == "msgpack_blocked"] == []
