"""Observability: the loop logs each round and names, tags and annotates every run it starts.

A LangChain callback handler that records runs (what LangSmith or any tracer receives)
must be able to follow the loop round by round: the generate and evaluate runs of each
round carry its iteration and the best score so far, the judge's model call nests under
its evaluation, and each evaluation run outputs the score.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler

from langgraph_refine import arefine, refine
from tests.fakes import ScriptedChatModel, judge_reply


class RunRecorder(BaseCallbackHandler):
    """Records every run start/end: name, kind, parent, tags, metadata, outputs."""

    def __init__(self) -> None:
        self.runs: dict[UUID, dict[str, Any]] = {}
        self.order: list[UUID] = []

    def _start(self, kind: str, run_id: UUID, parent: UUID | None, **kw: Any) -> None:
        serialized = kw.get("serialized") or {}
        self.runs[run_id] = {
            "kind": kind,
            "name": kw.get("name") or serialized.get("name"),
            "parent": parent,
            "tags": list(kw.get("tags") or []),
            "metadata": dict(kw.get("metadata") or {}),
            "outputs": None,
        }
        self.order.append(run_id)

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kw: Any,
    ) -> None:
        self._start("chain", run_id, parent_run_id, serialized=serialized, **kw)

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kw: Any,
    ) -> None:
        self._start("llm", run_id, parent_run_id, serialized=serialized, **kw)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kw: Any) -> None:
        self.runs[run_id]["outputs"] = outputs

    def named(self, name: str) -> list[dict[str, Any]]:
        return [self.runs[r] for r in self.order if self.runs[r]["name"] == name]

    def ancestors(self, run: dict[str, Any]) -> list[str]:
        names = []
        parent = run["parent"]
        while parent is not None:
            names.append(self.runs[parent]["name"])
            parent = self.runs[parent]["parent"]
        return names


class AsyncRunRecorder(AsyncCallbackHandler, RunRecorder):
    """The same recorder, as an async handler (the arefine path)."""

    async def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:  # type: ignore[override]
        RunRecorder.on_chain_start(self, serialized, inputs, **kw)

    async def on_chat_model_start(self, serialized: Any, messages: Any, **kw: Any) -> None:  # type: ignore[override]
        RunRecorder.on_chat_model_start(self, serialized, messages, **kw)

    async def on_chain_end(self, outputs: Any, **kw: Any) -> None:  # type: ignore[override]
        RunRecorder.on_chain_end(self, outputs, **kw)


def _models() -> tuple[ScriptedChatModel, ScriptedChatModel]:
    generator = ScriptedChatModel(replies=["first", "second", "third"])
    judge = ScriptedChatModel(
        replies=[
            judge_reply(0.3, feedback="f0"),
            judge_reply(0.6, feedback="f1"),
            judge_reply(0.95),
        ]
    )
    return generator, judge


def _check_rounds(recorder: RunRecorder) -> None:
    generations = [r for r in recorder.named("refine:generate") if r["kind"] == "llm"]
    evaluations = recorder.named("refine:evaluate")
    assert len(generations) == len(evaluations) == 3

    best_before = [None, 0.3, 0.6]
    for i, run in enumerate(generations):
        assert {"langgraph-refine", "refine:generate", f"iteration:{i}"} <= set(run["tags"])
        assert run["metadata"]["iteration"] == i
        assert run["metadata"]["best_score"] == best_before[i]
        assert run["metadata"]["refine_loop"] == "refine"
        assert "generate" in recorder.ancestors(run)  # under LangGraph's node run

    for i, run in enumerate(evaluations):
        assert {"langgraph-refine", "refine:evaluate", f"iteration:{i}"} <= set(run["tags"])
        assert run["metadata"]["iteration"] == i
        assert run["metadata"]["best_score"] == best_before[i]
        assert recorder.ancestors(run)[0] == "evaluate"
        # The evaluation run's output is the round's score and verdict.
        assert run["outputs"].score == [0.3, 0.6, 0.95][i]
        assert run["outputs"].verdict == "NEEDS_IMPROVEMENT"

    # The judge's model calls nest under their evaluation and inherit its iteration.
    judge_calls = [
        r for r in recorder.runs.values() if r["kind"] == "llm" and r["name"] != "refine:generate"
    ]
    assert len(judge_calls) == 3
    for i, run in enumerate(sorted(judge_calls, key=lambda r: r["metadata"]["iteration"])):
        assert "refine:evaluate" in recorder.ancestors(run)
        assert run["metadata"]["iteration"] == i
        assert f"iteration:{i}" in run["tags"]


def test_callback_handler_sees_the_loop_round_by_round() -> None:
    generator, judge = _models()
    recorder = RunRecorder()
    result = refine(
        generator, "Write.", judge_model=judge, patience=None, config={"callbacks": [recorder]}
    )
    assert result.score_history == [0.3, 0.6, 0.95]
    _check_rounds(recorder)


async def test_async_path_annotates_runs_the_same_way() -> None:
    generator, judge = _models()
    recorder = AsyncRunRecorder()
    result = await arefine(
        generator, "Write.", judge_model=judge, patience=None, config={"callbacks": [recorder]}
    )
    assert result.score_history == [0.3, 0.6, 0.95]
    _check_rounds(recorder)


def test_loop_name_appears_in_run_names_and_tags() -> None:
    generator, judge = _models()
    recorder = RunRecorder()
    refine(
        generator,
        "Write.",
        judge_model=judge,
        name="docs",
        max_iterations=0,
        config={"callbacks": [recorder]},
    )
    assert recorder.named("docs:evaluate") and recorder.named("docs:generate")
    assert "docs:evaluate" in recorder.named("docs:evaluate")[0]["tags"]
    assert recorder.named("docs:generate")[0]["metadata"]["refine_loop"] == "docs"


def test_rounds_are_logged_to_the_library_logger_without_handlers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("langgraph_refine")
    assert logger.handlers == []  # the application decides where logs go
    generator, judge = _models()
    with caplog.at_level(logging.INFO, logger="langgraph_refine"):
        refine(generator, "Write.", judge_model=judge, patience=None)
    rounds = [r.getMessage() for r in caplog.records if " round " in r.getMessage()]
    assert len(rounds) == 3
    assert "round 0: score=0.300" in rounds[0]
    assert "round 2: score=0.950" in rounds[2] and "stop (target_reached)" in rounds[2]
    assert all(r.name == "langgraph_refine" for r in caplog.records)
    assert any("stopped: target_reached" in r.getMessage() for r in caplog.records)
