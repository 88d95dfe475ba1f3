"""OpenTelemetry traces: a span per loop run, a span per round, an evaluation event per attempt."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from langgraph_refine import Evaluation, arefine, refine
from langgraph_refine._loop import _tracing as tracing
from langgraph_refine._loop._driver import Driver
from langgraph_refine.evaluators import combine, contains_all, word_count
from tests.fakes import ScriptedChatModel
from tests.test_cli_helpers import openai_server, per_task  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parent.parent
P = tracing.ATTRIBUTE_PREFIX


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Loops trace to an in-memory exporter (a provider of their own, not the global one,
    so the rest of the suite runs untraced)."""
    found = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(found))
    monkeypatch.setattr(tracing, "_tracer", lambda: provider.get_tracer("test"))
    yield found
    provider.shutdown()


def scores(*values: float, verdicts: dict[int, str] | None = None) -> Any:
    """An evaluator that gives `values` in order, with `verdicts` by call number."""
    calls = iter(range(len(values)))

    def evaluate(response: str, state: Any) -> Evaluation:
        n = next(calls)
        verdict = (verdicts or {}).get(n)
        return Evaluation(score=values[n], feedback=f"feedback {n}", verdict=verdict)  # type: ignore[arg-type]

    return evaluate


def tree(spans: tuple[ReadableSpan, ...]) -> tuple[ReadableSpan, list[ReadableSpan]]:
    """The one loop span and its round spans, in order; every span is one of these."""
    loops = [s for s in spans if s.name.startswith("refine ")]
    assert len(loops) == 1, [s.name for s in spans]
    loop = loops[0]
    assert loop.context is not None
    rounds = sorted(
        (s for s in spans if s is not loop), key=lambda s: (s.attributes or {}).get(P + "round", -1)
    )
    for span in rounds:
        assert span.parent is not None and span.parent.span_id == loop.context.span_id
        assert span.context is not None and span.context.trace_id == loop.context.trace_id
    return loop, rounds


def events(span: ReadableSpan) -> list[dict[str, Any]]:
    found = [dict(e.attributes or {}) for e in span.events if e.name == tracing.EVALUATION_EVENT]
    assert len(found) == len(span.events)
    return found


def test_sync_run_is_a_loop_span_with_a_span_and_an_event_per_round(
    exporter: InMemorySpanExporter,
) -> None:
    result = refine(
        lambda state: "a draft",
        "Write.",
        scores(0.2, 0.5, 0.9, verdicts={2: "PASS"}),
        max_iterations=4,
        target_score=0.95,
        patience=None,
        name="writer",
    )
    assert result.iterations == 2
    loop, rounds = tree(exporter.get_finished_spans())
    assert loop.name == "refine writer"
    assert loop.attributes is not None
    assert loop.attributes[P + "rounds"] == 3
    assert loop.attributes[P + "stop_reason"] == result.stop_reason == "passed"
    assert loop.attributes[P + "score"] == 0.9 and loop.attributes[P + "best_round"] == 2
    assert [s.name for s in rounds] == ["round 0", "round 1", "round 2"]
    for i, span in enumerate(rounds):
        attributes = dict(span.attributes or {})
        assert attributes[P + "round"] == i
        assert attributes[P + "score"] == [0.2, 0.5, 0.9][i]
        assert attributes[P + "move"] == result.attempts[i].move
        assert (P + "verdict" in attributes) == (i == 2)
        assert attributes[P + "model"] == "<lambda>" and P + "rung" not in attributes
        # Rounds follow each other: each starts after the one before ended.
        assert i == 0 or span.start_time >= rounds[i - 1].end_time  # type: ignore[operator]
        assert loop.start_time <= span.start_time and span.end_time <= loop.end_time  # type: ignore[operator]
    assert [events(s) for s in rounds] == [
        [
            {
                "gen_ai.evaluation.name": "evaluate",
                "gen_ai.evaluation.score.value": score,
                "gen_ai.evaluation.explanation": f"feedback {i}",
                **({"gen_ai.evaluation.score.label": "PASS"} if i == 2 else {}),
            }
        ]
        for i, score in enumerate([0.2, 0.5, 0.9])
    ]


async def test_async_run_with_a_chat_model_names_the_model_and_the_evaluator(
    exporter: InMemorySpanExporter,
) -> None:
    model = ScriptedChatModel(replies=["one two", "one two three", "one two three four"])
    evaluator = combine(contains_all(["four"]), word_count(1, 10))
    result = await arefine(model, "Count.", evaluator, max_iterations=2, patience=None)
    loop, rounds = tree(exporter.get_finished_spans())
    assert loop.name == "refine refine"
    assert len(rounds) == len(result.attempts) == 3
    for span, attempt in zip(rounds, result.attempts, strict=True):
        attributes = dict(span.attributes or {})
        assert attributes[P + "model"] == attempt.model == "ScriptedChatModel"
        assert attributes[P + "score"] == attempt.score
        (event,) = events(span)
        assert event["gen_ai.evaluation.name"] == "combined(contains_all+word_count)"
        assert event["gen_ai.evaluation.score.value"] == attempt.score


def test_a_failing_run_ends_its_span_with_the_error(exporter: InMemorySpanExporter) -> None:
    def generate(state: Any) -> str:
        raise RuntimeError("the model is down")

    with pytest.raises(RuntimeError, match="the model is down"):
        refine(generate, "Write.", scores(0.5), max_iterations=1)
    loop, rounds = tree(exporter.get_finished_spans())
    assert loop.status.status_code is StatusCode.ERROR
    assert "the model is down" in (loop.status.description or "")
    assert [e.name for e in loop.events] == ["exception"]
    assert len(rounds) <= 1  # the round that failed, ended with the loop


def test_a_reviewed_run_is_a_span_until_the_pause_and_one_for_its_continuation(
    exporter: InMemorySpanExporter,
) -> None:
    result = refine(
        lambda state: "a draft",
        "Write.",
        scores(0.2, 0.5),
        max_iterations=1,
        patience=None,
        human_review="final",
        reviewer=lambda payload: {"action": "approve"},
    )
    assert result.stop_reason == "approved"
    spans = exporter.get_finished_spans()
    loops = [s for s in spans if s.name == "refine refine"]
    assert [(s.attributes or {}).get(P + "stop_reason") for s in loops] == [
        "max_iterations",
        "approved",
    ]
    assert [(s.attributes or {}).get(P + "rounds") for s in loops] == [2, 0]
    assert sorted(s.name for s in spans if s not in loops) == ["round 0", "round 1"]


def test_a_loop_inside_a_generator_is_traced_apart(exporter: InMemorySpanExporter) -> None:
    def inner(state: Any) -> str:
        found = refine(lambda s: "inner", "Inner.", scores(0.3), max_iterations=0, name="inner")
        return found.value

    refine(inner, "Outer.", scores(0.4), max_iterations=0, name="outer")
    spans = exporter.get_finished_spans()
    names = sorted(s.name for s in spans)
    assert names == ["refine inner", "refine outer", "round 0", "round 0"]
    outer = next(s for s in spans if s.name == "refine outer")
    assert outer.context is not None
    outer_rounds = [
        s for s in spans if s.parent is not None and s.parent.span_id == outer.context.span_id
    ]
    assert len(outer_rounds) == 1 and outer_rounds[0].attributes[P + "score"] == 0.4  # type: ignore[index]


def test_nothing_is_added_without_a_tracer_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = Driver(None, {"recursion_limit": 10})  # type: ignore[arg-type]
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert tracing.traced(driver, name="refine", evaluator=None) is driver
    monkeypatch.delitem(sys.modules, "opentelemetry.trace")
    assert tracing.traced(driver, name="refine", evaluator=None) is driver


def _python(*parts: str) -> dict[str, Any]:
    """Run the code `parts` (each dedented) in a fresh interpreter; its last line's JSON."""
    code = "\n".join(textwrap.dedent(part) for part in parts)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return data


RUN = """
from langgraph_refine import Evaluation, refine
scores = iter([0.2, 0.6])
result = refine(
    lambda state: "draft", "Write.",
    lambda response, state: Evaluation(score=next(scores), feedback="more"),
    max_iterations=1, patience=None,
)
seen = result.model_dump(mode="json", exclude={"usage"})
for attempt in seen["attempts"]:
    attempt.pop("usage")  # seconds differ from run to run
"""


def test_a_global_tracer_provider_turns_tracing_on() -> None:
    found = _python(
        """
        import json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        """,
        RUN,
        """
        spans = exporter.get_finished_spans()
        print(json.dumps({"names": sorted(s.name for s in spans), "score": result.score}))
        """,
    )
    assert found == {"names": ["refine refine", "round 0", "round 1"], "score": 0.6}


@pytest.mark.slow
def test_without_opentelemetry_nothing_is_imported_and_nothing_changes() -> None:
    blocked = _python(
        """
        import importlib.abc, json, sys

        class NoOpenTelemetry(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoOpenTelemetry())
        """,
        RUN,
        """
        print(json.dumps({
            "otel": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
            "result": seen,
        }))
        """,
    )
    plain = _python(
        "import json",
        RUN,
        'print(json.dumps({"result": seen}))',
    )
    assert blocked["otel"] == []
    assert blocked["result"] == plain["result"]
    assert blocked["result"]["score"] == 0.6


@pytest.mark.slow
def test_the_console_example_of_the_docs_prints_the_spans(openai_server: Any) -> None:
    page = (ROOT / "docs" / "tracing.md").read_text()
    example = re.search(r'^```python title="traced.py"\n(.*?)^```', page, re.S | re.M)
    assert example is not None
    server = openai_server(per_task())
    done = subprocess.run(
        [sys.executable, "-c", example.group(1)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "unused"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"name": "refine refine"' in done.stdout and '"name": "round 0"' in done.stdout
    assert '"name": "gen_ai.evaluation.result"' in done.stdout
    assert '"gen_ai.evaluation.name": "word_count"' in done.stdout


async def test_each_task_of_a_batch_is_a_trace(
    exporter: InMemorySpanExporter, openai_server: Any, tmp_path: Path
) -> None:
    from langgraph_refine.cli._batch import BatchItem, LineWriter, Progress, run_items
    from langgraph_refine.cli._models import ModelSettings
    from langgraph_refine.cli._options import CommandOptions
    from langgraph_refine.cli._specs import parse_specs

    server = openai_server(per_task())
    options = CommandOptions(
        specs=parse_specs(["contains:v1"]), settings={"target_score": 1.0, "max_iterations": 2}
    )
    items = [
        BatchItem(line=i + 1, id=i, task=f"task number {i}", options=options) for i in range(3)
    ]
    writer = LineWriter(tmp_path / "out.jsonl")
    settings = ModelSettings(model="m", base_url=server.base_url)
    stats = await run_items(items, settings, writer, concurrency=3, progress=Progress())
    writer.close()
    assert stats.done == 3
    spans = exporter.get_finished_spans()
    loops = [s for s in spans if s.name == "refine refine"]
    assert len(loops) == 3 and len({s.context.trace_id for s in loops if s.context}) == 3
    for loop in loops:
        assert (
            loop.attributes is not None and loop.attributes[P + "stop_reason"] == "target_reached"
        )
        assert loop.attributes[P + "rounds"] == 2  # v0 lacks "v1", v1 has it
    evaluated = [e for s in spans for e in events(s) if s not in loops]
    assert len(evaluated) == 6
    assert {e["gen_ai.evaluation.name"] for e in evaluated} == {"contains_all"}


def test_the_callers_own_callbacks_still_see_the_run(exporter: InMemorySpanExporter) -> None:
    from langchain_core.callbacks import BaseCallbackHandler, CallbackManager

    class Names(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            self.names.append(kwargs.get("name") or "")

    as_list, as_manager = Names(), Names()
    manager = CallbackManager([as_manager], inheritable_handlers=[as_manager])
    for callbacks in ([as_list], manager):
        refine(
            lambda state: "a draft",
            "Write.",
            scores(0.3),
            max_iterations=0,
            config={"callbacks": callbacks},  # type: ignore[typeddict-item]
        )
    for seen in (as_list, as_manager):
        assert seen.names[0] == "refine" and "generate" in seen.names and "evaluate" in seen.names
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "refine refine",
        "refine refine",
        "round 0",
        "round 0",
    ]


def test_a_ladders_rounds_name_their_model_and_rung(exporter: InMemorySpanExporter) -> None:
    def cheap(state: Any) -> str:
        return "weak"

    def strong(state: Any) -> str:
        return "good"

    result = refine(
        [cheap, strong],
        "Write.",
        lambda r, s: 1.0 if r == "good" else 0.2,
        strategy="chain",
        max_iterations=3,
        patience=None,
    )
    _, rounds = tree(exporter.get_finished_spans())
    seen = [
        (dict(s.attributes or {})[P + "model"], dict(s.attributes or {})[P + "rung"])
        for s in rounds
    ]
    assert seen == [(a.model, a.rung) for a in result.attempts]
    assert seen == [("cheap", 0), ("cheap", 0), ("strong", 1)]


def test_a_round_that_fails_is_named_and_the_loop_keeps_its_best(
    exporter: InMemorySpanExporter,
) -> None:
    def generate(state: Any) -> str:
        if len(state["attempts"]) == 2:
            raise RuntimeError("the model is down")
        return f"draft {len(state['attempts'])}"

    with pytest.raises(RuntimeError, match="the model is down"):
        refine(generate, "Write.", scores(0.5, 0.7, 0.9), max_iterations=4, patience=None)
    loop, rounds = tree(exporter.get_finished_spans())
    assert [r.name for r in rounds] == ["round 0", "round 1", "round 2"]
    failed = rounds[-1]
    assert (failed.attributes or {})[P + "round"] == 2
    assert failed.status.status_code is StatusCode.ERROR
    attributes = loop.attributes or {}
    assert attributes[P + "rounds"] == 2
    assert attributes[P + "best_round"] == 1 and attributes[P + "score"] == 0.7
    assert loop.status.status_code is StatusCode.ERROR


def _launcher() -> str | None:
    """`opentelemetry-instrument` (from `opentelemetry-distro`, a test dependency), if installed."""
    beside = Path(sys.executable).parent / "opentelemetry-instrument"
    return str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")


def test_the_docs_trace_a_command_line_run_with_opentelemetry_instrument(
    openai_server: Any, tmp_path: Path
) -> None:
    launcher = _launcher()
    if launcher is None:
        pytest.skip("opentelemetry-instrument is not installed: pip install opentelemetry-distro")
    page = (ROOT / "docs" / "tracing.md").read_text()
    block = next(b for b in re.findall(r"^```bash\n(.*?)^```", page, re.S | re.M) if
                 "opentelemetry-instrument" in b)  # fmt: skip
    script = "\n".join(line for line in block.splitlines() if not line.startswith("pip "))
    server = openai_server(per_task())
    bin_dirs = [str(Path(launcher).parent), str(Path(sys.executable).parent)]
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env={
            **os.environ,
            "PATH": os.pathsep.join([*bin_dirs, os.environ.get("PATH", "")]),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "unused",
        },
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"name": "refine refine"' in done.stdout and '"name": "round 0"' in done.stdout
    assert '"name": "gen_ai.evaluation.result"' in done.stdout
    assert "Traceback" not in done.stderr


def test_an_unjudged_round_has_an_evaluation_event_with_an_error(
    exporter: InMemorySpanExporter,
) -> None:
    from langgraph_refine.evaluators import Unjudged

    def grader(response: str, state: Any) -> float:
        if response == "b":
            raise Unjudged("the grading service is down")
        return 0.4

    refine(
        ScriptedChatModel(replies=["a", "b"]),
        "t",
        grader,
        max_iterations=1,
        on_evaluator_error="skip",
    )
    _, rounds = tree(exporter.get_finished_spans())
    evaluations = [e for e in rounds[1].events if e.name == tracing.EVALUATION_EVENT]
    assert [dict(e.attributes or {}) for e in evaluations] == [
        {
            "gen_ai.evaluation.name": "grader",
            "error.type": "unjudged",
            "gen_ai.evaluation.explanation": "the grading service is down",
        }
    ]
    assert P + "score" not in dict(rounds[1].attributes or {})
