# ruff: noqa: F811 - pytest fixtures are imported from the CLI helper module
"""`langgraph.json` served by a real `langgraph dev`, driven with the langgraph-sdk client.

The server's model is a small scripted OpenAI-compatible HTTP server on loopback (the
real local model is covered by the recorded tests): it answers generator prompts with
`draft N` and judge prompts with a JSON verdict, and counts the calls.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_helpers import cli  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[1]


class ScriptedOpenAI(BaseHTTPRequestHandler):
    """`POST /v1/chat/completions`: canned replies in OpenAI's format, with usage."""

    requests: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        pass

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)  # type: ignore[attr-defined]
        refused = self.server.refuse  # type: ignore[attr-defined]
        if refused and refused in json.dumps(body["messages"]):
            # A client error: the loop does not retry it.
            self._json(400, {"error": {"message": f"refused: {refused}"}})
            return
        if OVERFLOW in json.dumps(body["messages"]):  # as llama.cpp says it
            message = "request (5000 tokens) exceeds the available context size (2048 tokens)"
            self._json(400, {"error": {"message": message, "type": "exceed_context_size_error"}})
            return
        text = (getattr(self.server, "script", None) or reply_for)(body)  # its own script
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        if body.get("stream"):
            self._stream(body, text, usage)
            return
        self._json(
            200,
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            },
        )

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, body: dict[str, Any], text: str, usage: dict[str, int]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0}
        chunks = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": usage},
        ]
        for chunk in chunks:
            payload = {**base, "model": body.get("model", "scripted"), **chunk}
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


OVERFLOW = "OVERFLOWING"
"""A prompt holding this gets the provider's context-length error."""

FALLING = "[refinements fall]"
"""A task holding this gets refinements that always score below what they refine."""


def reply_for(body: dict[str, Any]) -> str:
    prompt = "\n".join(str(m.get("content")) for m in body["messages"])
    if "PYTHON" in prompt and "<response_to_rate>" not in prompt:
        return "def f():\n    return 1\n"
    if body.get("response_format") or "<response_to_rate>" in prompt:
        rated = re.search(r"<response_to_rate>\s*(.*?)\s*</response_to_rate>", prompt, re.S)
        first = rated is not None and rated.group(1) == "draft 0"
        if FALLING in prompt:  # every refinement scores below the fresh draft it refines
            score = 0.5 if first else 0.2
            return json.dumps({"verdict": "FAIL", "score": score, "feedback": "add detail"})
        return json.dumps(
            {"verdict": "NEEDS_IMPROVEMENT", "score": 0.4, "feedback": "add a season word"}
            if first
            else {"verdict": "PASS", "score": 0.95, "feedback": "good"}
        )
    return f"draft {prompt.count('<answer>')}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def scripted_openai(script: Any = None) -> Iterator[ThreadingHTTPServer]:
    """A `ScriptedOpenAI` server on loopback; `script(body) -> text` replaces its replies."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedOpenAI)
    server.requests = []  # type: ignore[attr-defined]
    server.refuse = ""  # type: ignore[attr-defined]  # answer 400 to prompts holding this
    server.script = script  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def model_server() -> Iterator[ThreadingHTTPServer]:
    with scripted_openai() as server:
        yield server


@pytest.fixture(scope="module")
def langgraph_server(
    model_server: ThreadingHTTPServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`langgraph dev` serving `langgraph.json`, its model the scripted server above.

    Started the way `examples/batch_on_server.py` starts it (that example's `serve`).
    """
    from examples.batch_on_server import serve

    # Logs go outside the project: the dev server watches the project folder.
    logs = tmp_path_factory.mktemp("langgraph-dev") / "server.log"
    base_url = f"http://127.0.0.1:{model_server.server_address[1]}/v1"
    with serve(base_url, "scripted-model", logs=logs, state=logs.parent) as url:
        yield url


def calls(model_server: Any) -> tuple[int, int]:
    """(generator calls, judge calls) the scripted model has answered so far."""
    bodies = model_server.requests
    judge = sum(1 for b in bodies if "<response_to_rate>" in json.dumps(b["messages"]))
    return len(bodies) - judge, judge


def test_langgraph_json_names_the_two_graphs_and_says_what_each_does() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert set(config["graphs"]) == {"refine", "refine_reviewed"}
    for graph in config["graphs"].values():
        path, _, name = graph["path"].partition(":")
        assert (ROOT / path).is_file() and name
    # The descriptions are what an MCP host shows its model (tools/list).
    refine, reviewed = config["graphs"]["refine"], config["graphs"]["refine_reviewed"]
    assert "Returns `response`" in refine["description"]
    assert "`criteria`" in refine["description"] and "`task`" in refine["description"]
    assert "a person" in reviewed["description"]
    assert "not for an MCP host" in reviewed["description"]


def test_build_graph_requires_refine_model() -> None:
    from langgraph_refine.server import build_graph

    with pytest.raises(ValueError, match="REFINE_MODEL is not set"):
        build_graph(environ={})


def test_build_graph_reads_the_model_from_the_environment(monkeypatch: Any) -> None:
    from langchain_openai import ChatOpenAI

    from langgraph_refine.server import build_graph, refine_reviewed

    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    graph = build_graph(environ={"REFINE_MODEL": "my-model"})
    generator = graph.get_graph().nodes["generate"].data.generator  # type: ignore[union-attr]
    assert isinstance(generator, ChatOpenAI) and generator.model_name == "my-model"
    assert str(generator.root_client.base_url).rstrip("/") == "http://127.0.0.1:9/v1"
    assert "review" not in graph.nodes

    monkeypatch.setenv("REFINE_MODEL", "openai:other-model")
    reviewed = refine_reviewed()
    assert reviewed.name == "refine_reviewed"
    assert "review" in reviewed.nodes
    assert reviewed.checkpointer is None  # the server brings its own persistence


def test_loop_runs_on_a_saver_that_does_not_revive_models() -> None:
    # LangGraph Server's saver does not take the graph's msgpack allowlist, so under
    # strict msgpack it would not revive the loop's pydantic models; checkpoints hold
    # plain data, which the state's channels turn back into models.
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.types import Command

    from langgraph_refine import RefineResult, Usage, create_refine_graph
    from tests.fakes import ScriptedChatModel

    class ServerLikeSaver(InMemorySaver):
        def with_allowlist(self, extra_allowlist: Any) -> ServerLikeSaver:
            return self

    saver = ServerLikeSaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    model = ScriptedChatModel(replies=["one", "two", "three"])
    scores = iter([0.3, 0.6, 0.5])
    graph = create_refine_graph(
        model, lambda r, s: next(scores), max_iterations=1, human_review="final"
    ).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "dicts"}}
    graph.invoke({"task": "t"}, config)
    assert isinstance(graph.get_state(config).values["usage"], Usage)
    graph.invoke(Command(resume={"action": "revise", "feedback": "shorter"}), config)
    assert "shorter" in model.prompts[2]
    graph.invoke(Command(resume={"action": "reject"}), config)
    result = RefineResult.from_state(graph.get_state(config).values)
    assert result.stop_reason == "rejected"
    assert result.value == "two"
    assert [a.index for a in result.attempts] == [0, 1, 2]
    assert result.usage.calls == 3


@pytest.mark.server
@pytest.mark.slow
def test_full_run_through_the_server(langgraph_server: str, model_server: Any) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    graphs = {a["graph_id"] for a in client.assistants.search()}
    assert {"refine", "refine_reviewed"} <= graphs

    before = calls(model_server)
    thread = client.threads.create()
    output = client.runs.wait(thread["thread_id"], "refine", input={"task": "Write a haiku."})
    assert output["response"] == "draft 1"
    after = calls(model_server)
    # Two rounds, each one generation and one judge call.
    assert (after[0] - before[0], after[1] - before[1]) == (2, 2)

    state = client.threads.get_state(thread["thread_id"])
    assert state["next"] == []
    values = state["values"]
    assert values["stop_reason"] == "passed"
    assert [a["index"] for a in values["attempts"]] == [0, 1]
    assert [a["evaluation"]["score"] for a in values["attempts"]] == [0.4, 0.95]
    assert values["usage"]["calls"] == 4 and values["usage"]["total_tokens"] == 4 * 18


@pytest.mark.server
@pytest.mark.slow
def test_a_chats_refresh_of_the_served_answer_runs_the_loop_again(
    langgraph_server: str, model_server: Any
) -> None:
    # agent-chat-ui on the `refine` graph: `messages` in, the answer appended; its Refresh
    # runs the thread without input from the parent of the answer's first state.
    from langgraph_sdk import get_sync_client

    from tests.test_chat_server import regenerate_from

    client = get_sync_client(url=langgraph_server)
    try:
        thread = client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": "Write a haiku."}]}
        client.runs.wait(thread, "refine", input=request)
        answer = client.threads.get_state(thread)["values"]["messages"][-1]
        before = calls(model_server)
        checkpoint = regenerate_from(client, thread, answer["id"])
        client.runs.wait(thread, "refine", input=None, checkpoint=checkpoint)
        after = calls(model_server)
        assert (after[0] - before[0], after[1] - before[1]) == (2, 2), "the loop ran again"
        values: Any = client.threads.get_state(thread)["values"]
        assert [(m["type"], m["content"]) for m in values["messages"]] == [
            ("human", "Write a haiku."),
            ("ai", "draft 1"),
        ]
        assert values["messages"][-1]["id"] != answer["id"]
        assert values["usage"]["calls"] == 4, "the new loop's calls"
    finally:
        client.close()


@pytest.mark.server
@pytest.mark.slow
def test_review_interrupt_and_resume_through_the_server(
    langgraph_server: str, model_server: Any
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    thread_id = client.threads.create()["thread_id"]
    task = {"task": "Write a haiku about rain."}
    client.runs.wait(thread_id, "refine_reviewed", input=task)
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["review"]
    [interrupt] = state["interrupts"]
    payload = interrupt["value"]
    assert payload["task"] == task["task"]
    assert payload["response"] == "draft 1"
    assert payload["score"] == 0.95 and payload["stop_reason"] == "passed"
    assert {"feedback", "iteration"} <= payload.keys()
    paused_calls = calls(model_server)

    # A malformed answer: the review stays pending, with an error saying why.
    client.runs.wait(thread_id, "refine_reviewed", command={"resume": {"action": "ship"}})
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["review"]
    assert "'ship'" in state["interrupts"][0]["value"]["error"]

    output = client.runs.wait(
        thread_id,
        "refine_reviewed",
        command={"resume": {"action": "edit", "response": "Rain on the tin roof."}},
    )
    assert output["response"] == "Rain on the tin roof."
    state = client.threads.get_state(thread_id)
    assert state["next"] == []
    assert state["values"]["stop_reason"] == "edited"
    # Resuming repeated no model call; the edited text got its own evaluation (one judge call).
    assert calls(model_server) == (paused_calls[0], paused_calls[1] + 1)


@pytest.mark.server
@pytest.mark.slow
def test_revise_through_the_server_runs_one_more_round(
    langgraph_server: str, model_server: Any
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "refine_reviewed", input={"task": "Name a colour."})
    before = calls(model_server)
    client.runs.wait(
        thread_id,
        "refine_reviewed",
        command={"resume": {"action": "revise", "feedback": "Pick a warm colour."}},
    )
    after = calls(model_server)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)
    last_prompt = json.dumps(model_server.requests[-2]["messages"])
    assert "Pick a warm colour." in last_prompt
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["review"]
    assert state["interrupts"][0]["value"]["iteration"] == 2
    output = client.runs.wait(
        thread_id, "refine_reviewed", command={"resume": {"action": "approve"}}
    )
    assert output["response"] in {"draft 1", "draft 2"}
    assert client.threads.get_state(thread_id)["values"]["stop_reason"] == "approved"


@pytest.mark.server
@pytest.mark.slow
def test_round_events_stream_through_the_server(langgraph_server: str, model_server: Any) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    thread_id = client.threads.create()["thread_id"]
    events = [
        part.data
        for part in client.runs.stream(
            thread_id, "refine", input={"task": "Name a river."}, stream_mode="custom"
        )
        if part.event == "custom"
    ]
    rounds = [e for e in events if e["type"] == "round"]
    assert [(r["iteration"], r["score"], r["verdict"]) for r in rounds] == [
        (0, 0.4, "NEEDS_IMPROVEMENT"),
        (1, 0.95, "PASS"),
    ]
    assert rounds[0]["feedback"] == "add a season word"
    assert [e["stop_reason"] for e in events if e["type"] == "stop"] == ["passed"]


# -- `langgraph-refine batch --server`: the CLI as a client of the server ---------------


def served_record(client: Any, key: str) -> Any:
    """The strategy record `key` in the server's store, read through the SDK client.

    Its items (one per run, and fold items) are read as `strategy_records` reads them.
    """
    from types import SimpleNamespace

    from langgraph_refine._records._record import StrategyRecord
    from langgraph_refine._records._record_items import read_items, record_namespace

    found = client.store.search_items(list(record_namespace(key)), limit=1000)["items"]
    items = [SimpleNamespace(key=i["key"], value=i["value"]) for i in found]
    return StrategyRecord.from_view(read_items(items))


def _batch_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.server
@pytest.mark.slow
def test_batch_on_the_server_runs_each_task_on_its_thread_and_resumes(
    langgraph_server: str, model_server: Any, cli: Any, tmp_path: Path
) -> None:
    from langgraph_sdk import get_sync_client

    from langgraph_refine.cli._remote import thread_id_for

    # The runs use the default strategy, explore, which weighs the strategy record in the
    # server's store: start from none, so earlier tests' runs do not steer round 1.
    client = get_sync_client(url=langgraph_server)
    for item in client.store.search_items(["langgraph_refine", "strategy"], limit=1000)["items"]:
        client.store.delete_item(item["namespace"], item["key"])
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": f"t{i}", "task": f"Write haiku number {i}.", "max_iterations": 3} for i in range(4)
    ]
    lines[1]["budget"] = {"max_calls": 10}
    lines[2]["strategy"] = "explore"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines[:3]))
    before = calls(model_server)
    run = cli("batch", str(src), "--out", str(out), "--server", langgraph_server, "-c", "3")
    assert run.code == 0, run.err
    rows = {r["id"]: r for r in _batch_rows(out)}
    assert sorted(rows) == ["t0", "t1", "t2"]
    for task_id, row in rows.items():
        assert row["stop_reason"] == "passed" and row["value"] == "draft 1"
        assert row["score_history"] == [0.4, 0.95] and "error" not in row
        assert [a["index"] for a in row["attempts"]] == [0, 1]
        assert row["thread_id"] == thread_id_for(out, task_id)
    after = calls(model_server)
    assert (after[0] - before[0], after[1] - before[1]) == (6, 6)

    # Each task ran on its own thread, with its per-line options as the run's context.
    contexts = {}
    for task_id, row in rows.items():
        [server_run] = client.runs.list(row["thread_id"])
        contexts[task_id] = server_run["kwargs"]["context"]
        assert client.threads.get_state(row["thread_id"])["values"]["task"] == row["task"]
    # Only what the batch gave (--max-iterations): the rest is the server assistant's.
    assert contexts["t0"] == {"max_iterations": 3}
    assert contexts["t1"]["budget"] == {"max_calls": 10}
    assert contexts["t2"]["strategy"] == "explore" and "strategy" not in contexts["t0"]

    # A rerun with one more task runs only that one; finished ids are skipped.
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rerun = cli("batch", str(src), "--out", str(out), "--server", langgraph_server)
    assert rerun.code == 0, rerun.err
    assert "skipped 3" in rerun.out
    assert [r["id"] for r in _batch_rows(out)][3:] == ["t3"]
    again = calls(model_server)
    assert (again[0] - after[0], again[1] - after[1]) == (2, 2)


@pytest.mark.server
@pytest.mark.slow
def test_batch_on_the_server_writes_a_failed_run_as_an_error_row_and_retries_it(
    langgraph_server: str, model_server: Any, cli: Any, tmp_path: Path
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [{"id": "ok", "task": "Write a haiku."}, {"id": "bad", "task": "Write a BROKEN one."}]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    model_server.refuse = "BROKEN"
    try:
        run = cli("batch", str(src), "--out", str(out), "--server", langgraph_server)
    finally:
        model_server.refuse = ""
    assert run.code == 1  # a task failed
    rows = {r["id"]: r for r in _batch_rows(out)}
    assert rows["ok"]["stop_reason"] == "passed" and "error" not in rows["ok"]
    # The provider's own error, named as such (the server would hide its message).
    assert rows["bad"]["error"].startswith("ProviderError: the model provider failed")
    assert rows["bad"]["attempts"] == []  # the first generation failed: nothing to keep

    report = cli("report", str(out), "--html", str(tmp_path / "report.html"))
    assert report.code == 1, report.err  # a failed task
    failures = [line for line in report.out.splitlines() if line.startswith("failed:")]
    assert failures == [f"failed: id 'bad': {rows['bad']['error']}"]

    # The rerun skips the finished task and retries the failed one, on the same thread.
    before = calls(model_server)
    rerun = cli("batch", str(src), "--out", str(out), "--server", langgraph_server)
    assert rerun.code == 0, rerun.err
    final = [r for r in _batch_rows(out) if r["id"] == "bad"][-1]
    assert final["stop_reason"] == "passed" and "error" not in final
    assert final["value"] == "draft 1" and final["thread_id"] == rows["bad"]["thread_id"]
    after = calls(model_server)
    assert (after[0] - before[0], after[1] - before[1]) == (2, 2)  # only "bad" ran


@pytest.mark.server
@pytest.mark.slow
def test_batch_on_the_server_refuses_an_unknown_assistant(
    langgraph_server: str, cli: Any, tmp_path: Path
) -> None:
    from tests.test_cli_helpers import assert_one_line_error

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text('{"id": 1, "task": "t"}\n')
    run = cli(
        "batch", str(src), "--out", str(out), "--server", langgraph_server, "--assistant", "nope"
    )
    assert_one_line_error(run, "--assistant 'nope' is unknown", "refine, refine_reviewed")
    assert not out.exists()


@pytest.mark.slow
def test_batch_on_an_unreachable_server_is_one_line(cli: Any, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text('{"id": 1, "task": "t"}\n{"id": 2, "task": "u", "memory": "all"}\n')
    run = cli("batch", str(src), "--out", str(out), "--server", url)
    assert run.code == 1
    lines = [line for line in run.err.splitlines() if line.startswith("langgraph-refine: ")]
    assert len(lines) == 2 and "Traceback" not in run.err
    assert "in.jsonl:2: memory cannot be set per run on a server" in lines[0]
    assert f"cannot reach the LangGraph Server at {url}" in lines[1]


# -- a run's check in its context --------------------------------------------------------

CHECKED_LINES: list[dict[str, Any]] = [
    {"id": "kw", "task": "Write a draft.", "evaluator": "contains:draft,1", "max_iterations": 2},
    {"id": "re", "task": "Write a draft.", "evaluator": "regex:^draft [1-9]$"},
    {"id": "both", "task": "Write a draft.", "evaluator": ["words:2-3", "no_repetition"]},
    {
        "id": "schema",
        "task": "Write a draft.",
        "evaluator": 'schema:{"type": "object", "required": ["name"]}',
        "max_iterations": 1,
    },
    {  # a typed answer (the line's "schema"), checked by a regex on its JSON text
        "id": "typed",
        "task": "Rate a draft.",
        "schema": {
            "type": "object",
            "properties": {"verdict": {"type": "string"}, "score": {"type": "number"}},
            "required": ["verdict", "score"],
        },
        "evaluator": 'regex:"verdict"',
        "max_iterations": 0,
    },
]
# A strategy that keeps no strategy record: the server's store holds what earlier runs
# learned and the local batch starts with an empty one, so explore could choose
# differently on each side; these lines compare the checks, not the moves.
for _line in CHECKED_LINES:
    _line["strategy"] = "chain"


def check_score(line: dict[str, Any], value: str) -> float:
    """The score the line's own check gives `value`, computed here with the library."""
    from langgraph_refine._calls._specs import parse_specs
    from langgraph_refine.evaluators._combine import as_evaluator
    from langgraph_refine.evaluators._from_specs import build_evaluators

    built = build_evaluators(parse_specs(line["evaluator"]), judge_model=lambda: None)
    return as_evaluator(built).evaluate(value, {"task": line["task"]}).score


@pytest.mark.server
@pytest.mark.slow
def test_one_batch_file_with_per_line_checks_gives_the_same_rows_locally_and_on_the_server(
    langgraph_server: str, model_server: Any, cli: Any, tmp_path: Path
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in CHECKED_LINES))
    on_server, local = tmp_path / "server.jsonl", tmp_path / "local.jsonl"
    before = calls(model_server)
    run = cli("batch", str(src), "--out", str(on_server), "--server", langgraph_server)
    assert run.code == 0, run.err
    assert calls(model_server)[1] == before[1]  # the checks ran, not the served judge
    base_url = f"http://127.0.0.1:{model_server.server_address[1]}/v1"
    run = cli("batch", str(src), "--out", str(local), "--model", "m", "--base-url", base_url)
    assert run.code == 0, run.err

    server_rows = {r["id"]: r for r in _batch_rows(on_server)}
    local_rows = {r["id"]: r for r in _batch_rows(local)}
    assert sorted(server_rows) == sorted(local_rows) == sorted(r["id"] for r in CHECKED_LINES)
    for line in CHECKED_LINES:
        row, twin = server_rows[line["id"]], local_rows[line["id"]]
        assert set(row) - {"thread_id"} == set(twin), line["id"]
        for key in ("value", "score", "score_history", "stop_reason", "iterations"):
            assert row[key] == twin[key], (line["id"], key)
        assert row["score"] == pytest.approx(check_score(line, row["value"]))
    assert server_rows["kw"]["score_history"] == [0.5, 1.0]  # "draft 0", then "draft 1"
    assert server_rows["re"]["score_history"][0] == 0.0
    assert server_rows["schema"]["score_history"] == [0.0, 0.0]
    typed = server_rows["typed"]
    assert typed["score"] == 1.0 and typed["output"] == local_rows["typed"]["output"]
    assert typed["output"]["verdict"] == "PASS"  # the object the scripted model answered

    # The check travelled as the run's context.
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    [server_run] = client.runs.list(server_rows["both"]["thread_id"])
    assert server_run["kwargs"]["context"]["evaluator"] == ["words:2-3", "no_repetition"]
    [typed_run] = client.runs.list(typed["thread_id"])
    assert typed_run["kwargs"]["context"]["output_schema"] == CHECKED_LINES[-1]["schema"]


LEAVES_A_FILE = """
import pathlib
pathlib.Path({marker!r}).write_text("code ran")

def test_f():
    assert f() == 1
"""


def code_check(folder: Path) -> tuple[Path, Path]:
    """A python-tests file whose code, if it ever runs, leaves `marker` behind."""
    marker, tests = folder / "ran.txt", folder / "tests.py"
    tests.write_text(LEAVES_A_FILE.format(marker=str(marker)))
    return tests, marker


@pytest.mark.server
@pytest.mark.slow
def test_a_served_graph_learns_from_earlier_runs_through_the_servers_store(
    langgraph_server: str,
) -> None:
    import uuid

    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    # A record of this test's own (per-run context), so other tests' runs do not count.
    key = f"served-{uuid.uuid4().hex}"
    context = {"record_key": key, "max_iterations": 3, "patience": 3}
    task = {"task": f"Write a haiku. {FALLING}"}

    def round_1_parent() -> Any:
        thread_id = client.threads.create()["thread_id"]
        client.runs.wait(thread_id, "refine", input=task, context=context)
        attempts = client.threads.get_state(thread_id)["values"]["attempts"]
        assert len(attempts) == 4
        return attempts[1]

    first = round_1_parent()
    assert first["parent"] == 0  # nothing learned yet: round 1 refines attempt 0
    assert served_record(client, key).moves["refine"].fell >= 1  # the first run's rounds
    later = [round_1_parent() for _ in range(3)]
    assert later[-1]["parent"] is None  # a later run read them: it samples in round 1
    assert later[-1]["move"] not in ("refine", "revise")
    record = served_record(client, key)
    assert len(record.runs) == 4
    assert sum(m.rounds for m in record.moves.values()) == 4 * 3


@pytest.mark.server
@pytest.mark.slow
def test_user_errors_reach_the_row_and_the_report_with_their_own_message(
    langgraph_server: str, model_server: Any, cli: Any, tmp_path: Path
) -> None:
    tests, marker = code_check(tmp_path)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": "code", "task": "Write PYTHON code.", "evaluator": f"python-tests:{tests}"},
        {"id": "overflow", "task": f"Summarise {OVERFLOW} text."},
        {"id": "down", "task": "Write a BROKEN one."},
    ]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    before = calls(model_server)
    model_server.refuse = "BROKEN"
    try:
        run = cli("batch", str(src), "--out", str(out), "--server", langgraph_server)
    finally:
        model_server.refuse = ""
    assert run.code == 1
    errors = {r["id"]: r["error"] for r in _batch_rows(out)}
    # Refused by a default deployment before any model call: no code ran.
    assert errors["code"].startswith(f"SpecError: evaluator spec 'python-tests:{tests}' is refused")
    assert "LANGGRAPH_REFINE_ALLOW_CODE_CHECKS=1" in errors["code"]
    assert not marker.exists()
    assert errors["overflow"].startswith("ContextLengthError: ")
    assert "exceeds the model's context" in errors["overflow"]
    assert errors["down"].startswith(
        "ProviderError: the model provider failed in node 'generate' (HTTP 400)"
    )
    assert "refused: BROKEN" in errors["down"]
    assert "internal error" not in json.dumps(errors)
    sent = model_server.requests[sum(before) :]
    assert not any("PYTHON" in json.dumps(body) for body in sent)

    report = cli("report", str(out), "--html", str(tmp_path / "report.html"))
    assert report.code == 1, report.err  # failed tasks
    for task_id, error in errors.items():
        assert f"failed: id {task_id!r}: {error}" in report.out.splitlines()


@pytest.mark.server
@pytest.mark.slow
def test_a_run_sets_its_judge_model_and_max_tokens_within_the_deployments_cap(
    langgraph_server: str, model_server: Any
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    thread = client.threads.create()
    first = len(model_server.requests)
    client.runs.wait(
        thread["thread_id"],
        "refine",
        input={"task": "Write a haiku."},
        context={"judge_model": "another-judge", "max_tokens": 40, "max_iterations": 0},
    )
    generation, judging = model_server.requests[first:]
    assert generation["max_completion_tokens"] == 40 and generation["model"] == "scripted-model"
    assert judging["model"] == "another-judge" and judging["max_completion_tokens"] == 40
    state = client.threads.get_state(thread["thread_id"])["values"]
    assert state["stop_reason"] == "max_iterations"

    # The deployment's cap (REFINE_MAX_TOKENS=160 in `serve`) stands; the message says so.
    from examples.batch_on_server import MAX_TOKENS

    failed = client.runs.create(
        client.threads.create()["thread_id"],
        "refine",
        input={"task": "Write a haiku."},
        context={"max_tokens": MAX_TOKENS + 1},
    )
    client.runs.join(failed["thread_id"], failed["run_id"])
    run = client.runs.get(failed["thread_id"], failed["run_id"])
    assert run["status"] == "error"
    assert len(model_server.requests) == first + 2  # refused before any model call
    # Every bad option reaches the client with its own message, before any model call.
    for context, message in [
        ({"max_tokens": MAX_TOKENS + 1}, f"above this deployment's cap of {MAX_TOKENS}"),
        ({"budget": {"max_calls": -1}}, "ValueError: .*max_calls"),
        ({"strategy": "nope"}, "ValueError: strategy must be one of"),
        ({"evaluator": "words:9-2"}, "SpecError: .*MIN \\(9\\) is greater than MAX"),
    ]:
        with pytest.raises(Exception, match=message):
            client.runs.wait(
                client.threads.create()["thread_id"],
                "refine",
                input={"task": "Write a haiku."},
                context=context,
                raise_error=True,
            )
    assert len(model_server.requests) == first + 2


@pytest.fixture(scope="module")
def code_checks_server(
    model_server: ThreadingHTTPServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A second deployment, one that allows code checks; yields its URL and working folder."""
    from examples.batch_on_server import serve

    folder = tmp_path_factory.mktemp("langgraph-dev-code-checks")
    base_url = f"http://127.0.0.1:{model_server.server_address[1]}/v1"
    allowed = {"LANGGRAPH_REFINE_ALLOW_CODE_CHECKS": "1"}
    with serve(
        base_url, "scripted-model", logs=folder / "server.log", settings=allowed, state=folder
    ) as url:
        yield url, folder


@pytest.mark.server
@pytest.mark.slow
def test_a_deployment_that_allows_code_checks_runs_them(
    code_checks_server: tuple[str, Path], cli: Any, tmp_path: Path
) -> None:
    tests, marker = code_check(tmp_path)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    line = {"id": "code", "task": "Write PYTHON code.", "evaluator": f"python-tests:{tests}"}
    src.write_text(json.dumps(line) + "\n")
    url, _ = code_checks_server
    run = cli("batch", str(src), "--out", str(out), "--server", url)
    assert run.code == 0, run.err
    [row] = _batch_rows(out)
    assert row["score"] == 1.0 and row["stop_reason"] == "target_reached"
    assert marker.read_text() == "code ran"


@pytest.mark.server
@pytest.mark.slow
def test_batch_server_reads_a_json_schema_file_on_the_servers_disk(
    code_checks_server: tuple[str, Path],
    cli: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    url, served = code_checks_server
    schema = tmp_path / "server-side" / "person.json"
    schema.parent.mkdir()
    schema.write_text(json.dumps({"type": "object", "required": ["name"]}))
    # A path the server (working in its own folder) resolves, and the client's does not.
    relative = os.path.relpath(schema, served)
    client = tmp_path / "client"
    client.mkdir()
    line = {"id": "p", "task": "Describe a person.", "evaluator": f"json-schema:{relative}"}
    (client / "in.jsonl").write_text(json.dumps(line) + "\n")
    monkeypatch.chdir(client)
    run = cli("batch", "in.jsonl", "--out", "out.jsonl", "--server", url, "--max-iterations", "0")
    assert "not found" not in run.err and "skipped" not in run.err, run.err
    row = json.loads((client / "out.jsonl").read_text())
    assert "error" not in row, row
    feedback = row["attempts"][0]["evaluation"]["feedback"]
    assert "JSON" in feedback or "json" in feedback  # the server's schema check judged it


@pytest.mark.server
@pytest.mark.slow
def test_a_served_graph_keys_its_record_by_model_and_evaluator(
    langgraph_server: str,
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "refine", input={"task": "Name a lake."})
    from langgraph_refine._records._record_items import key_of

    found = client.store.search_items(["langgraph_refine", "strategy"], limit=1000)
    keys = {key_of(tuple(item["namespace"])) for item in found["items"]}
    assert "openai:scripted-model|llm_judge" in keys
    assert served_record(client, "openai:scripted-model|llm_judge").moves


@pytest.mark.server
@pytest.mark.slow
def test_batch_on_the_server_learns_in_the_servers_store(
    langgraph_server: str, cli: Any, tmp_path: Path
) -> None:
    import uuid

    from langgraph_sdk import get_sync_client

    # Nothing is sent for the record: the served graph keeps it in the server's store
    # under its default key, so the batch's tasks add to it.
    client = get_sync_client(url=langgraph_server)

    def counted() -> int:
        record = served_record(client, "openai:scripted-model|llm_judge")
        return sum(m.rounds for m in record.moves.values())

    before = counted()
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    tag = uuid.uuid4().hex[:8]
    lines = [{"id": f"s{i}", "task": f"Name a bird {tag} {i}."} for i in range(2)]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = cli("batch", str(src), "--out", str(out), "--server", langgraph_server)
    assert run.code == 0, run.err
    rounds = sum(r["iterations"] for r in _batch_rows(out))
    assert rounds == 2 and counted() == before + rounds


def test_run_context_carries_the_lines_check_and_the_command_lines_models() -> None:
    from langgraph_refine.cli._batch import BatchItem
    from langgraph_refine.cli._options import CommandOptions
    from langgraph_refine.cli._remote import run_context

    options = CommandOptions().override({"evaluator": ["contains:a,b", "no-repetition"]})
    item = BatchItem(line=1, id="x", task="t", options=options, given=frozenset({"evaluator"}))
    context = run_context(item, {"judge_model": "judge-model", "max_tokens": 64})
    assert context["evaluator"] == ["contains:a,b", "no-repetition"]
    assert context["judge_model"] == "judge-model" and context["max_tokens"] == 64
    plain = BatchItem(line=2, id="y", task="t", options=CommandOptions())
    assert "evaluator" not in run_context(plain) and "judge_model" not in run_context(plain)


def test_a_provider_outage_fails_a_served_graph_with_a_provider_error() -> None:
    import httpx
    import openai
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_refine import ProviderError, create_refine_graph
    from langgraph_refine.server import explain_error
    from tests.fakes import ScriptedChatModel, scores

    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    model = ScriptedChatModel(replies=[openai.APIConnectionError(request=request)])
    builder = create_refine_graph(model, scores(1.0), retry_policy=None)
    builder.set_node_defaults(error_handler=explain_error)
    # On a thread (an SDK client's run): a ProviderError, which the server passes on.
    graph = builder.compile(checkpointer=InMemorySaver())
    with pytest.raises(ProviderError) as info:
        graph.invoke({"task": "Write a haiku."}, {"configurable": {"thread_id": "outage"}})
    said = "the model provider failed in node 'generate': APIConnectionError: Connection error."
    assert str(info.value) == said
    assert isinstance(info.value, RuntimeError)  # a server passes its message on
    assert isinstance(info.value.__cause__, openai.APIConnectionError)
    # Without one (an MCP call): named by the same message, which is all MCP shows.
    builder = create_refine_graph(model, scores(1.0), retry_policy=None)
    with pytest.raises(ValueError) as by_mcp:
        builder.set_node_defaults(error_handler=explain_error).compile().invoke({"task": "t"})
    assert type(by_mcp.value).__name__ == said
    # Errors of the user's own making are raised as they were.
    builder = create_refine_graph(ScriptedChatModel(), scores(1.0))
    graph = builder.set_node_defaults(error_handler=explain_error).compile()
    with pytest.raises(ValueError, match="unknown evaluator spec 'nope'"):
        graph.invoke({"task": "Write a haiku."}, context={"evaluator": "nope"})


# -- the served graphs as MCP tools (LangGraph Server's /mcp endpoint) -----------------------


async def mcp_call(url: str, action: Any) -> Any:
    """Run `action(session)` in an MCP client session on the server's `/mcp` endpoint."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(f"{url}/mcp") as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await action(session)


def tool_result(result: Any) -> dict[str, Any]:
    """The output of a successful MCP call: LangGraph Server sends `repr()` of the run's output."""
    assert not result.isError, result.content
    [content] = result.content
    output: dict[str, Any] = ast.literal_eval(content.text)
    return output


def tool_error(result: Any) -> str:
    """The text of a failed MCP call."""
    assert result.isError
    [content] = result.content
    text: str = content.text
    return text


@pytest.mark.server
@pytest.mark.slow
async def test_an_mcp_host_sees_what_each_graph_does_and_what_it_takes(
    langgraph_server: str,
) -> None:
    from langgraph_refine._decisions._options import CONTEXT_KEYS, DEFAULTS, declaration

    async def tools(session: Any) -> Any:
        return {tool.name: tool for tool in (await session.list_tools()).tools}

    listed = await mcp_call(langgraph_server, tools)
    refine, reviewed = listed["refine"], listed["refine_reviewed"]
    assert refine.description.startswith("Write an answer to `task` and improve it")
    assert "Returns `response`" in refine.description and "`score`" in refine.description
    assert "not for an MCP host" in reviewed.description
    properties = refine.inputSchema["properties"]
    # The request and every option a run may set, each with its type, meaning and default.
    assert set(properties) == {"task", "messages", "criteria"} | CONTEXT_KEYS
    assert {"type": "array", "items": {"type": "string"}} in properties["criteria"]["anyOf"]
    iterations = properties["max_iterations"]
    assert iterations["type"] == "integer" and iterations["default"] == DEFAULTS.max_iterations
    assert iterations["description"] == declaration("max_iterations").tool
    assert properties["strategy"]["enum"] == ["chain", "explore", "sample"]
    assert refine.inputSchema["additionalProperties"] is False
    assert refine.inputSchema["required"] == ["task"]
    assert properties["messages"]["type"] == "array"
    # What a host reads to choose the tool and fill it in: at most 4,000 characters.
    for tool in (refine, reviewed):
        assert len(tool.description + json.dumps(tool.inputSchema)) <= 4000


@pytest.mark.server
@pytest.mark.slow
async def test_an_mcp_host_calls_refine_with_criteria_that_reach_the_judge(
    langgraph_server: str, model_server: Any
) -> None:
    criterion = "Mention the season by name."
    before = len(model_server.requests)

    async def call(session: Any) -> Any:
        arguments = {"task": "Write a haiku.", "criteria": [criterion]}
        return await session.call_tool("refine", arguments)

    output = tool_result(await mcp_call(langgraph_server, call))
    # The answer, and what a host needs to trust it: its score, verdict and why it stopped.
    assert output["response"] == "draft 1"
    assert (output["score"], output["verdict"], output["stop_reason"]) == (0.95, "PASS", "passed")
    assert output["usage"]["calls"] == 4 and output["usage"]["total_tokens"] == 4 * 18
    judged = [
        json.dumps(body["messages"])
        for body in model_server.requests[before:]
        if "<response_to_rate>" in json.dumps(body["messages"])
    ]
    assert judged and all(criterion in prompt for prompt in judged)


@pytest.mark.server
@pytest.mark.slow
async def test_an_mcp_host_sets_the_runs_options_in_its_arguments(
    langgraph_server: str, model_server: Any
) -> None:
    before = calls(model_server)

    async def call(session: Any) -> Any:
        arguments = {"task": "Write a haiku.", "max_iterations": 0, "evaluator": "words:1-3"}
        return await session.call_tool("refine", arguments)

    output = tool_result(await mcp_call(langgraph_server, call))
    # One draft ("draft 0", two words), checked by the word count, not the judge model.
    assert output["response"] == "draft 0"
    assert (output["score"], output["verdict"], output["stop_reason"]) == (
        1.0,
        None,
        "target_reached",
    )
    after = calls(model_server)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 0)


@pytest.mark.server
@pytest.mark.slow
async def test_an_mcp_host_reads_why_a_bad_option_was_refused(
    langgraph_server: str, model_server: Any
) -> None:
    before = len(model_server.requests)

    async def call(session: Any) -> Any:
        return [
            await session.call_tool("refine", {"task": "Write a haiku.", "max_iterations": -1}),
            await session.call_tool("refine", {"task": "Write a haiku.", "strategy": "greedy"}),
        ]

    iterations, strategy = await mcp_call(langgraph_server, call)
    assert tool_error(iterations) == "max_iterations must be an integer >= 0, got -1"
    assert tool_error(strategy) == (
        "strategy must be one of 'chain', 'explore', 'sample'; got 'greedy'"
    )
    assert len(model_server.requests) == before  # refused before any model call


@pytest.mark.server
@pytest.mark.slow
async def test_an_mcp_host_reads_a_misspelt_argument_and_a_refusal_after_prepare(
    langgraph_server: str, model_server: Any
) -> None:
    before = len(model_server.requests)

    async def call(session: Any) -> Any:
        return [
            await session.call_tool("refine", {"task": "Write a haiku.", "max_iteration": 2}),
            # Refused when the first generation would start (above REFINE_MAX_TOKENS).
            await session.call_tool("refine", {"task": "Write a haiku.", "max_tokens": 100000}),
        ]

    typo, cap = await mcp_call(langgraph_server, call)
    assert tool_error(typo).startswith("unknown argument(s) 'max_iteration': the arguments are")
    assert "max_iterations" in tool_error(typo)
    assert tool_error(cap).startswith(
        "max_tokens=100000 in the run's context is above this deployment's cap of "
    )
    assert len(model_server.requests) == before


@pytest.mark.server
@pytest.mark.slow
async def test_an_mcp_host_calling_the_reviewed_graph_is_told_to_call_refine(
    langgraph_server: str, model_server: Any
) -> None:
    before = len(model_server.requests)

    async def call(session: Any) -> Any:
        return await session.call_tool("refine_reviewed", {"task": "Write a haiku."})

    text = tool_error(await mcp_call(langgraph_server, call))
    assert text.startswith("refine_reviewed pauses for a person")
    assert "call the `refine` tool instead" in text
    assert len(model_server.requests) == before


@pytest.mark.server
@pytest.mark.slow
def test_an_sdk_client_sets_options_in_the_input_for_one_run(
    langgraph_server: str, model_server: Any
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.wait(
        thread_id, "refine", input={"task": "Name a lake.", "max_iterations": 0}
    )
    assert (first["stop_reason"], first["usage"]["calls"]) == ("max_iterations", 2)
    second = client.runs.wait(thread_id, "refine", input={"task": "Name a lake."})
    assert (second["stop_reason"], second["usage"]["calls"]) == ("passed", 4)
    # On a thread, a refused run's error keeps its type (the SDK shows type and message).
    with pytest.raises(Exception, match=r"^ValueError: option\(s\) set in both") as refused:
        client.runs.wait(
            thread_id,
            "refine",
            input={"task": "Name a lake.", "max_iterations": 1},
            context={"max_iterations": 2},
            raise_error=True,
        )
    assert "max_iterations: 2 in the context, 1 in the input" in str(refused.value)
    with pytest.raises(Exception, match=r"^ValueError: unknown argument\(s\) 'max_iteration'"):
        client.runs.wait(
            thread_id,
            "refine",
            input={"task": "Name a lake.", "max_iteration": 1},
            raise_error=True,
        )


@pytest.mark.server
@pytest.mark.slow
def test_an_a2a_client_sends_the_task_as_a_message_and_gets_the_best_answer(
    langgraph_server: str,
) -> None:
    import httpx
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    # The graph's own assistant: other tests on this server (and servers before it, which
    # share `langgraph dev`'s state folder) create assistants of the same graph.
    [assistant] = client.assistants.search(
        graph_id="refine", metadata={"created_by": "system"}, limit=1
    )
    card = httpx.get(
        f"{langgraph_server}/.well-known/agent-card.json",
        params={"assistant_id": assistant["assistant_id"]},
    ).json()
    assert card["description"].startswith("Write an answer to `task` and improve it")
    [skill] = card["skills"]
    assert skill["metadata"]["inputSchema"]["supportsA2A"] is True
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "parts": [{"kind": "text", "text": "Write a haiku."}],
                "messageId": "a2a-1",
            }
        },
    }
    reply = httpx.post(
        f"{langgraph_server}/a2a/{assistant['assistant_id']}", json=send, timeout=120
    ).json()
    task = reply["result"]
    assert task["status"]["state"] == "completed"
    [artifact] = task["artifacts"]
    assert artifact["parts"] == [{"kind": "text", "text": "draft 1"}]


def a2a_send(url: str, assistant_id: str, parts: list[dict[str, Any]], **ids: str) -> Any:
    """An A2A `message/send` of `parts` (with `contextId` / `taskId` when given); its task."""
    import httpx

    message = {"role": "user", "parts": parts, "messageId": f"m-{len(str(parts))}", **ids}
    send = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    reply = httpx.post(f"{url}/a2a/{assistant_id}", json=send, timeout=120).json()
    assert "result" in reply, reply
    return reply["result"].get("task", reply["result"])


def system_assistant(url: str, graph: str) -> str:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url)
    [assistant] = client.assistants.search(
        graph_id=graph, metadata={"created_by": "system"}, limit=1
    )
    return str(assistant["assistant_id"])


@pytest.mark.server
@pytest.mark.slow
def test_an_a2a_client_reads_why_a_task_was_refused(
    langgraph_server: str, model_server: Any
) -> None:
    assistant = system_assistant(langgraph_server, "refine")
    before = len(model_server.requests)
    cases = [
        ([{"kind": "text", "text": "  "}], "task must be"),
        (
            [
                {"kind": "text", "text": "Write a haiku."},
                {"kind": "data", "data": {"max_iterations": -1}},
            ],
            "max_iterations must be an integer >= 0, got -1",
        ),
        (
            [
                {"kind": "text", "text": "Write a haiku."},
                {"kind": "data", "data": {"max_iteration": 2}},
            ],
            "unknown argument(s) 'max_iteration': the arguments are",
        ),
    ]
    for parts, reason in cases:
        task = a2a_send(langgraph_server, assistant, parts)
        [part] = task["status"]["message"]["parts"]
        assert part["text"].startswith("Error executing assistant: "), part
        assert reason in part["text"], part["text"]
    assert len(model_server.requests) == before


def a2a_text(task: dict[str, Any]) -> str:
    """The text of a completed A2A task's answer."""
    assert task["status"]["state"] == "completed", task["status"]
    [artifact] = task["artifacts"]
    return "".join(part.get("text", "") for part in artifact["parts"])


@pytest.mark.server
@pytest.mark.slow
def test_an_a2a_client_answers_a_review_in_text_or_with_a_data_part(
    langgraph_server: str, model_server: Any
) -> None:
    assistant = system_assistant(langgraph_server, "refine_reviewed")
    ask = [{"kind": "text", "text": "Write a haiku."}]

    def paused(task: dict[str, Any]) -> dict[str, str]:
        assert task["status"]["state"] == "input-required", task["status"]
        return {"contextId": task["contextId"], "taskId": task["id"]}

    # "approve" in text approves the answer shown.
    task = paused(a2a_send(langgraph_server, assistant, ask))
    approved = a2a_send(langgraph_server, assistant, [{"kind": "text", "text": "approve"}], **task)
    assert a2a_text(approved) == "draft 1"

    # Other text asks for one more answer; then a data part edits it.
    task = paused(a2a_send(langgraph_server, assistant, ask))
    generated = calls(model_server)[0]
    again = a2a_send(
        langgraph_server, assistant, [{"kind": "text", "text": "Name the season."}], **task
    )
    assert calls(model_server)[0] == generated + 1  # the revision, then the review again
    task = paused(again)
    edit = {"action": "edit", "response": "Autumn rain, my own."}
    edited = a2a_send(langgraph_server, assistant, [{"kind": "data", "data": edit}], **task)
    assert a2a_text(edited) == "Autumn rain, my own."
