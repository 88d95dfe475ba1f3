"""`no_repetition`: a degeneration guard that scores repeated phrases and looping text low.

Small models, and refinement loops that reward length or keywords, can fall into loops
("edited to 20-1 sentences, edited to 20-1 sentences, ..."): such text can maximise a
word count or keyword coverage while saying nothing. This check calls no model.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_refine._state import Evaluation
from langgraph_refine.evaluators._base import BaseEvaluator
from langgraph_refine.evaluators._text import WORD_PATTERN

_MAX_QUOTE = 80
_MAX_QUOTED_PHRASES = 3


@dataclass(frozen=True)
class _Phrase:
    """A repeated phrase: its text (as first written) and how often it appears."""

    text: str
    words: tuple[str, ...]
    count: int


def _check(name: str, value: object, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"no_repetition: {name} must be an integer >= {minimum}, got {value!r}")
    return value


class NoRepetition(BaseEvaluator):
    """Scores text by how little of it repeats. See `no_repetition`.

    Example:
        >>> NoRepetition(n=2).evaluate("go on, go on, go on, go on", {}).details["top_count"]
        4
    """

    name = "no_repetition"
    inline = True  # a quick pure-Python check (see BaseEvaluator)

    def __init__(self, n: int = 4, *, max_repeats: int = 2) -> None:
        self.n = _check("n", n, 2)
        self.max_repeats = _check("max_repeats", max_repeats, 1)

    def score(self, repeated_share: float, top_count: int) -> float:
        """The score for a text whose n-grams repeat `repeated_share` of the time.

        `1 - repeated_share`, times `sqrt(max_repeats / top_count)` when the most
        repeated phrase appears more than `max_repeats` times.
        """
        score = 1.0 - repeated_share
        if top_count > self.max_repeats:
            score *= math.sqrt(self.max_repeats / top_count)
        return min(1.0, max(0.0, score))

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        matches = list(WORD_PATTERN.finditer(response))
        words = [m.group(0).lower() for m in matches]
        grams = [tuple(words[i : i + self.n]) for i in range(len(words) - self.n + 1)]
        if not grams:
            return Evaluation(
                score=1.0,
                feedback=f"The response is shorter than {self.n} words; nothing repeats.",
                details={"n": self.n, "ngrams": 0, "repeated_share": 0.0, "top_count": 0},
            )
        counts = Counter(grams)
        repeated_share = (len(grams) - len(counts)) / len(grams)
        phrases = _phrases(response, matches, grams, counts)
        top_count = max(counts.values())
        score = self.score(repeated_share, top_count)
        details: dict[str, Any] = {
            "n": self.n,
            "ngrams": len(grams),
            "repeated_share": round(repeated_share, 4),
            "top_count": top_count,
            "repeated": {_quote(p.text): p.count for p in phrases},
        }
        return Evaluation(
            score=score, feedback=self._feedback(phrases, repeated_share), details=details
        )

    def _feedback(self, phrases: Sequence[_Phrase], repeated_share: float) -> str:
        if not phrases:
            return f"No {self.n}-word phrase repeats."
        parts = [
            f"'{_quote(p.text)}' appears {p.count} times"
            + ("; say it once" if p.count > self.max_repeats else "")
            for p in phrases
        ]
        summary = (
            f"{repeated_share:.0%} of the response's {self.n}-word sequences repeat earlier ones"
        )
        advice = (
            "remove the repeated text and use the words for new content."
            if repeated_share >= 0.2 or any(p.count > self.max_repeats for p in phrases)
            else "vary the wording."
        )
        return f"{'; '.join(parts)}. {summary}: {advice}"


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_QUOTE else text[: _MAX_QUOTE - 3] + "..."


def _phrases(
    text: str,
    matches: Sequence[re.Match[str]],
    grams: Sequence[tuple[str, ...]],
    counts: Counter[tuple[str, ...]],
) -> list[_Phrase]:
    """The most repeated phrases, each extended to its whole repeating unit.

    A loop repeats a unit that may be longer than n words; the n-grams inside it are
    rotations of one another, so only the first of them is quoted.
    """
    first: dict[tuple[str, ...], int] = {}
    for i, gram in enumerate(grams):
        first.setdefault(gram, i)
    repeated = sorted((g for g, c in counts.items() if c > 1), key=lambda g: (-counts[g], first[g]))
    words = [m.group(0).lower() for m in matches]
    found: list[_Phrase] = []
    covered: list[str] = []
    for gram in repeated:
        joined = f" {' '.join(gram)} "
        if any(joined in unit for unit in covered):
            continue
        starts = [i for i, g in enumerate(grams) if g == gram]
        length = _unit_length(words, starts, len(gram))
        unit = words[starts[0] : starts[0] + length]
        covered.append(f" {' '.join(unit + unit)} ")  # its rotations are inside it twice
        start, end = matches[starts[0]].start(), matches[starts[0] + length - 1].end()
        found.append(_Phrase(text[start:end], tuple(unit), counts[gram]))
        if len(found) == _MAX_QUOTED_PHRASES:
            break
    return found


def _unit_length(words: Sequence[str], starts: Sequence[int], n: int) -> int:
    """How far the phrase at `starts` extends while every occurrence goes on alike.

    Never past the distance between two occurrences: a loop's unit ends where it starts
    again.
    """
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    limit = min(gaps) if gaps else n
    length = n
    while length < limit:
        following = {words[s + length] if s + length < len(words) else None for s in starts}
        if len(following) != 1 or None in following:
            break
        length += 1
    return length


def no_repetition(n: int = 4, *, max_repeats: int = 2) -> NoRepetition:
    """Guard against degenerate, looping text: score repeated phrases low.

    The response's words (lower-cased, as `count_words` finds them) are cut into
    overlapping `n`-word sequences. The score is `1 - share`, where `share` is the
    fraction of those sequences that repeat an earlier one, multiplied by
    `sqrt(max_repeats / k)` when the most repeated sequence appears `k > max_repeats`
    times. A normal paragraph scores about 0.95 or more; text that says the same thing
    twice about 0.5; a loop that repeats a phrase a dozen times below 0.1. The feedback
    quotes the most repeated phrases (each extended to the whole unit that repeats)
    and how often they appear: "'edited to 20-1 sentences' appears 12 times; say it
    once".

    Combine it with metrics that looping text can game, e.g.
    `combine(word_count(80, 200), contains_all([...]), no_repetition())`: a length or
    keyword check alone is maximised by repeating a phrase that has the keywords.

    Args:
        n: Words per sequence (>= 2). Smaller values also catch short stock phrases
            ("at the same time") that a normal text may repeat; 4 to 5 catches loops.
        max_repeats: How often one sequence may appear before the sharper penalty
            applies (>= 1).

    Returns:
        The evaluator. `details` holds `n`, `ngrams`, `repeated_share`, `top_count`
        and `repeated` (quoted phrase -> count). It gives no verdict.

    Raises:
        ValueError: If `n` < 2 or `max_repeats` < 1, or either is not an integer.

    Example:
        >>> text = "Owls hunt at night, " + "edited to one sentence, " * 6
        >>> result = no_repetition().evaluate(text, {})
        >>> result.score < 0.3
        True
        >>> result.feedback.split(".")[0]
        "'edited to one sentence' appears 6 times; say it once"
    """
    return NoRepetition(n, max_repeats=max_repeats)
