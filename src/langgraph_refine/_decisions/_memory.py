"""Memory: which earlier attempts and feedback the next generation is shown.

The default, `"best_and_last"`, is bounded: the prompt holds at most two attempts
whatever the round number, yet the generator always sees the best attempt so far
(what to keep) and the latest one with its feedback (what to fix next). When the
latest attempt is the best, the attempt before it is shown beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias, get_args

from langgraph_refine._result import best_attempt
from langgraph_refine._state import Attempt

MemoryMode: TypeAlias = Literal["all", "last", "best_and_last"]
MemoryPolicy: TypeAlias = MemoryMode | int
"""`"all"`, `"last"`, `"best_and_last"`, or a window size: the last N attempts."""

MEMORY_MODES: tuple[str, ...] = get_args(MemoryMode)
DEFAULT_MEMORY: MemoryPolicy = "best_and_last"


def validate_memory(memory: object) -> MemoryPolicy:
    """Check a memory option, returning it unchanged.

    Raises:
        ValueError: If `memory` is not one of the modes or a positive integer.
    """
    if isinstance(memory, str) and memory in MEMORY_MODES:
        return memory  # type: ignore[return-value]
    if isinstance(memory, int) and not isinstance(memory, bool) and memory >= 1:
        return memory
    raise ValueError(
        f"memory must be one of {', '.join(repr(m) for m in MEMORY_MODES)} or an integer "
        f"window >= 1, got {memory!r}"
    )


def select_attempts(attempts: Sequence[Attempt], memory: MemoryPolicy) -> list[tuple[str, Attempt]]:
    """Choose the earlier attempts to show the generator, each with a label.

    Args:
        attempts: Every attempt so far, in order.
        memory: The memory policy.

    Returns:
        `(label, attempt)` pairs in chronological order. The label says why the
        attempt is shown ("best so far", "latest", ...).
    """
    if not attempts:
        return []
    latest = attempts[-1]
    if memory == "all":
        chosen = list(attempts)
    elif memory == "last":
        chosen = [latest]
    elif memory == "best_and_last":
        best = best_attempt(attempts)
        if best is None or best.index == latest.index:
            # The latest is the best: show the one before it instead, so the prompt keeps
            # the same shape (and size) from the second refinement on.
            chosen = list(attempts[-2:])
        else:
            chosen = [best, latest]
    else:
        chosen = list(attempts[-int(memory) :])
    best = best_attempt(attempts)
    return [(_label(a, latest, best), a) for a in chosen]


def _label(attempt: Attempt, latest: Attempt, best: Attempt | None) -> str:
    is_best = best is not None and attempt.index == best.index
    if attempt.index == latest.index:
        return "latest attempt (also the best so far)" if is_best else "latest attempt"
    return "best attempt so far" if is_best else "earlier attempt"
