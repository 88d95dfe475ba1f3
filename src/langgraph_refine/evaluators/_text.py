"""Deterministic text checks: `word_count`, `contains_all` and `matches_regex`.

They call no model, so they cost nothing against the budget and give the same answer
every time. They leave `verdict` unset: the score alone decides when the loop stops.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph_refine._state import Evaluation
from langgraph_refine.evaluators._base import BaseEvaluator

# A word is a run of letters or digits; an apostrophe or hyphen between two such runs
# keeps them one word ("don't", "well-known"), as does a separator inside a number
# ("1,000", "3.5", "10:30"). Punctuation, Markdown bullets and dashes standing alone are
# not words.
WORD_PATTERN = re.compile(r"[^\W_]+(?:(?:['\u2019\-]|(?<=\d)[.,:](?=\d))[^\W_]+)*")


def count_words(text: str) -> int:
    """Count the words in `text` the way `word_count` does.

    A word is a run of letters or digits, with inner apostrophes and hyphens allowed
    ("don't" and "well-known" are one word each, and so are "1,000" and "3.5");
    stand-alone punctuation is not a word.

    Example:
        >>> count_words("Well-known facts don't lie - ever.")
        5
    """
    return len(WORD_PATTERN.findall(text))


def _words(n: int) -> str:
    return f"{n} word" if n == 1 else f"{n} words"


def _check_count(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"word_count: {name} must be a non-negative integer, got {value!r}")
    return value


class WordCount(BaseEvaluator):
    """Scores how well the response's length fits a word range. See `word_count`.

    Example:
        >>> WordCount(2, 3).score(6)
        0.0
    """

    name = "word_count"
    inline = True  # a quick pure-Python check (see BaseEvaluator)

    def __init__(self, min_words: int, max_words: int) -> None:
        self.min_words = _check_count("min_words", min_words)
        self.max_words = _check_count("max_words", max_words)
        if self.max_words < 1:
            raise ValueError(f"word_count: max_words must be at least 1, got {max_words!r}")
        if self.min_words > self.max_words:
            raise ValueError(
                f"word_count: min_words ({min_words}) is greater than max_words ({max_words}); "
                "pass the lower bound first, e.g. word_count(100, 150)"
            )

    def score(self, n: int) -> float:
        """The score for a response of `n` words."""
        if n < self.min_words:
            return n / self.min_words
        if n > self.max_words:
            return max(0.0, 1.0 - (n - self.max_words) / self.max_words)
        return 1.0

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        n = count_words(response)
        target = f"{self.min_words}-{self.max_words} words"
        if n < self.min_words:
            feedback = (
                f"The response has {_words(n)}, but it must have {target}: "
                f"add at least {_words(self.min_words - n)}."
            )
        elif n > self.max_words:
            feedback = (
                f"The response has {_words(n)}, but it must have {target}: "
                f"cut at least {_words(n - self.max_words)}."
            )
        else:
            feedback = f"The response has {_words(n)}, within the required {target}."
        return Evaluation(
            score=self.score(n),
            feedback=feedback,
            details={"words": n, "min_words": self.min_words, "max_words": self.max_words},
        )


def word_count(min_words: int, max_words: int) -> WordCount:
    """Score the response's length against a range of words.

    The score is 1.0 when the word count `n` is within `[min_words, max_words]`,
    `n / min_words` below it, and `max(0, 1 - (n - max_words) / max_words)` above it
    (so twice the maximum scores 0). The feedback gives the count, the range and how many
    words to add or cut. See `count_words` for what counts as a word.

    Args:
        min_words: Fewest words allowed (>= 0).
        max_words: Most words allowed (>= 1 and >= `min_words`).

    Returns:
        The evaluator.

    Raises:
        ValueError: If a bound is negative or not an integer, or `min_words > max_words`.

    Example:
        >>> ev = word_count(4, 6)
        >>> ev.evaluate("one two", {}).score
        0.5
        >>> ev.evaluate("one two", {}).feedback
        'The response has 2 words, but it must have 4-6 words: add at least 2 words.'
    """
    return WordCount(min_words, max_words)


def _word_pattern(word: str, case_sensitive: bool) -> re.Pattern[str]:
    # Whole-word match: no letter, digit or underscore directly before or after, so "cat"
    # is not found in "category". Spaces inside a phrase match any run of whitespace.
    body = r"\s+".join(re.escape(part) for part in word.split())
    return re.compile(rf"(?<!\w){body}(?!\w)", 0 if case_sensitive else re.IGNORECASE)


class ContainsAll(BaseEvaluator):
    """Scores the fraction of required words present. See `contains_all`.

    Example:
        >>> ContainsAll(["Owl", "owl", "lamp"]).words  # repeats count once
        ['Owl', 'lamp']
    """

    name = "contains_all"
    inline = True  # a quick pure-Python check (see BaseEvaluator)

    def __init__(self, words: Iterable[str], *, case_sensitive: bool = False) -> None:
        if isinstance(words, str | bytes):
            raise ValueError(
                f"contains_all: words must be a list of words, got the string {words!r}; "
                f"did you mean contains_all([{words!r}])?"
            )
        try:
            given = list(words)
        except TypeError:
            raise ValueError(
                f"contains_all: words must be a list of strings, got {type(words).__name__}"
            ) from None
        if not given:
            raise ValueError("contains_all: words must not be empty; give at least one word")
        self.words: list[str] = []
        seen: set[str] = set()
        for word in given:
            if not isinstance(word, str) or not word.strip():
                raise ValueError(
                    f"contains_all: every word must be a non-empty string, got {word!r} "
                    f"in {given!r}"
                )
            word = " ".join(word.split())
            key = word if case_sensitive else word.casefold()
            if key not in seen:  # a repeated word would count twice
                seen.add(key)
                self.words.append(word)
        self.case_sensitive = case_sensitive
        self._patterns = [_word_pattern(w, case_sensitive) for w in self.words]

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        present = [w for w, p in zip(self.words, self._patterns, strict=True) if p.search(response)]
        missing = [w for w in self.words if w not in present]
        total = len(self.words)
        if missing:
            names = ", ".join(f'"{w}"' for w in missing)
            feedback = (
                f"Missing {len(missing)} of {total} required words: {names}. "
                "Use each of them, spelled exactly like this, as a whole word."
            )
        elif total == 1:
            feedback = f'The required word "{self.words[0]}" is present.'
        else:
            feedback = f"All {total} required words are present."
        return Evaluation(
            score=len(present) / total,
            feedback=feedback,
            details={"present": present, "missing": missing},
        )


def contains_all(words: Iterable[str], *, case_sensitive: bool = False) -> ContainsAll:
    """Score the fraction of `words` that appear in the response, as whole words.

    Matching is by whole word: "cat" is found in "a cat sat" and "Cat!", but not in
    "category" or "cats" (list each form you accept, or use `matches_regex` for looser
    patterns). A phrase such as "New York" matches across any whitespace. Matching
    ignores case unless `case_sensitive=True`. Repeated words count once.

    Args:
        words: The required words or phrases (at least one).
        case_sensitive: Match case exactly.

    Returns:
        The evaluator. Its feedback names the missing words; `details` lists `present`
        and `missing`.

    Raises:
        ValueError: If `words` is empty, is a single string, or holds an empty word.

    Example:
        >>> ev = contains_all(["river", "lamp", "owl"])
        >>> result = ev.evaluate("An owl sat by the River.", {})
        >>> round(result.score, 2)
        0.67
        >>> result.details["missing"]
        ['lamp']
    """
    return ContainsAll(words, case_sensitive=case_sensitive)


class MatchesRegex(BaseEvaluator):
    r"""Scores 1.0 if a regular expression is found in the response. See `matches_regex`.

    Example:
        >>> MatchesRegex(r"\d+").evaluate("route 66", {}).details["match"]
        '66'
    """

    name = "matches_regex"
    inline = True  # a quick pure-Python check (see BaseEvaluator)

    def __init__(
        self, pattern: str | re.Pattern[str], *, flags: int = 0, description: str | None = None
    ) -> None:
        if isinstance(pattern, re.Pattern):
            if flags:
                raise ValueError(
                    "matches_regex: flags cannot be given with an already compiled pattern; "
                    "compile it with the flags instead"
                )
            self.pattern = pattern
        elif isinstance(pattern, str):
            try:
                self.pattern = re.compile(pattern, flags)
            except re.error as exc:
                raise ValueError(
                    f"matches_regex: invalid regular expression {pattern!r}: {exc}"
                ) from exc
        else:
            raise ValueError(
                f"matches_regex: pattern must be a string or a compiled re.Pattern, "
                f"got {type(pattern).__name__}"
            )
        if description is not None and not isinstance(description, str):
            raise ValueError(
                f"matches_regex: description must be a string, got {type(description).__name__}"
            )
        self.description = description

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        match = self.pattern.search(response)
        want = self.description or f"match the regular expression `{self.pattern.pattern}`"
        if match is None:
            return Evaluation(
                score=0.0,
                feedback=f"The response must {want}, and it does not.",
                details={"pattern": self.pattern.pattern, "match": None},
            )
        return Evaluation(
            score=1.0,
            feedback=f"The response does {want}.",
            details={
                "pattern": self.pattern.pattern,
                "match": match.group(0)[:200],
                "span": [match.start(), match.end()],
            },
        )


def matches_regex(
    pattern: str | re.Pattern[str], *, flags: int = 0, description: str | None = None
) -> MatchesRegex:
    r"""Score 1.0 if `pattern` is found anywhere in the response (`re.search`), else 0.0.

    A regular expression means little to a language model, so give `description` (what
    the pattern requires, in words) to make the feedback actionable.

    Args:
        pattern: A regular expression, as a string or compiled.
        flags: `re` flags for a string pattern, e.g. `re.IGNORECASE`.
        description: What a matching response does, completing "The response must ...",
            e.g. `"end with a question mark"`.

    Returns:
        The evaluator.

    Raises:
        ValueError: If the pattern is not a valid regular expression.

    Example:
        >>> ev = matches_regex(r"\?\s*$", description="end with a question mark")
        >>> ev.evaluate("Is it?", {}).score
        1.0
        >>> ev.evaluate("It is.", {}).feedback
        'The response must end with a question mark, and it does not.'
    """
    return MatchesRegex(pattern, flags=flags, description=description)
