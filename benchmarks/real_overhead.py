"""Overhead on the real model: the share of a loop's wall time not spent waiting for it.

A 4-round loop (4 generations of the local SmolLM2 model through `ChatOpenAI`, a keyword
evaluator that makes no model call and never passes, so all 4 rounds run) is timed end
to end, and a callback handler times every model call from `on_chat_model_start` to
`on_llm_end` (LangChain's own client work around the HTTP request counts as waiting for
the model). The overhead is `(wall - model time) / wall`: graph start-up, the nodes,
prompt building, evaluation, state and routing. Runs alternate between `invoke` and
`ainvoke`; the figure is the median over runs.
"""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from benchmarks import _local
from benchmarks._harness import BenchResult, Figure, md_table, median, run_async, spread_text
from langgraph_refine import create_refine_graph, evaluators

TARGET_PERCENT = 1.0
ROUNDS = 4
WORDS = ["lantern", "glacier", "violin", "compass", "meadow", "thunder"]
TASK = "Write one sentence that uses all of these words: " + ", ".join(WORDS[:4]) + "."


class ModelTimer(BaseCallbackHandler):
    """Sums the time between each chat model call's start and end."""

    def __init__(self) -> None:
        self.started: dict[UUID, float] = {}
        self.seconds = 0.0
        self.calls = 0

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        """Note when a model call starts."""
        self.started[run_id] = time.perf_counter()

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Add the call's duration."""
        start = self.started.pop(run_id, None)
        if start is not None:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget a failed call."""
        self.started.pop(run_id, None)


def _graph(model: Any) -> Any:
    # Two words the task does not ask for keep the evaluator from ever passing.
    return create_refine_graph(
        model,
        evaluators.contains_all(WORDS),
        max_iterations=ROUNDS - 1,
        patience=None,
        target_score=1.0,
    ).compile()


def one_run(graph: Any, *, is_async: bool) -> tuple[float, float, int]:
    """Wall seconds, model seconds and model calls of one 4-round loop."""
    timer = ModelTimer()
    config: Any = {"callbacks": [timer]}
    start = time.perf_counter()
    if is_async:
        run_async(graph.ainvoke({"task": TASK}, config))
    else:
        graph.invoke({"task": TASK}, config)
    wall = time.perf_counter() - start
    assert timer.calls == ROUNDS, timer.calls
    return wall, timer.seconds, timer.calls


def run(quick: bool = False) -> BenchResult:
    runs = 2 if quick else 6
    server = _local.server()
    model = server.chat_model(temperature=0.8, max_tokens=60)
    graph = _graph(model)
    one_run(graph, is_async=False)  # warm-up: connections, the server's prompt cache
    one_run(graph, is_async=True)
    samples: dict[str, list[tuple[float, float, int]]] = {"invoke": [], "ainvoke": []}
    for i in range(runs):
        for mode in ("invoke", "ainvoke") if i % 2 == 0 else ("ainvoke", "invoke"):
            samples[mode].append(one_run(graph, is_async=mode == "ainvoke"))
    result = BenchResult(
        name="real_overhead", title=f"share of wall time not waiting for the model, {ROUNDS} rounds"
    )
    rows = []
    for mode, values in samples.items():
        shares = [100 * (wall - model_s) / wall for wall, model_s, _ in values]
        value = median(shares)
        result.figures.append(
            Figure(
                name=f"time not waiting for the model, {mode}",
                value=value,
                unit="%",
                target=f"< {TARGET_PERCENT}%",
                passed=value < TARGET_PERCENT,
                spread=spread_text(shares, "{:.2f}%"),
            )
        )
        rows.append(
            [
                mode,
                f"{median([w for w, _, _ in values]):.3f}",
                f"{median([m for _, m, _ in values]):.3f}",
                f"{median([(w - m) * 1000 for w, m, _ in values]):.1f}",
                len(values),
            ]
        )
    result.tables.append(
        md_table(["mode", "wall (s)", "model calls (s)", "not waiting (ms)", "runs"], rows)
    )
    result.notes.append(__doc__ or "")
    return result
