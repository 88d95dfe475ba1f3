"""Prompt growth: the generator's prompt at refinement round 10 versus round 2.

A real loop runs 11 generations (`max_iterations=10`) with a chat-model generator that
records every prompt it receives and answers with distinct 600-character attempts, and
an evaluator that gives 150-character feedback and scores that wander (so the best
attempt is sometimes the latest and sometimes an earlier one) without reaching the
target. Round k is the k-th refinement, whose prompt shows what the memory policy keeps
of the k attempts before it. Sizes are the characters of the messages the model receives.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine import Evaluation, create_refine_graph
from langgraph_refine._decisions._memory import DEFAULT_MEMORY

TARGET = 1.2
EARLY, LATE = 2, 10
ATTEMPT_CHARS, FEEDBACK_CHARS = 600, 150
SCORES = [0.30, 0.50, 0.40, 0.55, 0.45, 0.60, 0.35, 0.58, 0.62, 0.50, 0.61]


def _text(prefix: str, n: int, chars: int) -> str:
    words = " ".join(f"{prefix}{n}w{i}" for i in range(chars))
    return words[:chars]


class RecordingModel(BaseChatModel):
    """Answers with distinct 600-character attempts and records every prompt."""

    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """Every prompt received, in order."""
        return self._prompts

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self._prompts.append(list(messages))
        reply = _text("a", len(self._prompts), ATTEMPT_CHARS)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def _evaluator(response: str, state: Any) -> Evaluation:
    n = len(state.get("attempts") or [])
    return Evaluation(score=SCORES[n % len(SCORES)], feedback=_text("f", n, FEEDBACK_CHARS))


def prompt_sizes(memory: Any) -> list[int]:
    """Characters of the generator's prompt at each generation (index 0 = the first)."""
    model = RecordingModel()
    graph = create_refine_graph(
        model,
        _evaluator,
        max_iterations=LATE,
        patience=None,
        target_score=1.0,
        memory=memory,
        strategy="chain",  # every round refines the latest: the longest memory to bound
    ).compile()
    graph.invoke({"task": "Write one paragraph about lighthouses."})
    sizes = [sum(len(m.text) for m in prompt) for prompt in model.prompts]
    assert len(sizes) == LATE + 1, sizes
    return sizes


def run(quick: bool = False) -> BenchResult:
    result = BenchResult(
        name="prompt_growth", title=f"generator prompt size, round {LATE} vs round {EARLY}"
    )
    rows = []
    for memory, targeted in ((DEFAULT_MEMORY, True), ("all", False)):
        sizes = prompt_sizes(memory)
        ratio = sizes[LATE] / sizes[EARLY]
        label = f"memory={memory!r}" + (" (default)" if targeted else "")
        result.figures.append(
            Figure(
                name=f"prompt chars, round {LATE} / round {EARLY}, {label}",
                value=ratio,
                target=f"<= {TARGET}x" if targeted else "",
                passed=(ratio <= TARGET) if targeted else None,
                spread="deterministic",
            )
        )
        rows.append([label, *(f"{s:,}" for s in sizes[1:])])
    result.tables.append(md_table(["memory", *(f"round {k}" for k in range(1, LATE + 1))], rows))
    result.notes.append(__doc__ or "")
    return result
