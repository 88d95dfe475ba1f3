"""The `run` verb end to end: real `ChatOpenAI` clients against a scripted OpenAI server."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    Reply,
    ScriptedOpenAI,
    cli,
    drafts_and_judge,
    is_judge,
    last_user_text,
    openai_server,
)

SCORES = {"draft 0": 0.4, "draft 1": 0.7, "draft 2": 0.95}


def run_args(server: ScriptedOpenAI, *extra: str, task: str = "Write a poem.") -> list[str]:
    return ["run", task, "--model", "scripted", "--base-url", server.base_url, *extra]


def test_run_shows_each_round_and_the_final_response(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(*run_args(server))
    assert run.code == 0, run.err
    rounds = [line for line in run.out.splitlines() if line.startswith("round")]
    assert len(rounds) == 3
    for i, line in enumerate(rounds):
        assert f"round  {i}" in line
        assert f"score {SCORES[f'draft {i}']:.2f}" in line
        assert "NEEDS_IMPROVEMENT" in line
        assert f"feedback for draft {i}: be more specific" in line
    assert "draft 2" in run.out.split(rounds[-1])[1]  # the final response panel
    assert "target_reached" in run.out
    assert len(server.generator_requests) == len(server.judge_requests) == 3


def test_run_json_prints_one_object_with_the_result(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge(SCORES))
    run = cli(*run_args(server, "--json"))
    assert run.code == 0, run.err
    data = run.json()
    assert set(data) >= {
        "value",
        "score",
        "verdict",
        "stop_reason",
        "iterations",
        "score_history",
        "attempts",
    }
    assert data["value"] == "draft 2"
    assert data["score"] == 0.95
    assert data["stop_reason"] == "target_reached"
    assert data["iterations"] == 2
    assert data["score_history"] == [0.4, 0.7, 0.95]
    assert [a["response"] for a in data["attempts"]] == ["draft 0", "draft 1", "draft 2"]
    assert data["attempts"][1]["evaluation"]["feedback"] == "feedback for draft 1: be more specific"
    assert "round" not in run.out  # nothing but the JSON on stdout


def test_model_and_judge_model_go_to_the_server_by_name(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95}))
    run = cli(
        "run",
        "Write.",
        "--model",
        "gen-model",
        "--judge-model",
        "judge-model",
        "--base-url",
        server.base_url,
        "--json",
    )
    assert run.code == 0, run.err
    assert {r["model"] for r in server.generator_requests} == {"gen-model"}
    assert {r["model"] for r in server.judge_requests} == {"judge-model"}


def test_model_comes_from_the_environment(
    cli: Any, openai_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95}))
    monkeypatch.setenv("REFINE_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run = cli("run", "Write.", "--json")
    assert run.code == 0, run.err
    assert run.json()["value"] == "draft 0"
    assert {r["model"] for r in server.requests} == {"env-model"}


def test_provider_prefixed_model_names(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95}))
    # "openai:" is a LangChain provider; "smollm2:" is not, so the whole name is the model.
    for name, sent in (("openai:gpt-test", "gpt-test"), ("smollm2:135m", "smollm2:135m")):
        run = cli("run", "Write.", "--model", name, "--base-url", server.base_url, "--json")
        assert run.code == 0, run.err
        assert server.requests[-1]["model"] == sent


def test_evaluator_specs_are_combined_and_make_no_judge_calls(cli: Any, openai_server: Any) -> None:
    replies = iter(["one", "one two three", "never"])
    server = openai_server(lambda body: next(replies))
    run = cli(
        *run_args(server, "--evaluator", "words:3-5", "--evaluator", "contains:one", "--json")
    )
    assert run.code == 0, run.err
    data = run.json()
    # words: 1/3 then 1.0; contains: 1.0 both times; equal weights.
    assert data["score_history"] == pytest.approx([(1 / 3 + 1) / 2, 1.0])
    assert data["stop_reason"] in {"passed", "target_reached"}
    assert server.judge_requests == []
    assert "words" in data["attempts"][0]["evaluation"]["feedback"].lower()


def test_regex_and_json_schema_and_python_tests_specs(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["name"]}))
    tests = tmp_path / "tests.py"
    tests.write_text("def test_add():\n    assert add(2, 3) == 5\n")

    replies = iter(['{"title": "x"}', '{"name": "x"}'])
    server = openai_server(lambda body: next(replies))
    run = cli(*run_args(server, "--evaluator", f"json-schema:{schema}", "--json"))
    assert run.code == 0, run.err
    assert run.json()["score_history"] == [0.0, 1.0]

    replies = iter(
        ["def add(a, b):\n    return a - b", "```python\ndef add(a, b):\n    return a + b\n```"]
    )
    server = openai_server(lambda body: next(replies))
    run = cli(*run_args(server, "--evaluator", f"python-tests:{tests}", "--json"))
    assert run.code == 0, run.err
    data = run.json()
    assert data["score_history"] == [0.0, 1.0]
    assert "test_add" in data["attempts"][0]["evaluation"]["feedback"]

    replies = iter(["Is it", "Is it?"])
    server = openai_server(lambda body: next(replies))
    run = cli(*run_args(server, "--evaluator", r"regex:\?$", "--json"))
    assert run.code == 0, run.err
    assert run.json()["score_history"] == [0.0, 1.0]


def test_judge_spec_combined_with_a_check(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.8}))
    run = cli(*run_args(server, "--evaluator", "judge", "--evaluator", "contains:draft", "--json"))
    assert run.code == 0, run.err
    assert run.json()["score_history"][0] == pytest.approx(0.9)
    assert len(server.judge_requests) == 1


def test_stop_options(cli: Any, openai_server: Any) -> None:
    flat = {f"draft {i}": 0.5 for i in range(10)}
    server = openai_server(drafts_and_judge(flat))
    run = cli(*run_args(server, "--max-iterations", "1", "--patience", "0", "--json"))
    assert (run.json()["stop_reason"], run.json()["iterations"]) == ("max_iterations", 1)

    server = openai_server(drafts_and_judge(flat))
    run = cli(*run_args(server, "--max-iterations", "8", "--patience", "2", "--json"))
    assert (run.json()["stop_reason"], run.json()["iterations"]) == ("plateau", 2)

    server = openai_server(drafts_and_judge({"draft 0": 0.5, "draft 1": 0.6}))
    run = cli(*run_args(server, "--target-score", "0.55", "--json"))
    assert (run.json()["stop_reason"], run.json()["iterations"]) == ("target_reached", 1)


def test_many_rounds_fit_in_one_run(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge({}))
    run = cli(*run_args(server, "--max-iterations", "15", "--patience", "0", "--json"))
    assert run.code == 0, run.err
    assert run.json()["iterations"] == 15


@pytest.mark.parametrize(
    ("memory", "shows_first"),
    [("all", True), ("last", False), ("1", False), ("best_and_last", True)],
)
def test_memory_option_controls_what_the_generator_sees(
    cli: Any, openai_server: Any, memory: str, shows_first: bool
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.6, "draft 1": 0.2, "draft 2": 0.95}))
    run = cli(
        *run_args(server, "--memory", memory, "--strategy", "chain", "--patience", "0", "--json")
    )
    assert run.code == 0, run.err
    third_prompt = last_user_text(server.generator_requests[2])
    assert "<answer>\ndraft 1" in third_prompt
    assert ("<answer>\ndraft 0" in third_prompt) is shows_first


def test_checkpoint_thread_resumes_an_interrupted_run(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    judged = {"n": 0}
    broken = {"on": True}
    drafts = drafts_and_judge(SCORES)

    def script(body: dict[str, Any]) -> Reply | str:
        if is_judge(body):
            judged["n"] += 1
            if broken["on"] and judged["n"] == 2:
                return Reply(status=400, error="judge exploded")
        return drafts(body)

    server = openai_server(script)
    db = tmp_path / "runs.sqlite"
    args = run_args(server, "--checkpoint", str(db), "--thread", "t-1", "--json")
    first = cli(*args)
    assert first.code == 1
    assert "judge exploded" in first.err and "Traceback" not in first.err
    assert len(server.generator_requests) == 2  # draft 0 and draft 1 were generated

    broken["on"] = False
    second = cli(*args)
    assert second.code == 0, second.err
    data = second.json()
    assert data["score_history"] == [0.4, 0.7, 0.95]
    # Nothing that completed was asked again: 3 generations, 3 successful judge calls + 1 failed.
    assert len(server.generator_requests) == 3
    assert len(server.judge_requests) == 4


def test_checkpoint_without_thread_names_the_new_thread(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95}))
    run = cli(*run_args(server, "--checkpoint", str(tmp_path / "c.sqlite"), "--json"))
    assert run.code == 0
    assert "--thread " in run.err
    thread = run.err.split("--thread ")[1].split(")")[0].strip()
    # The finished thread is in the file: resuming it with the same task starts over cleanly.
    again = cli(
        *run_args(server, "--checkpoint", str(tmp_path / "c.sqlite"), "--thread", thread, "--json")
    )
    assert again.code == 0 and again.json()["value"] == "draft 1"


@pytest.mark.parametrize(
    ("answers", "stop_reason", "value"),
    [
        ("a\n", "approved", "draft 0"),
        ("approve\n", "approved", "draft 0"),
        ("e\nmy own\nanswer\n.\n", "edited", "my own\nanswer"),
        ("r\n", "rejected", "draft 0"),
        ("what?\na\n", "approved", "draft 0"),
    ],
)
def test_review_in_the_terminal(
    cli: Any, openai_server: Any, answers: str, stop_reason: str, value: str
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95}))
    run = cli(*run_args(server, "--review", "--json"), stdin=answers)
    assert run.code == 0, run.err
    data = run.json()
    assert (data["stop_reason"], data["value"]) == (stop_reason, value)
    assert "[a]pprove" in run.err  # the prompt goes to stderr in --json mode
    assert "draft 0" in run.err  # the reviewed response is shown


def test_review_revise_runs_one_more_round_with_the_feedback(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95, "draft 1": 0.97}))
    run = cli(*run_args(server, "--review"), stdin="v\nmention the sea\na\n")
    assert run.code == 0, run.err
    assert len(server.generator_requests) == 2
    assert "mention the sea" in last_user_text(server.generator_requests[1])
    assert "approved" in run.out and "draft 1" in run.out


def test_review_without_answers_is_a_one_line_error(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95}))
    run = cli(*run_args(server, "--review", "--json"), stdin="")
    assert run.code == 1
    assert run.err.strip().splitlines()[-1].startswith("langgraph-refine: --review needs answers")
    assert "Traceback" not in run.err


def test_pending_review_on_a_thread_is_answered_on_resume(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95}))
    args = run_args(
        server, "--checkpoint", str(tmp_path / "r.sqlite"), "--thread", "rev", "--review", "--json"
    )
    first = cli(*args, stdin="")  # the reviewer walked away
    assert first.code == 1
    without_review = cli(*[a for a in args if a != "--review"])
    assert without_review.code == 1 and "waiting for a human review" in without_review.err
    second = cli(*args, stdin="a\n")
    assert second.code == 0 and second.json()["stop_reason"] == "approved"
    assert len(server.requests) == 2  # the paused loop's model calls were not repeated


def test_demo_is_development_tooling_not_a_verb(cli: Any) -> None:
    # The demo lives in the repository's tools/ folder (`make demo`), which the wheel lacks.
    run = cli("demo")
    assert run.code == 2
    assert "demo" not in cli("--help").out


def test_help_lists_the_verbs(cli: Any) -> None:
    run = cli("--help")
    assert run.code == 0
    for verb in ("run", "batch", "report"):
        assert verb in run.out
    run = cli("run", "--help")
    assert run.code == 0
    for option in ("--evaluator", "--checkpoint", "--thread", "--review", "--json", "--cache"):
        assert option in run.out


@pytest.mark.slow
def test_a_killed_run_resumes_on_its_thread_without_repeating_model_calls(
    openai_server: Any, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import time

    server = openai_server(drafts_and_judge(SCORES), delay=0.3)
    db = tmp_path / "runs.sqlite"
    command = [
        sys.executable,
        "-m",
        "langgraph_refine.cli",
        *run_args(server, "--checkpoint", str(db), "--thread", "killed", "--json"),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("REFINE_MODEL", "OPENAI_BASE_URL")}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(server.requests) < 4 and time.monotonic() < deadline:  # judge 1 in flight
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(server.requests) == 4

    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    data = json.loads(resumed.stdout)
    assert [a["response"] for a in data["attempts"]] == ["draft 0", "draft 1", "draft 2"]
    assert data["score_history"] == [0.4, 0.7, 0.95]
    # Only the call that was in flight when the process died is made twice.
    assert len(server.generator_requests) == 3
    assert len(server.judge_requests) == 4
