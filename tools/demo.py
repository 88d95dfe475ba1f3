"""`make demo` (`python -m tools.demo`): a real refinement loop, shown round by round.

With `OPENAI_API_KEY` set (optionally `OPENAI_BASE_URL` and `REFINE_MODEL`) the demo uses
that model. Without it, it starts the local SmolLM2 model with llama.cpp (built and
downloaded on first use, then cached; see `tools.local_model`). Either way each reply is
limited to `--max-tokens` tokens (`$REFINE_MAX_TOKENS`, else the library's default), so a
rambling model cannot run on until the next prompt overflows its context.

The evaluator is what a reader checks: the length asked for, the facts the task asks
for, and no looping text. A word count alone is maximised by degenerate text (a phrase
repeated until the count fits); `no_repetition` scores that low.

Why this task: its winner reads well on every model. On the local SmolLM2-135M a
refinement rarely raises the best score here (the loop's best rises through fresh
samples), and no other task tried did better: asked to extend a list or a paragraph,
that model copies its attempt and repeats it until the reply limit. `make bench
BENCH=demo` measures the rate and lists the tasks tried (benchmarks/RESULTS.md, `demo`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from langgraph_refine import Attempt, RefineResult, create_refine_graph
from langgraph_refine._calls._models import max_tokens_setting, resolve_chat_model
from langgraph_refine._display import shorten, usage_text
from langgraph_refine._loop._driver import Driver, run_config, run_flow, run_through
from langgraph_refine.evaluators import combine, contains_all, no_repetition, word_count

TASK = (
    "Write one paragraph of 80 to 200 words that explains the Turing test: who proposed "
    "it, how it works, and one criticism of it."
)
MIN_WORDS, MAX_WORDS = 80, 200
FACTS = ["Turing", "machine", "human", "criticism"]
"""Words any paragraph that answers the task uses: who, what is compared, the criticism."""
FEEDBACK_CHARS = 160
"""Longest feedback shown per round; longer feedback is cut at a word boundary."""


def demo_evaluator() -> Any:
    """Length, the facts the task asks for, and no repetition, with equal weight."""
    return combine(word_count(MIN_WORDS, MAX_WORDS), contains_all(FACTS), no_repetition())


@contextlib.contextmanager
def demo_model(max_tokens: int | None = None) -> Iterator[tuple[BaseChatModel, str]]:
    """The model to use, and a label saying where it runs.

    Args:
        max_tokens: The generation cap (default: `REFINE_MAX_TOKENS`, else the library's).
    """
    cap = max_tokens_setting(max_tokens)
    if os.environ.get("OPENAI_API_KEY"):
        name = os.environ.get("REFINE_MODEL", "gpt-4o-mini")
        model = resolve_chat_model(name, option="REFINE_MODEL", temperature=0.7, max_tokens=cap)
        yield model, f"{name} (from OPENAI_API_KEY)"
        return
    from tools.local_model import LocalModelServer

    print("No OPENAI_API_KEY: starting the local SmolLM2 model (first run builds it).")
    with LocalModelServer() as server:
        model = server.chat_model(temperature=0.7, max_tokens=cap, max_retries=0)
        yield model, f"SmolLM2-135M-Instruct on llama.cpp at {server.base_url}"


def _print_round(event: dict[str, Any]) -> None:
    if event.get("type") != "round":
        return
    feedback = shorten(str(event.get("feedback") or ""), FEEDBACK_CHARS)
    parent = event.get("parent")
    origin = "fresh sample" if parent is None else f"refines #{parent}"
    print(
        f"  #{event['iteration']} ({origin}): score {event['score']:.2f}"
        f"  verdict {event['verdict'] or '-'}  best {event['best_score']:.2f}"
    )
    if feedback:
        print(f"    feedback: {feedback}")


def attempt_tree(attempts: Sequence[Attempt]) -> list[str]:
    r"""Lines drawing which attempt refined which, fresh samples at the root.

    Example:
        >>> from langgraph_refine import Evaluation
        >>> a = [Attempt(index=0, response="x", evaluation=Evaluation(score=0.5)),
        ...      Attempt(index=1, response="y", parent=0, evaluation=Evaluation(score=0.7))]
        >>> print("\n".join(attempt_tree(a)))
        #0 score 0.50
        └─ #1 score 0.70
    """
    children: dict[int | None, list[Attempt]] = {}
    for attempt in attempts:
        children.setdefault(attempt.parent, []).append(attempt)
    lines: list[str] = []

    def walk(attempt: Attempt, prefix: str, branch: str) -> None:
        score = f"score {attempt.score:.2f}" if attempt.score is not None else "not evaluated"
        lines.append(f"{prefix}{branch}#{attempt.index} {score}")
        below = children.get(attempt.index, [])
        inner = prefix if not branch else prefix + ("   " if branch == "└─ " else "│  ")
        for k, child in enumerate(below):
            walk(child, inner, "└─ " if k == len(below) - 1 else "├─ ")

    for root in children.get(None, []):
        walk(root, "", "")
    return lines


def run_demo(model: BaseChatModel, *, max_iterations: int = 4) -> RefineResult:
    """Run the Turing-test paragraph loop on `model`, printing each round as it happens."""
    graph = create_refine_graph(
        model,
        demo_evaluator(),
        target_score=1.0,
        max_iterations=max_iterations,
        patience=None,  # show every round the demo was given
        name="demo",
    ).compile()
    config = run_config(None, durable=False, thread_id=None, max_iterations=max_iterations)
    return run_through(run_flow(TASK, durable=False), Driver(graph, config, on_event=_print_round))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `make demo`."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--max-iterations", type=int, default=4)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="most tokens per reply (default: $REFINE_MAX_TOKENS, else the library's default)",
    )
    args = parser.parse_args(argv)
    try:
        max_tokens_setting(args.max_tokens)
    except ValueError as exc:
        parser.error(str(exc))
    with demo_model(args.max_tokens) as (model, label):
        print(f"Model: {label}")
        print(f"Task: {TASK}\n")
        result = run_demo(model, max_iterations=args.max_iterations)
    words = len(result.value.split())
    print(f"\nStopped: {result.stop_reason} after {result.iterations} refinement round(s)")
    print(f"Spent: {usage_text(result.usage)}")
    print("Attempts (which refined which):")
    for line in attempt_tree(result.attempts):
        print(f"  {line}")
    print(f"\nBest response ({words} words, score {result.score:.2f}):\n")
    print(result.value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
