"""The loop on a real server whose slots hold only 1,024 tokens (prompt and reply together).

A small model that rambles, a judge that writes long feedback and refinement prompts that
carry earlier attempts all push a request past a small context; the provider then answers
HTTP 400 ("exceeds the available context size"). Whatever the replies, every task must
still finish with a result: the prompt bounds and the context-length handling keep the
loop going.

Needs the real local model in the cache (`python -m tools.local_model build`); on a machine
without it these tests skip rather than start a build of several minutes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from langgraph_refine import evaluators, refine
from tests.test_local_model import skip_without_build
from tools import local_model as lm

CONTEXT_SIZE, PARALLEL = 2048, 2  # 1,024 tokens a slot
MAX_TOKENS = 256
# A cap past the slot: a reply may fill its slot, and the judge's prompt that carries it
# then overflows (HTTP 400) unless the loop bounds what it sends.
RUNAWAY_MAX_TOKENS = 1000
MAX_ITERATIONS = 3

pytestmark = [pytest.mark.slow, pytest.mark.local_model]

TASKS = {
    "harbour": ["harbour", "lantern", "winter", "bread"],
    "robot": ["robot", "library", "orange", "whisper"],
}


def task_text(words: list[str]) -> str:
    return f"Write one sentence that uses all of these words: {', '.join(words)}."


@pytest.fixture(scope="module")
def small_server() -> Iterator[lm.LocalModelServer]:
    skip_without_build()
    # Every core when nothing else runs; beside other xdist workers, the default share (half
    # the cores): llama.cpp's threads spin-wait, and on a core another process keeps busy
    # they crawl (we saw 2 to 4 tokens a second instead of 60 to 180).
    alone = not os.environ.get("PYTEST_XDIST_WORKER")
    threads = (os.cpu_count() or 1) if alone else lm.default_threads()
    with lm.LocalModelServer(
        context_size=CONTEXT_SIZE, parallel=PARALLEL, threads=threads
    ) as server:
        yield server


def chat_model(server: lm.LocalModelServer, max_tokens: int) -> Any:
    pytest.importorskip("langchain_openai")
    return server.chat_model(
        temperature=0.7, max_tokens=max_tokens, seed=7, max_retries=0, timeout=120
    )


@pytest.fixture(scope="module")
def model(small_server: lm.LocalModelServer) -> Any:
    return chat_model(small_server, MAX_TOKENS)


def test_the_server_really_has_small_slots(model: Any) -> None:
    # The premise of this module: a prompt past 1,024 tokens is refused by the provider.
    import openai

    with pytest.raises(openai.BadRequestError, match="context"):
        model.invoke("word " * 1500)


def run_task(
    model: Any, name: str, max_iterations: int = MAX_ITERATIONS, judge: Any = None
) -> None:
    """Refine the task with `model` (the judge's model too, unless `judge` is given)."""
    words = TASKS[name]
    result = refine(
        model,
        task_text(words),
        [evaluators.llm_judge(judge or model), evaluators.contains_all(words)],
        max_iterations=max_iterations,
        target_score=1.0,
    )
    assert result.attempts, "no attempt was made"
    assert 1 <= len(result.attempts) <= 1 + max_iterations
    assert result.stop_reason in {"passed", "target_reached", "max_iterations", "plateau"}
    assert result.score_history == [a.score for a in result.attempts if a.evaluation]
    assert result.value.strip()


# One task here, one with runaway replies and one through the command line below: each
# costs 20 to 90 s of the one core the model gets beside the other tests (a task more here
# measured 23 s of the suite's time, one more through the command line about 40 s).
@pytest.mark.parametrize("name", ["harbour"])
def test_every_task_finishes_in_a_small_context(model: Any, name: str) -> None:
    run_task(model, name)


# One task, one refinement: each draft may run to 1,000 tokens (40 s for three refinements).
# The first judgment carries a draft that may fill the slot, the refinement prompt carries
# it and its feedback: both overflow unless the loop bounds what it sends. The judge keeps
# the module's cap (256): its prompt must still leave that much room for its reply, and
# runaway judgments only cost time (the run took 45-52 s with both capped at 1,000).
@pytest.mark.parametrize("name", ["robot"])
def test_a_task_finishes_when_replies_can_fill_the_slot(
    small_server: lm.LocalModelServer, model: Any, name: str
) -> None:
    run_task(chat_model(small_server, RUNAWAY_MAX_TOKENS), name, max_iterations=1, judge=model)


# One more task through the command line, with its default settings (reply cap, judge).
BATCH_TASKS = {
    "desert": ["desert", "clock", "ribbon", "storm"],
}


def test_the_cli_batch_finishes_every_task_with_default_settings(
    small_server: lm.LocalModelServer, tmp_path: Any
) -> None:
    """The issue's case: one-sentence tasks, default judge plus a keyword check, defaults."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    src, out = tmp_path / "tasks.jsonl", tmp_path / "out.jsonl"
    src.write_text(
        "".join(
            json.dumps(
                {
                    "id": name,
                    "task": task_text(words),
                    "evaluator": ["judge", "contains:" + ",".join(words)],
                }
            )
            + "\n"
            for name, words in BATCH_TASKS.items()
        )
    )
    cli = Path(sys.executable).parent / "langgraph-refine"
    env = {
        **os.environ,
        "OPENAI_BASE_URL": small_server.base_url,
        "OPENAI_API_KEY": "local",
    }
    env.pop("REFINE_MAX_TOKENS", None)  # the CLI's default cap
    done = subprocess.run(
        [
            str(cli),
            "batch",
            str(src),
            "--out",
            str(out),
            "--model",
            small_server.model,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(BATCH_TASKS)
    failed = {r["id"]: r["error"] for r in rows if r.get("error")}
    assert failed == {}  # no task lost to a context overflow
    assert all(r["value"].strip() for r in rows)
