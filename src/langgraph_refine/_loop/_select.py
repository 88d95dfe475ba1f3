"""Choosing the result by pairwise comparison (`select="pairwise"`).

A pointwise judge's scores are noisy, and the attempt with the highest noisy score is
often not the best one (the winner's curse). With `select="pairwise"`, when the loop
stops, the attempts whose scores are within `select_margin` of the best score (at most
`select_top` of them) are compared in pairs, each pair in both orders; a pair whose two
orders disagree is a tie (a judge that prefers whatever comes first cancels out). The
attempt with the most wins becomes the result; ties go to the higher score, then to the
earlier attempt.

A comparer is one adapter object (`Comparer`): a chat model asked with the library's
pairwise prompt (`ModelComparer`), or a user's function (`CallableComparer`);
`as_comparer` decides the kind once. `Selection` plans and runs the comparisons of one
loop's end through the finalize step's `Step`, so each counts against the budget, and
nothing starts when the budget left cannot pay for every comparison.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.errors import GraphBubbleUp

from langgraph_refine._calls._budget import Budget, BudgetStop, model_invocation
from langgraph_refine._calls._clients import held
from langgraph_refine._calls._models import as_chat_model, message_text
from langgraph_refine._decisions._end import compares_at_end
from langgraph_refine._decisions._options import DEFAULTS, LoopOptions
from langgraph_refine._decisions._prompts import PAIRWISE_INSTRUCTIONS, PAIRWISE_SYSTEM
from langgraph_refine._fences import json_objects
from langgraph_refine._internal import mark_internal
from langgraph_refine._kinds import kind_of
from langgraph_refine._result import attempt_rank, best_attempt
from langgraph_refine._state import (
    Attempt,
    ComparerLike,
    Preference,
    Usage,
)
from langgraph_refine.evaluators._base import acall, call_sync
from langgraph_refine.evaluators._judge import LLMJudge
from langgraph_refine.evaluators._tags import sandbox, strip_tags

PREFERENCES: tuple[str, ...] = get_args(Preference)

MAX_COMPARE_CHARS = 8000
"""Each response shown to the model comparer is cut to this many characters."""


class Comparer(ABC):
    """Compares two responses to a task (sync and async).

    Every subclass's `compare` and `acompare` run as the loop's own calls: kept out of
    `messages` streams, still traced (see `langgraph_refine._internal`).

    Attributes:
        name: Names the comparer in `metadata["selection"]`.
    """

    name: str = "comparer"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        mark_internal(cls, "compare", "acompare")

    @abstractmethod
    def compare(self, task: str, first: str, second: str) -> Preference:
        """Which response is better, `first` or `second`, or `"tie"` (sync)."""

    @abstractmethod
    async def acompare(self, task: str, first: str, second: str) -> Preference:
        """Async twin of `compare`."""


class CallableComparer(Comparer):
    """A user's function `(task, first, second) -> "first" | "second" | "tie"` (sync or async).

    Anything else it returns counts as a tie (never as a win).
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", None) or type(fn).__name__

    def compare(self, task: str, first: str, second: str) -> Preference:
        return read_preference(call_sync(self.fn, task, first, second, what="comparer"))

    async def acompare(self, task: str, first: str, second: str) -> Preference:
        return read_preference(await acall(self.fn, task, first, second))


class ModelComparer(Comparer):
    """A chat model asked with the library's pairwise prompt; its reply is read robustly.

    A reply that names no preference (a small model's garbage) is a tie.

    Args:
        model: The chat model.
        max_chars: Each response is cut to this many characters.
    """

    def __init__(self, model: BaseChatModel, *, max_chars: int = MAX_COMPARE_CHARS) -> None:
        self.model = held(model)  # its client's own retries off (`held`)
        self.max_chars = max_chars
        self.name = (
            getattr(model, "model_name", None)
            or getattr(model, "model", None)
            or (type(model).__name__)
        )

    def messages(self, task: str, first: str, second: str) -> list[BaseMessage]:
        """The system and user messages the model is sent."""
        shown_task, _ = strip_tags(task)
        sections = [f"# Task\n{shown_task.strip()}"]
        for label, text in (("A", first), ("B", second)):
            wrapped, truncated, _ = sandbox(text, self.max_chars)
            note = f" (cut to its first {self.max_chars} characters)" if truncated else ""
            sections.append(f"# Response {label}{note}\n{wrapped}")
        sections.append(f"# Instructions\n{PAIRWISE_INSTRUCTIONS}")
        return [SystemMessage(PAIRWISE_SYSTEM), HumanMessage("\n\n".join(sections))]

    def compare(self, task: str, first: str, second: str) -> Preference:
        with model_invocation() as done:
            reply = done(self.model.invoke(self.messages(task, first, second)))
        return read_preference(message_text(reply))

    async def acompare(self, task: str, first: str, second: str) -> Preference:
        with model_invocation() as done:
            reply = done(await self.model.ainvoke(self.messages(task, first, second)))
        return read_preference(message_text(reply))


def as_comparer(comparer: ComparerLike) -> Comparer:
    """Turn a `comparer=` value into a `Comparer`: the one place its kind is decided.

    A model string (`"openai:gpt-4o-mini"`) is resolved like the generator's.

    Raises:
        ValueError: If it is neither a chat model, a model string nor a callable.
    """
    if isinstance(comparer, Comparer):
        return comparer
    model = as_chat_model(comparer, "comparer")
    if model is not None:
        return ModelComparer(model)
    if kind_of(comparer) == "callable":
        return CallableComparer(comparer)
    raise ValueError(
        "comparer must be a chat model, a model string or a callable (task, first, second) -> "
        f"'first' | 'second' | 'tie'; got {type(comparer).__name__} ({comparer!r:.80})"
    )


PAIRWISE_ONLY = ("comparer", "select_top", "select_margin")
"""Options that mean something only with `select="pairwise"`."""


def check_pairwise_only(options: LoopOptions) -> None:
    """Refuse options a run would ignore: a comparer or its limits without pairwise selection.

    For a run whose options are all known up front (`refine`, `arefine`); a graph built
    once may still be asked for pairwise selection by a run's context.

    Raises:
        ValueError: Naming the options given and how to use them.
    """
    if options.select == "pairwise":
        return
    given = [name for name in PAIRWISE_ONLY if getattr(options, name) != getattr(DEFAULTS, name)]
    if given:
        names = ", ".join(f"{name}=" for name in given)
        raise ValueError(
            f"{names} only apply with select='pairwise' (the result is chosen by comparing "
            f"attempts), but select={options.select!r}: pass select='pairwise', or drop them"
        )


def judge_model_in(evaluator: Any) -> BaseChatModel | None:
    """The model of the first LLM judge in `evaluator`, or None if it holds none.

    The judge is `evaluator` itself, a member of a `panel` or a part of `combine` (at
    any depth).
    """
    if isinstance(evaluator, LLMJudge):
        return evaluator.model
    for inner in getattr(evaluator, "members", None) or getattr(evaluator, "parts", None) or []:
        found = judge_model_in(inner)
        if found is not None:
            return found
    return None


_WORDS: dict[str, Preference] = {
    "a": "first",
    "first": "first",
    "1": "first",
    "b": "second",
    "second": "second",
    "2": "second",
    "tie": "tie",
    "equal": "tie",
    "same": "tie",
    "neither": "tie",
    "both": "tie",
}
_KEYS = ("winner", "preference", "better", "choice", "answer", "verdict")
_WHOLE = re.compile(r"^[\W_]*(?:response\s+)?([a-z0-9]+)[\W_]*$", re.IGNORECASE)
_BRACKETED = re.compile(r"\[\[\s*(A|B|TIE)\s*\]\]", re.IGNORECASE)  # Arena-Hard's "[[A]]"
_NAMED = re.compile(r"\b(?:response|answer)\s+(A|B)\b|\b(A|B|TIE)\b|\b(tie)\b", re.IGNORECASE)


def read_preference(reply: object) -> Preference:
    """Read a comparer's answer; anything that names no preference is a tie.

    Accepted: `"first"`/`"second"`/`"tie"`, `A`/`B`/`TIE` alone or in `[[A]]`, a JSON object
    with a `winner` (or `preference`, `better`, ...) key, or a reply whose first preference
    word is `Response A`, a capital `A` or `B`, or `tie`.

    Example:
        >>> read_preference("B"), read_preference("[[A]] is better"), read_preference("hm")
        ('second', 'first', 'tie')
    """
    if not isinstance(reply, str):
        return "tie"
    text = reply.strip()
    if text.lower() in PREFERENCES:
        return text.lower()  # type: ignore[return-value]
    if match := _WHOLE.match(text):
        return _WORDS.get(match.group(1).lower(), "tie")
    if match := _BRACKETED.search(text):
        return _WORDS[match.group(1).lower()]
    for obj in ({str(k).lower(): v for k, v in o.items()} for o in json_objects(text)):
        value = next((obj[k] for k in _KEYS if isinstance(obj.get(k), str)), None)
        if value is not None:
            return read_preference(value)
    for match in _NAMED.finditer(text):
        word = match.group(1) or match.group(2) or match.group(3)
        # A lowercase "a" is the article, not a choice.
        if match.group(2) and not match.group(2).isupper():
            continue
        return _WORDS[word.lower()]
    return "tie"


def select_candidates(attempts: Sequence[Attempt], top: int, margin: float) -> list[Attempt]:
    """The attempts to compare: within `margin` of the best score, the `top` best, in order.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> a = [Attempt(index=i, response=str(i), evaluation=Evaluation(score=s))
        ...      for i, s in enumerate([0.5, 0.9, 0.85, 0.8])]
        >>> [c.index for c in select_candidates(a, top=2, margin=0.1)]
        [1, 2]
    """
    scored = [a for a in attempts if a.evaluation is not None]
    if not scored:
        return []
    # The one rule of the best attempt (`attempt_rank`): once an attempt passed, only
    # passing attempts are candidates, so a run that stopped on a PASS returns one; and
    # only those that got as far as the best (a cascade's judge, not a cheap stage).
    passed, reach, best = attempt_rank(max(scored, key=attempt_rank))
    pool = [a for a in scored if attempt_rank(a)[:2] == (passed, reach)]
    close = [a for a in pool if _score(a) >= best - margin - 1e-12]
    # The strongest first when capping; ties to the earlier attempt.
    close.sort(key=lambda a: (-_score(a), a.index))
    return sorted(close[:top], key=lambda a: a.index)


def _score(attempt: Attempt) -> float:
    return attempt.evaluation.score if attempt.evaluation is not None else 0.0


def _lower(attempt: Attempt) -> tuple[bool, int, float]:
    """A sort key that puts the better attempt (by `attempt_rank`) first."""
    passed, reach, score = attempt_rank(attempt)
    return (not passed, -reach, -score)


def outcome(first: int, second: int, forward: Preference, backward: Preference) -> int | None:
    """The winner of a pair from both orders, or None for a tie.

    `forward` is the answer with `first` shown first, `backward` with `second` shown
    first. Only when both orders prefer the same attempt does it win.

    Example:
        >>> outcome(0, 1, "first", "second"), outcome(0, 1, "first", "first")
        (0, None)
    """
    by_forward = {"first": first, "second": second}.get(forward)
    by_backward = {"first": second, "second": first}.get(backward)
    return by_forward if by_forward is not None and by_forward == by_backward else None


def choose(candidates: Sequence[Attempt], comparisons: Sequence[Mapping[str, Any]]) -> int:
    """The index of the winner: most wins, then the better rank, then the earlier attempt."""
    wins = {c.index: 0 for c in candidates}
    for comparison in comparisons:
        winner = comparison["outcome"]
        if isinstance(winner, int) and winner in wins:
            wins[winner] += 1
    best = min(candidates, key=lambda c: (-wins[c.index], _lower(c), c.index))
    return best.index


def by_score(attempts: Sequence[Attempt]) -> int | None:
    """The index of the best-scored attempt (the `"score"` rule), or None."""
    best = best_attempt(attempts)
    return best.index if best is not None else None


def budget_ran_out(stop: BudgetStop) -> str:
    """The selection's note when the budget stopped the comparisons."""
    return f"the budget ran out during the comparisons ({stop}); chosen by score"


def comparer_failed(exc: BaseException) -> str:
    """The selection's note when the comparer failed (after its retries): chosen by score.

    A comparer that fails (a timeout, an endpoint gone) is handled like a budget stop:
    the run keeps its attempts and falls back to the score, saying why.
    """
    text = " ".join(str(exc).split())[:300] or "no message"
    return f"the comparer failed ({type(exc).__name__}: {text}); chosen by score"


@dataclass
class Selection:
    """One loop's pairwise selection: the plan, the comparisons made, the choice.

    Args:
        task: The loop's task.
        attempts: Every attempt of the loop.
        top: `select_top`.
        margin: `select_margin`.
        comparer: Who compares.
    """

    task: str
    attempts: Sequence[Attempt]
    top: int
    margin: float
    comparer: Comparer

    def __post_init__(self) -> None:
        self.candidates = select_candidates(self.attempts, self.top, self.margin)
        self.pairs = list(itertools.combinations([c.index for c in self.candidates], 2))
        self.comparisons: list[dict[str, Any]] = []
        self._responses = {a.index: a.response for a in self.attempts}

    @property
    def calls_needed(self) -> int:
        """Comparisons to make: every pair, in both orders."""
        return 2 * len(self.pairs)

    def record(self, *, note: str | None = None) -> dict[str, Any]:
        """`metadata["selection"]`: the method, candidates, comparisons and chosen index.

        With a `note` (the budget could not pay), the choice is by score.
        """
        finished = note is None and len(self.comparisons) == len(self.pairs)
        chosen = choose(self.candidates, self.comparisons) if finished else by_score(self.attempts)
        if finished and not self.pairs:
            chosen = by_score(self.attempts)
        return {
            "method": "pairwise" if finished else "score",
            "comparer": self.comparer.name,
            "candidates": [c.index for c in self.candidates],
            "comparisons": list(self.comparisons),
            "chosen": chosen,
            "note": note,
        }

    def budget_note(self, calls_left: int | None) -> str | None:
        """Why the comparisons cannot start (the call budget left is too small), or None."""
        if calls_left is None or calls_left >= self.calls_needed:
            return None
        return (
            f"the budget left ({calls_left} model calls) cannot pay for the "
            f"{self.calls_needed} comparisons; chosen by score"
        )

    def add(self, pair: tuple[int, int], forward: Preference, backward: Preference) -> None:
        """Record one pair's two verdicts and its outcome."""
        winner = outcome(pair[0], pair[1], forward, backward)
        self.comparisons.append(
            {
                "pair": list(pair),
                "verdicts": [forward, backward],
                "outcome": "tie" if winner is None else winner,
            }
        )

    def ended(self, exc: Exception) -> dict[str, Any]:
        """The record of comparisons an error ended: a budget stop or a comparer's failure.

        Raises:
            GraphBubbleUp: An interrupt or a parent's command passes through.
        """
        if isinstance(exc, BudgetStop):
            return self.record(note=budget_ran_out(exc))
        if isinstance(exc, GraphBubbleUp):
            raise exc
        # The loop's attempts are worth more than the comparisons.
        return self.record(note=comparer_failed(exc))

    def run(self, call: Callable[..., Any]) -> dict[str, Any]:
        """Make every comparison through `call(fn, *args)` (a `Step.call`); return the record."""
        try:
            for a, b in self.pairs:
                first, second = self._responses[a], self._responses[b]
                forward = call(self.comparer.compare, self.task, first, second)
                backward = call(self.comparer.compare, self.task, second, first)
                self.add((a, b), forward, backward)
        except Exception as exc:
            return self.ended(exc)
        return self.record()

    async def arun(self, acall_: Callable[..., Any], *, concurrent: bool) -> dict[str, Any]:
        """Async `run`; with `concurrent`, every comparison at once (no budget to check between)."""

        async def pair(a: int, b: int) -> tuple[Preference, Preference]:
            first, second = self._responses[a], self._responses[b]
            forward = await acall_(self.comparer.acompare, self.task, first, second)
            backward = await acall_(self.comparer.acompare, self.task, second, first)
            return forward, backward

        try:
            if concurrent:
                # Every comparison ends (none is left running) before a failure is raised.
                verdicts = await asyncio.gather(
                    *(pair(a, b) for a, b in self.pairs), return_exceptions=True
                )
                for (a, b), verdict in zip(self.pairs, verdicts, strict=True):
                    if not isinstance(verdict, BaseException):
                        self.add((a, b), *verdict)
                failed = next((v for v in verdicts if isinstance(v, BaseException)), None)
                if failed is not None:
                    raise failed
            else:
                for a, b in self.pairs:
                    self.add((a, b), *await pair(a, b))
        except Exception as exc:
            return self.ended(exc)
        return self.record()


NO_COMPARER = (
    "select='pairwise' needs a comparer: pass comparer= (a chat model, or a callable "
    "(task, first, second) -> 'first' | 'second' | 'tie'), or judge_model=, or use a chat "
    "model as the generator or judge"
)


def selection_for(
    options: LoopOptions,
    stop_reason: str | None,
    task: str,
    attempts: Sequence[Attempt],
    comparer: Comparer | None,
) -> Selection | None:
    """The selection the loop's end makes: pairwise, or None (by score, or a reviewer chose).

    The one place that decides it, for the graph's finalize step and the agent's end.

    Raises:
        ValueError: If pairwise selection has no comparer.
    """
    if not compares_at_end(options.select, stop_reason):
        return None
    if comparer is None:
        raise ValueError(NO_COMPARER)
    return Selection(task, list(attempts), options.select_top, options.select_margin, comparer)


def calls_left(budget: Budget | None, spent: Usage) -> int | None:
    """Model calls the budget has left (0 once any limit is reached), None for no call limit."""
    if budget is None:
        return None
    if budget.exceeded(spent) is not None:
        return 0
    if budget.max_calls is None:
        return None
    left: int = budget.max_calls - spent.calls
    return left
