"""Messy replies of a real judge, recorded from the local model (cassettes/test_recorded).

SmolLM2 is a poor judge, which makes it a good source of the replies a judge must
survive: scores outside the 0-1 scale even under a JSON schema (`"score": 13`), verdicts
that contradict their own scores, feedback that is junk ("PASS", ""), replies cut off at
the token limit, and free text with no verdict or score at all. The generator here is a
fixed callable, so the judge's requests (and the recorded replies) depend on nothing
else; each test runs the loop and checks, reply by reply, what became of it: scores
normalised or clamped into [0, 1] with the raw value and scale in `details`, a
self-contradicting reply asked again and then stripped of its verdict, and an
unreadable reply retried once and then counted as FAIL with score 0, never as a pass.

The second half tests the recording machinery itself (tests/recording.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import vcr as vcrpy
from vcr.request import Request

from langgraph_refine import Evaluation, RefineResult, refine
from langgraph_refine.evaluators import llm_judge
from langgraph_refine.evaluators._judge import _parse_verdict as parse_verdict
from langgraph_refine.evaluators._judge import contradiction, normalise_score, read_reply
from tests import recording

TASK = "Explain the Turing test in one sentence."
TURING = (
    "The Turing test, proposed by Alan Turing in 1950, checks whether a machine's "
    "conversation can be told apart from a human's."
)
OFF_TOPIC = "Bananas are yellow."
POINTS = (
    'Reply format: {"feedback": "...", "verdict": "...", "score": 13}. '
    "Scores are integers from 1 to 20."
)


def fixed(responses: list[str]) -> Callable[[Any], str]:
    """A generator that answers round k with responses[k] (no model call)."""

    def generate(state: Any) -> str:
        return responses[min(len(state["attempts"]), len(responses) - 1)]

    return generate


def judge_replies(cassette: Any, result: RefineResult) -> list[tuple[Evaluation, list[str]]]:
    """Each attempt's evaluation with the judge replies (one or two) it was read from."""
    texts = recording.reply_texts(cassette)
    pairs = []
    for attempt in result.attempts:
        assert attempt.evaluation is not None
        calls = attempt.evaluation.details["judge_calls"]
        pairs.append((attempt.evaluation, texts[:calls]))
        texts = texts[calls:]
    assert texts == [], "every recorded judge reply belongs to an attempt"
    return pairs


def as_json(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def check_reading(evaluation: Evaluation, replies: list[str]) -> None:
    """What the loop made of a judge's replies agrees with them, with nothing hidden."""
    assert 0.0 <= evaluation.score <= 1.0
    if evaluation.details.get("parsed_from") is None:  # unreadable, twice
        assert len(replies) == 2
        assert (evaluation.verdict, evaluation.score) == ("FAIL", 0.0)
        assert len(evaluation.details["judge_errors"]) == 2
        assert "could not be parsed" in evaluation.feedback
        return
    # The reading comes from the last reply that is JSON (the one before it, when the
    # judge was asked again and its second reply was cut off).
    readable = [reply for text in replies if (reply := as_json(text)) is not None]
    assert readable, "a reading comes from the JSON the judge wrote"
    reply = readable[-1]
    raw = reply["score"]
    assert evaluation.details["raw_score"] == raw
    score, scale, note = normalise_score(raw)
    assert (evaluation.score, evaluation.details["scale"]) == (score, scale)
    if not 0.0 <= raw <= 1.0:
        assert scale != "0-1"
    if note:
        assert note in evaluation.details["note"]
    verdict = parse_verdict(reply["verdict"])[0]
    if "contradiction" in evaluation.details:
        # Asked again, the judge still (or never clearly) agreed with itself.
        assert len(replies) == 2
        assert contradiction(verdict, score) is not None
        assert evaluation.verdict is None
    else:
        assert evaluation.verdict == verdict
        assert contradiction(verdict, score) is None
    if len(replies) == 2 and as_json(replies[0]) is not None:
        first = as_json(replies[0])
        assert first is not None
        first_score = normalise_score(first["score"])[0]
        assert contradiction(parse_verdict(first["verdict"])[0], first_score) is not None
        assert "contradicts itself" in evaluation.details["judge_errors"][0]
    if not str(reply.get("feedback", "")).strip():
        assert evaluation.feedback.startswith("The judge gave ")


def check_stop(result: RefineResult, max_iterations: int) -> None:
    last = result.attempts[-1].evaluation
    assert last is not None
    if last.verdict == "PASS":
        assert result.stop_reason == "passed"
    elif last.score >= 0.9:  # the default target_score
        assert result.stop_reason == "target_reached"
    else:
        assert result.stop_reason != "passed"
        assert len(result.attempts) == 1 + max_iterations
    assert all(a.evaluation and a.evaluation.verdict != "PASS" for a in result.attempts[:-1])


@pytest.mark.vcr
def test_a_score_outside_the_scale_is_normalised_and_noted(record_mode: str, vcr: Any) -> None:
    judge = llm_judge(
        recording.recorded_model(record_mode, temperature=1.5, seed=2, max_tokens=150),
        criteria=POINTS,
    )
    result = refine(fixed([TURING, OFF_TOPIC]), TASK, judge, max_iterations=1)

    pairs = judge_replies(vcr, result)
    for evaluation, replies in pairs:
        check_reading(evaluation, replies)
    check_stop(result, max_iterations=1)
    # What this recording holds: "verdict": "PASS" with "score": 13 under a schema that
    # asks for 0.0-1.0, read as 0.13 on a 0-100 scale. That contradicts the PASS, so the
    # judge is asked again; it answers FAIL with score 1, a contradiction again, so the
    # verdict is dropped and the score (1.0) stands, which reaches the target.
    (evaluation, replies), *_ = pairs
    assert [json.loads(r)["score"] for r in replies] == [13, 1]
    assert "verdict PASS with score 0.13" in evaluation.details["judge_errors"][0]
    assert evaluation.verdict is None
    assert "still gave verdict FAIL with score 1.00" in evaluation.details["contradiction"]
    assert (result.stop_reason, result.score) == ("target_reached", 1.0)


@pytest.mark.vcr
def test_the_judge_no_longer_copies_a_score_from_the_template(record_mode: str, vcr: Any) -> None:
    judge = llm_judge(recording.recorded_model(record_mode, temperature=0.0, max_tokens=120))
    result = refine(fixed([OFF_TOPIC]), TASK, judge, max_iterations=1)

    pairs = judge_replies(vcr, result)
    for evaluation, replies in pairs:
        check_reading(evaluation, replies)
    check_stop(result, max_iterations=1)
    # With a reply template ending in `"score": 0.0`, this judge (at temperature 0)
    # passed the off-topic answer with score 0.0, a copied value. The instructions now
    # describe the fields without example values and say that PASS needs a score of at
    # least 0.5; the same judge now answers PASS with 0.5, which agrees with itself.
    evaluation, replies = pairs[0]
    assert len(replies) == 1
    assert (evaluation.verdict, evaluation.score) == ("PASS", 0.5)
    assert "contradiction" not in evaluation.details
    assert result.stop_reason == "passed"


@pytest.mark.vcr
def test_free_text_replies_leave_the_attempts_unjudged_and_never_pass(
    record_mode: str, vcr: Any
) -> None:
    judge = llm_judge(
        recording.recorded_model(record_mode, temperature=0.0, max_tokens=60),
        structured_output=False,
    )
    shown: list[list[str | None]] = []

    def generate(state: Any) -> str:
        attempts = state["attempts"]
        shown.append([a.error for a in attempts])
        return [TURING, OFF_TOPIC][min(len(attempts), 1)]

    result = refine(generate, TASK, judge, max_iterations=1, on_evaluator_error="skip")

    texts = recording.reply_texts(vcr)
    assert len(texts) == 2 * len(result.attempts)  # each judgment asked twice
    assert all(read_reply(text)[0] is None for text in texts)  # none holds a reading
    for attempt in result.attempts:
        assert attempt.evaluation is None and attempt.score is None
        assert attempt.error is not None and "could not be read (2 calls)" in attempt.error
    assert result.stop_reason == "max_iterations"
    # Nothing was judged: no attempt passed, the last one is returned, unscored.
    assert (result.value, result.score, result.best_index) == (OFF_TOPIC, None, None)
    assert result.attempts[1].move == "sample"  # nothing judged to refine
    # The retry asked for JSON only, after the original instructions.
    second_prompt = recording.last_user_message(recording.sent_bodies(vcr)[1])
    assert "Reply with one JSON object only" in second_prompt


@pytest.mark.vcr
def test_a_reply_cut_off_at_the_token_limit_is_retried_then_left_unjudged(
    record_mode: str, vcr: Any
) -> None:
    judge = llm_judge(recording.recorded_model(record_mode, temperature=0.0, max_tokens=12))
    result = refine(fixed([TURING]), TASK, judge, max_iterations=0, on_evaluator_error="skip")

    replies = recording.reply_texts(vcr)
    assert [as_json(r) for r in replies] == [None, None]  # both replies are cut-off JSON
    assert all(r.lstrip().startswith("{") for r in replies)
    (attempt,) = result.attempts
    assert attempt.score is None and "cut off" in str(attempt.error)
    assert result.stop_reason == "max_iterations"


# -- the recording machinery -----------------------------------------------------------------


EDIT_TASK = (
    "Write a shopping list of exactly five fruits, one per line, each line starting "
    "with '- '. Include apple, banana and cherry."
)


@pytest.mark.vcr
def test_edits_on_the_real_model_apply_whole_or_not_at_all(record_mode: str, vcr: Any) -> None:
    # SmolLM2 asked for SEARCH/REPLACE blocks: whatever it replies, each refinement is a
    # rewrite (no block), its blocks applied whole, or FAIL with its parent's text; the
    # round is never lost to an error and nothing is applied partly.
    from langgraph_refine._decisions._edits import apply_blocks, parse_blocks
    from langgraph_refine._decisions._prompts import EDIT_INSTRUCTIONS
    from langgraph_refine.evaluators import contains_all

    model = recording.recorded_model(record_mode, temperature=0.7, seed=3, max_tokens=120)
    judged: list[str] = []
    check = contains_all(["apple", "banana", "cherry", "mango", "kiwi"])

    def evaluate(response: str, state: Any) -> Evaluation:
        judged.append(response)
        return check.evaluate(response, state)

    result = refine(
        model,
        EDIT_TASK,  # the check also wants mango and kiwi: its feedback names them
        evaluate,
        edits=True,
        strategy="chain",
        max_iterations=3,
        patience=None,
        target_score=1.0,
    )
    replies = recording.reply_texts(vcr)
    prompts = [recording.last_user_message(b) for b in recording.sent_bodies(vcr)]
    assert len(replies) == len(result.attempts) >= 2
    assert all(EDIT_INSTRUCTIONS in p for p in prompts[1:])  # every refinement asked
    pairs = zip(result.attempts[:-1], result.attempts[1:], replies[1:], strict=True)
    for parent, attempt, reply in pairs:
        blocks = parse_blocks(reply)
        evaluation = attempt.evaluation
        assert evaluation is not None
        if not blocks:
            assert attempt.edits is None and attempt.response == reply.strip()
            continue
        applied = apply_blocks(parent.response, blocks)
        if applied.text is None:
            assert attempt.edits == 0 and attempt.response == parent.response
            assert (evaluation.verdict, evaluation.score) == ("FAIL", 0.0)
            assert evaluation.details["evaluator"] == "edits"
        else:
            assert attempt.edits == len(blocks) and attempt.response == applied.text
    # The evaluator saw every attempt but those whose edits failed.
    failed = [a for a in result.attempts if a.edits == 0]
    assert len(judged) == len(result.attempts) - len(failed)


def test_hooks_make_the_recorded_request_stable_and_secret_free() -> None:
    request = Request(
        "POST",
        "http://127.0.0.1:45123/v1/chat/completions?x=1",
        b'{"b": 1, "a": 2}',
        {
            "Authorization": "Bearer sk-secret",
            "api-key": "k",
            "Cookie": "c=1",
            "Content-Type": "application/json",
            "User-Agent": "OpenAI/Python",
        },
    )
    cleaned = recording.before_record_request(request)
    assert cleaned.uri == "http://127.0.0.1:8088/v1/chat/completions?x=1"
    assert dict(cleaned.headers) == {"Content-Type": "application/json"}
    response = {"status": {"code": 200}, "headers": {"Set-Cookie": ["s"], "Content-Type": ["j"]}}
    assert recording.before_record_response(response)["headers"] == {"Content-Type": ["j"]}


def test_bodies_match_as_json() -> None:
    def request(body: bytes) -> Request:
        return Request("POST", "http://127.0.0.1:8088/v1/chat/completions", body, {})

    recording.json_body(request(b'{"a": 1, "b": [1, 2]}'), request(b'{"b": [1, 2],  "a": 1}'))
    with pytest.raises(AssertionError, match=r"request bodies differ"):
        recording.json_body(request(b'{"a": 1}'), request(b'{"a": 2}'))
    with pytest.raises(AssertionError):
        recording.json_body(request(b"not json"), request(b"not json!"))
    recording.json_body(request(b"not json"), request(b"not json"))


def test_replay_does_not_depend_on_the_recording_port() -> None:
    """A cassette replays for a client on any port; the body still has to match."""
    cassette = (
        recording.CASSETTES
        / "test_recorded"
        / ("test_the_judge_no_longer_copies_a_score_from_the_template.yaml")
    )
    vcr = vcrpy.VCR(**recording.vcr_config())
    recording.configure(vcr)
    from examples._common import openai_model

    model = openai_model(
        base_url="http://127.0.0.1:1/v1",  # nothing listens there
        model=recording.LOCAL_MODEL,
        api_key="another-key",
        temperature=0.0,
        max_tokens=120,
    )
    with vcr.use_cassette(str(cassette), record_mode="none") as played:
        result = refine(fixed([OFF_TOPIC]), TASK, llm_judge(model), max_iterations=1)
    assert played.all_played
    assert result.stop_reason == "passed"


SECRET = re.compile(
    r"sk-[A-Za-z0-9_-]{8,}|Bearer\s+\S+|^\s*(authorization|api-key|x-api-key|cookie|set-cookie):",
    re.I | re.M,
)


def test_cassettes_hold_no_secrets_and_only_the_stable_url() -> None:
    files = sorted(recording.CASSETTES.rglob("*.yaml"))
    assert len(files) >= 13
    for path in files:
        text = path.read_text()
        assert not SECRET.search(text), f"{path.name} holds a credential-like string"
        uris = re.findall(r"^\s*uri: (\S+)", text, flags=re.M)
        assert uris, f"{path.name} records no request"
        assert all(u.startswith(recording.STABLE_BASE_URL + "/") for u in uris), path.name
