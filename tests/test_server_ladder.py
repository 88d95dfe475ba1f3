# ruff: noqa: F811 - pytest fixtures are imported from the CLI helper module
"""A run's own ladder of models on a real `langgraph dev` server (the run context's `models`).

The deployment allows two models beside its own (`REFINE_MODELS`); the model server is
the CLI tests' scripted OpenAI-compatible server, answering by the requested model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_helpers import (  # noqa: F401 - fixture
    ScriptedOpenAI,
    cli,
    is_judge,
    judge_json,
    rated_text,
)

pytestmark = [pytest.mark.server, pytest.mark.slow]

SERVED, CHEAP, STRONG = "served-model", "cheap-model", "strong-model"


def by_model(body: dict[str, Any]) -> str:
    """The judge passes only the strong model's answer; generators answer by their model."""
    if is_judge(body):
        good = "strong" in rated_text(body)
        return judge_json(0.95 if good else 0.2, "PASS" if good else "NEEDS_IMPROVEMENT")
    return f"an answer by {body['model']}"


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI(by_model) as server:
        yield server


@pytest.fixture(scope="module")
def langgraph_server(
    model_server: ScriptedOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    from examples.batch_on_server import serve

    logs = tmp_path_factory.mktemp("langgraph-dev-ladder") / "server.log"
    settings = {"REFINE_MODELS": f"{CHEAP},{STRONG}"}
    with serve(
        model_server.base_url, SERVED, logs=logs, settings=settings, state=logs.parent
    ) as url:
        yield url


def test_a_runs_models_climb_on_the_server_and_the_judge_stays_on_the_served_model(
    langgraph_server: str, model_server: ScriptedOpenAI
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    thread = client.threads.create()
    first = len(model_server.requests)
    output = client.runs.wait(
        thread["thread_id"],
        "refine",
        input={"task": "Answer well."},
        context={"models": [CHEAP, STRONG], "strategy": "chain"},
    )
    assert output["response"] == f"an answer by {STRONG}"
    values = client.threads.get_state(thread["thread_id"])["values"]
    assert [(a["model"], a["rung"]) for a in values["attempts"]] == [
        (f"openai:{CHEAP}", 0),
        (f"openai:{CHEAP}", 0),
        (f"openai:{STRONG}", 1),
    ]
    sent = model_server.requests[first:]
    assert [b["model"] for b in sent if not is_judge(b)] == [CHEAP, CHEAP, STRONG]
    assert {b["model"] for b in sent if is_judge(b)} == {SERVED}


def test_a_model_the_deployment_does_not_list_is_refused_before_any_call(
    langgraph_server: str, model_server: ScriptedOpenAI
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    first = len(model_server.requests)
    thread = client.threads.create()
    run = client.runs.create(
        thread["thread_id"],
        "refine",
        input={"task": "Answer well."},
        context={"models": [CHEAP, "dear-model"]},
    )
    client.runs.join(thread["thread_id"], run["run_id"])
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "error"
    with pytest.raises(Exception, match="'dear-model' is not one this deployment allows"):
        client.runs.wait(
            client.threads.create()["thread_id"],
            "refine",
            input={"task": "Answer well."},
            context={"models": [CHEAP, "dear-model"]},
            raise_error=True,
        )
    assert len(model_server.requests) == first


def test_batch_on_the_server_sends_model_repeated_as_each_runs_models(
    langgraph_server: str, model_server: ScriptedOpenAI, cli: Any, tmp_path: Path
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": "ladder", "task": "climb", "strategy": "chain"},
        {"id": "own", "task": "strong only", "model": STRONG},
    ]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ["--server", langgraph_server, "--model", CHEAP, "--model", STRONG]
    run = cli("batch", src, "--out", out, *args)
    assert run.code == 0, run.err
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert [a["model"] for a in rows["ladder"]["attempts"]] == [
        f"openai:{CHEAP}",
        f"openai:{CHEAP}",
        f"openai:{STRONG}",
    ]
    assert [a["model"] for a in rows["own"]["attempts"]] == [f"openai:{STRONG}"]
    assert list(rows["ladder"]["models"]) == [f"openai:{CHEAP}", f"openai:{STRONG}"]
    # By model, in the order the finished tasks used them (here: either task first).
    assert "; by model: " in run.out and f"openai:{CHEAP} 2 attempts, 4 calls" in run.out
    assert f"openai:{STRONG} 2 attempts, 4 calls" in run.out
