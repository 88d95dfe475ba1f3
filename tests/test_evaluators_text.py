"""`word_count`, `contains_all` and `matches_regex`: formulas, boundaries, feedback, bad input."""

from __future__ import annotations

import re
from typing import Any

import pytest

from langgraph_refine.evaluators import contains_all, count_words, matches_regex, word_count


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


# ------------------------------------------------------------------------------------------
# word_count
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, 0.0),  # no words: 0 / min
        (1, 0.1),
        (9, 0.9),  # min - 1: n / min
        (10, 1.0),  # min
        (15, 1.0),
        (20, 1.0),  # max
        (21, 0.95),  # max + 1: 1 - 1/20
        (30, 0.5),
        (40, 0.0),  # 2 * max
        (55, 0.0),  # beyond 2 * max: clamped at 0
    ],
)
def test_word_count_formula(n: int, expected: float) -> None:
    result = word_count(10, 20).evaluate(words(n), {})
    assert result.score == pytest.approx(expected)
    assert result.details == {"words": n, "min_words": 10, "max_words": 20}


def test_word_count_feedback_below() -> None:
    feedback = word_count(10, 20).evaluate(words(7), {}).feedback
    assert "7 words" in feedback
    assert "10-20 words" in feedback
    assert "add at least 3 words." in feedback


def test_word_count_feedback_above() -> None:
    feedback = word_count(10, 20).evaluate(words(26), {}).feedback
    assert "26 words" in feedback
    assert "10-20 words" in feedback
    assert "cut at least 6 words." in feedback


def test_word_count_feedback_inside() -> None:
    feedback = word_count(10, 20).evaluate(words(12), {}).feedback
    assert feedback == "The response has 12 words, within the required 10-20 words."


def test_word_count_zero_minimum_and_exact_range() -> None:
    assert word_count(0, 5).evaluate("", {}).score == 1.0
    exact = word_count(3, 3)
    assert [exact.evaluate(words(n), {}).score for n in (2, 3, 4)] == pytest.approx(
        [2 / 3, 1.0, 2 / 3]
    )


def test_word_count_has_no_verdict() -> None:
    assert word_count(1, 2).evaluate("one", {}).verdict is None


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("", 0),
        ("   \n\t", 0),
        ("one", 1),
        ("one two  three\nfour", 4),
        ("Don't stop - it's well-known.", 4),
        ("- bullet one\n- bullet two", 4),
        ("Numbers 1,000 and 3.5 count at 10:30", 7),
        ("Über café naïve", 3),
        ("snake_case words", 3),
    ],
)
def test_count_words(text: str, n: int) -> None:
    assert count_words(text) == n


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((10, 5), r"min_words \(10\) is greater than max_words \(5\)"),
        ((-1, 5), r"min_words must be a non-negative integer, got -1"),
        ((1, -5), r"max_words must be a non-negative integer, got -5"),
        ((0, 0), r"max_words must be at least 1, got 0"),
        ((1.5, 3), r"min_words must be a non-negative integer, got 1.5"),
        ((True, 3), r"min_words must be a non-negative integer, got True"),
        ((1, "9"), r"max_words must be a non-negative integer, got '9'"),
    ],
)
def test_word_count_bad_input(args: tuple[Any, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        word_count(*args)


async def test_word_count_async() -> None:
    result = await word_count(2, 4).aevaluate("one", {})
    assert result.score == 0.5


# ------------------------------------------------------------------------------------------
# contains_all
# ------------------------------------------------------------------------------------------


def test_contains_all_fraction_and_missing_words_by_name() -> None:
    result = contains_all(["river", "lamp", "owl", "stone"]).evaluate("An owl sat on a stone.", {})
    assert result.score == 0.5
    assert result.details == {"present": ["owl", "stone"], "missing": ["river", "lamp"]}
    assert 'Missing 2 of 4 required words: "river", "lamp".' in result.feedback


def test_contains_all_everything_present() -> None:
    result = contains_all(["owl"]).evaluate("owl", {})
    assert result.score == 1.0
    assert result.feedback == 'The required word "owl" is present.'
    result = contains_all(["owl", "lamp"]).evaluate("owl lamp", {})
    assert result.feedback == "All 2 required words are present."


def test_word_count_feedback_singular() -> None:
    assert word_count(2, 3).evaluate("one", {}).feedback == (
        "The response has 1 word, but it must have 2-3 words: add at least 1 word."
    )


def test_contains_all_none_present() -> None:
    assert contains_all(["a1", "b2"]).evaluate("nothing here", {}).score == 0.0


def test_contains_all_matches_whole_words_only() -> None:
    ev = contains_all(["cat"])
    assert ev.evaluate("A cat.", {}).score == 1.0
    assert ev.evaluate("(cat)", {}).score == 1.0
    assert ev.evaluate("cat-like", {}).score == 1.0  # a hyphen ends a word
    assert ev.evaluate("category", {}).score == 0.0
    assert ev.evaluate("cats", {}).score == 0.0
    assert ev.evaluate("bobcat", {}).score == 0.0
    assert ev.evaluate("cat_name", {}).score == 0.0


def test_contains_all_ignores_case_by_default() -> None:
    ev = contains_all(["River"])
    assert ev.evaluate("the RIVER", {}).score == 1.0
    assert ev.evaluate("the river", {}).score == 1.0


def test_contains_all_case_sensitive() -> None:
    ev = contains_all(["River"], case_sensitive=True)
    assert ev.evaluate("the River", {}).score == 1.0
    assert ev.evaluate("the river", {}).score == 0.0
    # Words differing only in case are distinct when case matters.
    assert len(contains_all(["a", "A"], case_sensitive=True).words) == 2


def test_contains_all_phrases_match_across_whitespace() -> None:
    ev = contains_all(["New York"])
    assert ev.evaluate("in new\n  york today", {}).score == 1.0
    assert ev.evaluate("in NewYork", {}).score == 0.0


def test_contains_all_words_with_symbols() -> None:
    ev = contains_all(["C++", ".NET", "e-mail"])
    assert ev.evaluate("I know C++, .NET and e-mail.", {}).score == 1.0
    assert ev.evaluate("I know C and NET and email", {}).score == 0.0


def test_contains_all_repeated_words_count_once() -> None:
    ev = contains_all(["owl", "OWL", "lamp"])
    assert ev.words == ["owl", "lamp"]
    assert ev.evaluate("an owl", {}).score == 0.5


@pytest.mark.parametrize(
    ("words_arg", "message"),
    [
        ([], "words must not be empty"),
        ((), "words must not be empty"),
        ("owl", r"got the string 'owl'; did you mean contains_all\(\['owl'\]\)"),
        ([""], "every word must be a non-empty string, got ''"),
        (["owl", "  "], "every word must be a non-empty string, got '  '"),
        (["owl", 3], "every word must be a non-empty string, got 3"),
        (None, "words must be a list of strings, got NoneType"),
    ],
)
def test_contains_all_bad_input(words_arg: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        contains_all(words_arg)


def test_contains_all_accepts_any_iterable() -> None:
    assert contains_all(w for w in ["a1"]).evaluate("a1", {}).score == 1.0


# ------------------------------------------------------------------------------------------
# matches_regex
# ------------------------------------------------------------------------------------------


def test_matches_regex_found_and_not_found() -> None:
    ev = matches_regex(r"\d{4}-\d{2}-\d{2}")
    found = ev.evaluate("Due 2024-05-01.", {})
    assert found.score == 1.0
    assert found.details["match"] == "2024-05-01"
    assert found.details["span"] == [4, 14]
    missing = ev.evaluate("Due soon.", {})
    assert missing.score == 0.0
    assert r"\d{4}-\d{2}-\d{2}" in missing.feedback


def test_matches_regex_searches_anywhere() -> None:
    assert matches_regex("b").evaluate("abc", {}).score == 1.0
    assert matches_regex("^b").evaluate("abc", {}).score == 0.0


def test_matches_regex_description_makes_feedback_readable() -> None:
    ev = matches_regex(r"\?\s*$", description="end with a question mark")
    assert ev.evaluate("Done.", {}).feedback == (
        "The response must end with a question mark, and it does not."
    )
    assert ev.evaluate("Done?", {}).feedback == "The response does end with a question mark."


def test_matches_regex_flags_and_compiled_patterns() -> None:
    assert matches_regex("hello", flags=re.IGNORECASE).evaluate("HELLO", {}).score == 1.0
    assert matches_regex(re.compile("hello", re.I)).evaluate("HeLLo", {}).score == 1.0
    assert matches_regex("hello").evaluate("HELLO", {}).score == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pattern": "(unclosed"}, r"invalid regular expression '\(unclosed'"),
        ({"pattern": "[a-"}, r"invalid regular expression '\[a-'"),
        ({"pattern": "*x"}, "invalid regular expression"),
        ({"pattern": 42}, "pattern must be a string or a compiled re.Pattern, got int"),
        ({"pattern": re.compile("x"), "flags": re.I}, "flags cannot be given"),
        ({"pattern": "x", "description": 3}, "description must be a string"),
    ],
)
def test_matches_regex_bad_input(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        matches_regex(**kwargs)


def test_names_and_no_model_calls() -> None:
    for ev, name in [
        (word_count(1, 2), "word_count"),
        (contains_all(["a"]), "contains_all"),
        (matches_regex("a"), "matches_regex"),
    ]:
        assert ev.name == name
        assert ev.calls_model is False
