"""`no_repetition`: looping text scores low with feedback quoting the loop; normal prose
scores high; it combines with metrics that looping text can game."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_refine import refine
from langgraph_refine.evaluators import (
    NoRepetition,
    combine,
    contains_all,
    no_repetition,
    word_count,
)

# Degenerate replies of the kind small models write when a loop rewards length.
EDITED_LOOP = (
    "The original answer was 80-200 words but edited to 20-1 sentences"
    + ", edited to 20-1 sentences" * 11
    + "."
)
SENTENCE_LOOP = (
    "Owls are nocturnal birds of prey. " + "They hunt mice and voles in the fields at night. " * 8
)
WORD_LOOP = "The answer is " + "very " * 60 + "good."
SAME_ANSWER_TWICE = (
    "Photosynthesis is the process by which green plants turn light, water and carbon "
    "dioxide into sugar and oxygen. "
) * 2

# Normal prose: the Gettysburg Address (which repeats "we can not" and "the people" by
# design), a technical paragraph and a short story opening.
GETTYSBURG = (
    "Four score and seven years ago our fathers brought forth on this continent, a new "
    "nation, conceived in Liberty, and dedicated to the proposition that all men are "
    "created equal. Now we are engaged in a great civil war, testing whether that nation, "
    "or any nation so conceived and so dedicated, can long endure. We are met on a great "
    "battle-field of that war. We have come to dedicate a portion of that field, as a "
    "final resting place for those who here gave their lives that that nation might live. "
    "It is altogether fitting and proper that we should do this. But, in a larger sense, "
    "we can not dedicate -- we can not consecrate -- we can not hallow -- this ground. The "
    "brave men, living and dead, who struggled here, have consecrated it, far above our "
    "poor power to add or detract. The world will little note, nor long remember what we "
    "say here, but it can never forget what they did here. It is for us the living, "
    "rather, to be dedicated here to the unfinished work which they who fought here have "
    "thus far so nobly advanced. It is rather for us to be here dedicated to the great task "
    "remaining before us -- that from these honored dead we take increased devotion to "
    "that cause for which they gave the last full measure of devotion -- that we here "
    "highly resolve that these dead shall not have died in vain -- that this nation, under "
    "God, shall have a new birth of freedom -- and that government of the people, by the "
    "people, for the people, shall not perish from the earth."
)
TECHNICAL = (
    "A hash table stores key-value pairs in an array of buckets. To find the bucket for "
    "a key, it computes a hash of the key and takes the remainder modulo the number of "
    "buckets. Two keys that land in the same bucket collide; the table resolves this by "
    "chaining entries in a list or by probing for the next free slot. When the table "
    "fills past a load factor, at the same time as an insert, it allocates a larger "
    "array and moves every entry, so that lookups stay fast on average. In the worst "
    "case, at the same time as many keys collide, a lookup degrades to a linear scan."
)
STORY = (
    "The lighthouse keeper climbed the stairs at dusk, as she had every evening for "
    "thirty years. Below, the sea was calm and grey. She trimmed the wick, wiped the salt "
    "from the lens and watched the first beam sweep across the water towards the rocks."
)

STATE = {"task": "Write about something."}


@pytest.mark.parametrize("text", [GETTYSBURG, TECHNICAL, STORY], ids=["speech", "tech", "story"])
def test_normal_prose_scores_at_least_0_9(text: str) -> None:
    assert no_repetition().evaluate(text, STATE).score >= 0.9


@pytest.mark.parametrize(
    "text", [EDITED_LOOP, SENTENCE_LOOP, WORD_LOOP], ids=["phrase", "sentence", "word"]
)
def test_looping_text_scores_below_0_3(text: str) -> None:
    assert no_repetition().evaluate(text, STATE).score < 0.3


def test_feedback_quotes_the_loop_and_how_often_it_appears() -> None:
    result = no_repetition().evaluate(EDITED_LOOP, STATE)
    assert result.feedback.startswith("'edited to 20-1 sentences' appears 12 times; say it once")
    assert result.details["top_count"] == 12
    assert result.details["repeated"] == {"edited to 20-1 sentences": 12}
    assert result.verdict is None


def test_a_loop_longer_than_n_words_is_quoted_whole() -> None:
    result = no_repetition().evaluate(SENTENCE_LOOP, STATE)
    quoted = "They hunt mice and voles in the fields at night"
    assert result.feedback.startswith(f"'{quoted}' appears 8 times; say it once.")
    assert len(result.details["repeated"]) == 1  # the n-grams inside the loop are one unit


def test_text_said_twice_scores_about_half() -> None:
    result = no_repetition().evaluate(SAME_ANSWER_TWICE, STATE)
    assert 0.4 <= result.score <= 0.6
    assert "appears 2 times" in result.feedback
    assert "say it once" not in result.feedback  # the sharper penalty starts above 2


def test_a_phrase_repeated_three_times_is_penalised_more_sharply() -> None:
    three = "Owls hunt at dusk in the quiet fields, " * 3 + "and rest by day in old barns."
    lenient = no_repetition(max_repeats=3).evaluate(three, STATE).score
    strict = no_repetition().evaluate(three, STATE).score
    assert strict == pytest.approx(lenient * (2 / 3) ** 0.5)


def test_score_formula() -> None:
    ev = NoRepetition(4, max_repeats=2)
    assert ev.score(0.0, 1) == 1.0
    assert ev.score(0.5, 2) == 0.5
    assert ev.score(0.5, 8) == pytest.approx(0.25)


def test_short_or_empty_text_scores_one() -> None:
    result = no_repetition().evaluate("Owls hoot.", STATE)
    assert result.score == 1.0
    assert "shorter than 4 words" in result.feedback
    assert no_repetition().evaluate("", STATE).score == 1.0


def test_case_and_punctuation_do_not_hide_a_loop() -> None:
    text = "Say it again. SAY IT AGAIN! say, it, again? " * 4
    result = no_repetition(n=3).evaluate(text, STATE)
    assert result.score < 0.3


def test_smaller_n_catches_shorter_loops() -> None:
    text = "go on, go on, go on, go on, go on, go on"
    assert no_repetition().evaluate(text, STATE).score < 0.3
    assert no_repetition(n=2).evaluate(text, STATE).details["top_count"] == 6


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 1}, "n must be an integer >= 2, got 1"),
        ({"n": True}, "n must be an integer >= 2"),
        ({"n": 3.0}, "n must be an integer >= 2"),
        ({"max_repeats": 0}, "max_repeats must be an integer >= 1, got 0"),
    ],
)
def test_invalid_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        no_repetition(**kwargs)


def test_a_keyword_and_length_metric_alone_is_gamed_by_looping_text() -> None:
    keywords = ["owl", "night", "hunt"]
    loop = "The owl will hunt at night, " * 14
    honest = (
        "The barn owl leaves its roost after dusk to hunt. Flying low over meadows and "
        "field edges, it listens for the rustle of voles in the grass, then drops on them "
        "in the dark. Its facial disc funnels sound to ears set at different heights, so "
        "it can locate prey by hearing alone, even on a moonless night. A pair may eat "
        "thousands of rodents in a year, which is why farmers put up nest boxes in their "
        "barns and sheds."
    )
    gameable = combine(word_count(80, 200), contains_all(keywords))
    guarded = combine(word_count(80, 200), contains_all(keywords), no_repetition())
    assert gameable.evaluate(loop, STATE).score == 1.0  # the loop maximises both
    assert guarded.evaluate(loop, STATE).score < guarded.evaluate(honest, STATE).score
    assert guarded.evaluate(honest, STATE).score == 1.0
    assert "[no_repetition]" in guarded.evaluate(loop, STATE).feedback


def test_in_a_loop_the_feedback_reaches_the_generator() -> None:
    drafts = [EDITED_LOOP, STORY]
    prompts: list[str] = []

    def generate(state: Any) -> str:
        if state["attempts"]:
            prompts.append(state["attempts"][-1].evaluation.feedback)
        return drafts[min(len(state["attempts"]), 1)]

    result = refine(generate, "Tell a short story.", no_repetition(), target_score=0.9)
    assert result.value == STORY
    assert result.stop_reason == "target_reached"
    assert "appears 12 times; say it once" in prompts[0]
