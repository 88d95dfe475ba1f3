"""`make demo` (`python -m tools.demo`): a real refinement loop, shown round by round.

With `OPENAI_API_KEY` set (optionally `OPENAI_BASE_URL` and `REFINE_MODEL`) the demo uses
that model. Without it, it starts the local SmolLM2 model with llama.cpp (built and
downloaded on first use, then cached; see `tools.local_model`). Either way each reply is
limited to `--max-tokens` tokens (`$REFINE_MAX_TOKENS`, else 400), so a rambling model
cannot run on until the next prompt overflows its context.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.language_models import BaseChatModel

from langgraph_refine._graph import create_refine_graph
from langgraph_refine._result import RESULT_KEYS, RefineResult
from langgraph_refine.evaluators import word_count
from tools.local_model import DEFAULT_MAX_TOKENS

TASK = (
    "Write one paragraph of 80 to 200 words that explains the Turing test: who proposed "
    "it, how it works, and one criticism of it."
)
MIN_WORDS, MAX_WORDS = 80, 200
MAX_TOKENS_ENV = "REFINE_MAX_TOKENS"


def default_max_tokens(env: Mapping[str, str] | None = None) -> int:
    """The reply limit: `$REFINE_MAX_TOKENS` when set, else `DEFAULT_MAX_TOKENS`.

    Raises:
        SystemExit: When the variable is not a positive whole number.
    """
    raw = (os.environ if env is None else env).get(MAX_TOKENS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_TOKENS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SystemExit(f"{MAX_TOKENS_ENV} must be a positive whole number, got {raw!r}")
    return value


@contextlib.contextmanager
def demo_model(max_tokens: int) -> Iterator[tuple[BaseChatModel, str]]:
    """The model to use, and a label saying where it runs."""
    from langchain_openai import ChatOpenAI

    if os.environ.get("OPENAI_API_KEY"):
        name = os.environ.get("REFINE_MODEL", "gpt-4o-mini")
        yield (
            # The loop's retry policy handles transient errors; client retries would
            # multiply with it.
            ChatOpenAI(
                model=name,
                base_url=os.environ.get("OPENAI_BASE_URL"),
                temperature=0.7,
                max_tokens=max_tokens,
                max_retries=0,
            ),
            f"{name} (from OPENAI_API_KEY)",
        )
        return
    from tools.local_model import LocalModelServer

    print("No OPENAI_API_KEY: starting the local SmolLM2 model (first run builds it).")
    with LocalModelServer() as server:
        model = server.chat_model(temperature=0.7, max_tokens=max_tokens, max_retries=0)
        yield model, f"SmolLM2-135M-Instruct on llama.cpp at {server.base_url}"


def _print_round(event: dict[str, Any]) -> None:
    feedback = " ".join(str(event.get("feedback") or "").split())
    print(
        f"  round {event['iteration']}: score {event['score']:.2f}"
        f"  verdict {event['verdict'] or '-'}  best {event['best_score']:.2f}"
    )
    if feedback:
        print(f"    feedback: {feedback[:160]}")


def run_demo(model: BaseChatModel, *, max_iterations: int = 4) -> RefineResult:
    """Run the Turing-test paragraph loop on `model`, printing each round as it happens."""
    graph = create_refine_graph(
        model,
        word_count(MIN_WORDS, MAX_WORDS),
        target_score=1.0,
        max_iterations=max_iterations,
        patience=None,
        name="demo",
    ).compile()
    values: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"task": TASK}, stream_mode=["custom", "values"], output_keys=RESULT_KEYS
    ):
        # Both modes yield dicts here: the nodes' custom events and the state's values.
        event = cast("dict[str, Any]", chunk)
        if mode == "custom" and event.get("type") == "round":
            _print_round(event)
        elif mode == "values":
            values = event
    return RefineResult.from_state(values)


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
        help=f"most tokens per reply (default: ${MAX_TOKENS_ENV}, else {DEFAULT_MAX_TOKENS})",
    )
    args = parser.parse_args(argv)
    max_tokens = default_max_tokens() if args.max_tokens is None else args.max_tokens
    if max_tokens < 1:
        parser.error(f"--max-tokens must be at least 1, got {max_tokens}")
    with demo_model(max_tokens) as (model, label):
        print(f"Model: {label}")
        print(f"Task: {TASK}\n")
        result = run_demo(model, max_iterations=args.max_iterations)
    words = len(result.value.split())
    print(f"\nStopped: {result.stop_reason} after {result.iterations} refinement round(s)")
    print(f"Scores: {', '.join(f'{s:.2f}' for s in result.score_history)}")
    print(f"Best response ({words} words, score {result.score:.2f}):\n")
    print(result.value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
