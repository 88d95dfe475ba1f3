"""`llm_judge`: a chat model rates the response, sandboxed in `<response_to_rate>` tags.

The judge asks for a structured reply (feedback, verdict, score) using the model's
native structured output, and falls back to reading JSON (or "Score: 8/10" style lines)
from the reply text when the model has none or its output does not fit the schema. Small
local models are sloppy: they answer `"score": 13` under a 0-1 schema or
`"verdict": "pass"`, so the reading is lenient where that is safe and strict where it is
not: a reply with conflicting verdicts or scores (for instance one that quotes a fake
verdict from the response) is unparsable, and an unparsable reply is retried once and
then leaves the response unjudged (`Unjudged`), never counted as a pass or a fail. A
reply whose verdict contradicts its own score is asked once more too, and loses its
verdict if it still contradicts.

Budget checks are not made here: the loop meters every model call through LangChain's
callbacks, so a refused call raises `BudgetStop`, which passes through untouched. Each
judge call runs as one `model_invocation`, so it counts even when the model's structured
output bypasses the callbacks (a provider SDK wrapped by hand).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, Field, ValidationError

from langgraph_refine._calls._budget import model_invocation
from langgraph_refine._calls._clients import held
from langgraph_refine._calls._models import message_text, resolve_chat_model
from langgraph_refine._calls._retry import is_context_length_error
from langgraph_refine._decisions._prompts import (
    JUDGE_CONTRADICTION_NOTE,
    JUDGE_INSTRUCTIONS,
    JUDGE_SYSTEM,
    JUDGE_UNREADABLE_NOTE,
)
from langgraph_refine._errors import Unjudged
from langgraph_refine._fences import json_objects
from langgraph_refine._internal import unstreamed
from langgraph_refine._state import Evaluation, Verdict
from langgraph_refine._typed import pretty_json, structured_parts
from langgraph_refine.evaluators._base import BaseEvaluator, request_criteria
from langgraph_refine.evaluators._tags import sandbox, strip_tags

DEFAULT_MAX_EVAL_CHARS = 32_768
_MAX_FEEDBACK = 4000
_DERIVED_SCORES: dict[Verdict, float] = {"PASS": 1.0, "NEEDS_IMPROVEMENT": 0.5, "FAIL": 0.0}

_VERDICT_WORDS: dict[str, Verdict] = {
    **dict.fromkeys(["PASS", "PASSED", "PASSES", "PASSING", "ACCEPT", "ACCEPTED"], "PASS"),
    **dict.fromkeys(
        [
            "NEEDS_IMPROVEMENT",
            "NEEDS_IMPROVEMENTS",
            "NEED_IMPROVEMENT",
            "NEEDS_IMPROVING",
            "IMPROVEMENT_NEEDED",
            "NEEDS_WORK",
            "NEEDS_REVISION",
            "REVISE",
            "PARTIAL",
        ],
        "NEEDS_IMPROVEMENT",
    ),
    **dict.fromkeys(["FAIL", "FAILED", "FAILS", "FAILING", "REJECT", "REJECTED"], "FAIL"),
}
_SCORE_KEYS = ("score", "rating", "grade", "points")
_VERDICT_KEYS = ("verdict", "decision", "judgement", "judgment", "result")
_FEEDBACK_KEYS = (
    "feedback",
    "suggestions",
    "critique",
    "reason",
    "reasoning",
    "rationale",
    "explanation",
    "comments",
    "comment",
)
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_FRACTION = re.compile(rf"^\s*({_NUMBER})\s*(?:/|out\s+of)\s*({_NUMBER})\s*$", re.IGNORECASE)
_PERCENT = re.compile(rf"^\s*({_NUMBER})\s*%\s*$")
_PLAIN = re.compile(rf"^\s*({_NUMBER})\s*$")
# Labelled lines ("Verdict: PASS", "**Score:** 8/10") count only when the value stands
# alone on its line: a judge that echoes the instructions ("verdict: PASS if it fully
# meets the task") must not be read as passing.
_LINE_START = r"^[ \t>*#_-]*"
_LINE_END = r"[ \t]*[*_\"'`.!]*[ \t]*$"
_VERDICT_ALTERNATIVES = "|".join(
    word.replace("_", r"[ _-]?") for word in sorted(_VERDICT_WORDS, key=len, reverse=True)
)
_LINE_VERDICT = re.compile(
    rf"{_LINE_START}(?:verdict|decision)[*_]*\s*[:=][ \t*_\"'`]*"
    rf"({_VERDICT_ALTERNATIVES}){_LINE_END}",
    re.IGNORECASE | re.MULTILINE,
)
_LINE_SCORE = re.compile(
    rf"{_LINE_START}(?:score|rating|grade)[*_]*\s*[:=][ \t*_\"'`]*"
    rf"({_NUMBER}(?:\s*(?:/|out\s+of)\s*{_NUMBER}|\s*%)?){_LINE_END}",
    re.IGNORECASE | re.MULTILINE,
)
_LINE_FEEDBACK = re.compile(
    rf"{_LINE_START}(?:feedback|reason|reasoning)[*_]*\s*[:=]\s*(.+)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)
# Errors a provider raises for a reply it could not turn into the structured output (the
# OpenAI SDK raises these when the reply hit the token limit or a content filter). They are
# the judge's output problem, handled like an unparsable reply; matched by name so that
# the provider's package stays optional.
_UNREADABLE_REPLY_ERRORS = frozenset({"LengthFinishReasonError", "ContentFilterFinishReasonError"})

# A PASS scored below this, or a FAIL scored above it, contradicts itself.
_CONTRADICTION_MIDPOINT = 0.5
# The first call, and one more for an unreadable or self-contradicting reply.
_MAX_JUDGE_CALLS = 2
# A reply that is nothing but a score: "7", "0.85.", "**8.5/10**", "85 %".
_BARE_SCORE = re.compile(
    rf"^[\s*_`\"']*({_NUMBER}(?:\s*(?:/|out\s+of)\s*{_NUMBER}|\s*%)?)[\s*_`\"'.]*$",
    re.IGNORECASE,
)


def unreadable_reply(exc: Exception, who: str) -> str | None:
    """Why `exc` says a model's reply was unusable (asked again, then unjudged); else None.

    Args:
        exc: What the model call raised.
        who: The model's role, for the hint (`"judge"`, `"grader"`).
    """
    # The OpenAI SDK parses a structured reply itself and raises pydantic's error (or a
    # JSON decoding error) for one that does not fit, before LangChain can catch it.
    if isinstance(exc, OutputParserException | ValidationError | json.JSONDecodeError):
        return f"the reply did not fit the requested structure ({type(exc).__name__})"
    if {c.__name__ for c in type(exc).__mro__} & _UNREADABLE_REPLY_ERRORS:
        return (
            f"the reply was cut off or filtered by the provider ({type(exc).__name__}); "
            f"if it hit the token limit, give the {who} model a higher max_tokens"
        )
    return None


class JudgeReply(BaseModel):
    """The structured reply asked of the judge model.

    Feedback comes first so that a model writing the fields in order reasons before it
    commits to a verdict and a score.

    Example:
        >>> JudgeReply(feedback="Add a date.", verdict="NEEDS_IMPROVEMENT", score=0.6).score
        0.6
    """

    feedback: str = Field(description="concrete changes that would improve the response")
    verdict: Literal["PASS", "NEEDS_IMPROVEMENT", "FAIL"] = Field(
        description="PASS, NEEDS_IMPROVEMENT or FAIL"
    )
    score: float = Field(description="quality from 0.0 to 1.0")


@dataclass(frozen=True)
class _Reading:
    """What was read from one reply, before normalisation."""

    verdict: Verdict | None
    raw_score: float | None
    fraction: float | None  # set when the reply gave its own scale ("8/10", "80%")
    feedback: str
    notes: tuple[str, ...] = ()

    def key(self) -> tuple[Any, ...]:
        """What must agree between several readings of one reply."""
        return (self.verdict, self.raw_score, self.fraction)

    def full_key(self) -> tuple[Any, ...]:
        """What identifies a reply copied from elsewhere (e.g. from the response)."""
        return (*self.key(), " ".join(self.feedback.split()))


def normalise_score(raw: float) -> tuple[float, str, str | None]:
    """Map a judge's score onto [0, 1].

    Scores in [0, 1] are kept; (1, 10] are read as a 0-10 scale and (10, 100] as 0-100.
    Anything else (negative or above 100) is clamped into [0, 1], with a note.

    Returns:
        The normalised score, the scale it was read on, and a note (None unless clamped).

    Example:
        >>> normalise_score(7)
        (0.7, '0-10', None)
        >>> normalise_score(250)[0], normalise_score(250)[2]
        (1.0, 'judge score 250 is outside every known scale (0-1, 0-10, 0-100); clamped to 1.0')
    """
    if math.isnan(raw):
        return 0.0, "clamped", "judge score NaN counted as 0.0"
    if 0.0 <= raw <= 1.0:
        return float(raw), "0-1", None
    if 1.0 < raw <= 10.0:
        return raw / 10.0, "0-10", None
    if 10.0 < raw <= 100.0:
        return raw / 100.0, "0-100", None
    clamped = 0.0 if raw < 0 else 1.0
    return (
        clamped,
        "clamped",
        f"judge score {raw:g} is outside every known scale (0-1, 0-10, 0-100); "
        f"clamped to {clamped}",
    )


def _parse_score(value: Any) -> tuple[float | None, float | None]:
    """`(raw, fraction)` from a score value; fraction is set for "8/10" or "80%"."""
    if isinstance(value, bool):
        return None, None
    if isinstance(value, int | float):
        number = float(value)
        return (number, None) if math.isfinite(number) else (None, None)
    if not isinstance(value, str):
        return None, None
    text = value.strip()
    if match := _FRACTION.match(text):
        numerator, denominator = float(match.group(1)), float(match.group(2))
        if denominator > 0:
            return numerator, numerator / denominator
        return None, None
    if match := _PERCENT.match(text):
        return float(match.group(1)), float(match.group(1)) / 100.0
    if match := _PLAIN.match(text):
        return float(match.group(1)), None
    return None, None


def _parse_verdict(value: Any) -> tuple[Verdict | None, str | None]:
    """The verdict a value names, and a note if it named none we know.

    The longest known verdict at the start counts ("PASS - well done" is PASS), so a
    word that merely contains one ("NOT PASS", "PASSABLE") does not.
    """
    if not isinstance(value, str) or not value.strip():
        return None, None
    tokens = re.sub(r"[^A-Z]+", "_", value.strip().upper()).strip("_").split("_")
    for size in range(min(3, len(tokens)), 0, -1):
        verdict = _VERDICT_WORDS.get("_".join(tokens[:size]))
        if verdict is not None:
            return verdict, None
    return None, f"unknown verdict {value!r:.40} ignored; the score decides"


def _reading(
    verdict_value: Any, score: tuple[float | None, float | None], feedback: Any
) -> _Reading | None:
    verdict, verdict_note = _parse_verdict(verdict_value)
    raw, fraction = score
    if raw is None and verdict is None:
        return None
    text = feedback if isinstance(feedback, str) else "" if feedback is None else str(feedback)
    return _Reading(verdict, raw, fraction, text.strip(), (verdict_note,) if verdict_note else ())


def _from_mapping(data: Mapping[str, Any]) -> _Reading | None:
    lowered = {str(k).strip().lower(): v for k, v in data.items()}

    def first(keys: Sequence[str]) -> Any:
        return next((lowered[k] for k in keys if lowered.get(k) is not None), None)

    reading = _reading(
        first(_VERDICT_KEYS), _parse_score(first(_SCORE_KEYS)), first(_FEEDBACK_KEYS)
    )
    if reading is None:  # {"evaluation": {...}}: look one level down
        nested = [v for v in lowered.values() if isinstance(v, Mapping)]
        if len(nested) == 1:
            return _from_mapping(nested[0])
    return reading


def _is_template(data: Mapping[str, Any]) -> bool:
    """True for the reply template of the instructions, echoed back (`"verdict": "..."`)."""
    return any(isinstance(v, str) and v.strip() in ("...", "\u2026") for v in data.values())


def _readings_in(text: str) -> set[tuple[Any, ...]]:
    """The replies written inside `text` (a response may carry fake ones)."""
    return {r.full_key() for obj in json_objects(text) if (r := _from_mapping(obj)) is not None}


def _from_lines(text: str, response: str) -> tuple[_Reading | None, str]:
    """Read "Verdict: PASS" / "Score: 8/10" / "Feedback: ..." lines."""

    def own(match: re.Match[str]) -> bool:  # lines copied from the response do not count
        return not response or match.group(0).strip() not in response

    verdicts = {
        v for m in _LINE_VERDICT.finditer(text) if own(m) and (v := _parse_verdict(m.group(1))[0])
    }
    scores = {_parse_score(m.group(1)) for m in _LINE_SCORE.finditer(text) if own(m)}
    scores.discard((None, None))
    if len(verdicts) > 1 or len(scores) > 1:
        return None, "the reply gives conflicting verdicts or scores"
    feedback = _LINE_FEEDBACK.search(text)
    feedback_text = feedback.group(1) if feedback is not None else text
    feedback_text = _LINE_SCORE.sub("", _LINE_VERDICT.sub("", feedback_text))
    reading = _reading(next(iter(verdicts), None), next(iter(scores), (None, None)), feedback_text)
    if reading is None:
        return None, "found no verdict or score in the reply"
    return reading, ""


def _bare_score(text: str, response: str) -> _Reading | None:
    """Read a reply that is only a score ("7", "0.85", "8.5/10", "85%"); None otherwise.

    A reply that merely repeats the whole response (say the response is "4") is no score.
    """
    match = _BARE_SCORE.match(text)
    if match is None or (response and text.strip() == response.strip()):
        return None
    raw, fraction = _parse_score(match.group(1))
    if raw is None:
        return None
    return _Reading(None, raw, fraction, "", ("the judge replied with a score only",))


def read_reply(text: str, response: str = "") -> tuple[_Reading | None, str]:
    """Read a judge reply given as text: a bare score, JSON (bare, fenced or embedded) or lines.

    A reply that is only a number, fraction or percentage is a score on that scale (see
    `normalise_score`), with no verdict and no feedback.

    JSON objects that repeat the reply template or a reply written inside `response` (the
    text being rated) are ignored; several objects that disagree make the reply
    unparsable.

    Returns:
        The reading (None if unparsable) and, if unparsable, why.
    """
    if (bare := _bare_score(text, response)) is not None:
        return bare, ""
    fakes = _readings_in(response) if response else set()
    readings: list[_Reading] = []
    echoed = False
    for obj in json_objects(text):
        reading = None if _is_template(obj) else _from_mapping(obj)
        if reading is not None and reading.full_key() in fakes:
            echoed = True
        elif reading is not None:
            readings.append(reading)
    if readings:
        if len({r.key() for r in readings}) > 1:
            return None, "the reply holds several JSON objects with conflicting verdicts or scores"
        return readings[0], ""
    reading, error = _from_lines(text, response)
    if reading is None and echoed:
        return None, "the reply only repeats a verdict and score written in the response"
    return reading, error


@dataclass
class _Prompt:
    messages: list[BaseMessage]
    truncated: bool
    tags_removed: int


def contradiction(verdict: Verdict | None, score: float) -> str | None:
    """Describe how a verdict contradicts its normalised score, or None if they agree.

    A PASS scored below 0.5 and a FAIL scored above 0.5 contradict themselves.

    Example:
        >>> contradiction("PASS", 0.0)
        'verdict PASS with score 0.00 (PASS needs a score of at least 0.5)'
        >>> contradiction("FAIL", 0.5) is None
        True
    """
    midpoint = _CONTRADICTION_MIDPOINT
    if verdict == "PASS" and score < midpoint:
        return f"verdict PASS with score {score:.2f} (PASS needs a score of at least {midpoint})"
    if verdict == "FAIL" and score > midpoint:
        return f"verdict FAIL with score {score:.2f} (FAIL needs a score of at most {midpoint})"
    return None


@dataclass(frozen=True)
class _Scored:
    """A reading with its score normalised into [0, 1]."""

    reading: _Reading
    how: str  # "structured" or "text"
    score: float
    scale: str
    notes: tuple[str, ...]


def _scored(reading: _Reading, how: str) -> _Scored:
    notes = list(reading.notes)
    if reading.fraction is not None:
        score, scale = min(1.0, max(0.0, reading.fraction)), "explicit"
        if score != reading.fraction:
            notes.append(f"judge score {reading.fraction:g} (as a fraction) clamped to {score}")
    elif reading.raw_score is not None:
        score, scale, note = normalise_score(reading.raw_score)
        if note:
            notes.append(note)
    else:  # only a verdict was given (a reading always has one or the other)
        given: Verdict = reading.verdict or "FAIL"
        score, scale = _DERIVED_SCORES[given], "from verdict"
        notes.append(f"the judge gave no score; {score} derived from {given}")
    return _Scored(reading, how, score, scale, tuple(notes))


class ReplyReader(Protocol):
    """A judging run that reads each model call's reply (`_JudgeRun`, the checklist's)."""

    def next_messages(self) -> list[BaseMessage] | None: ...

    def read(self, output: Any) -> Evaluation | None: ...

    def too_long(self, exc: Exception) -> Evaluation: ...

    def unreadable(self, exc: Exception) -> bool: ...


def reply_outcome(run: ReplyReader, output: Any) -> Evaluation | None:
    """What one judge call gave (its output, or the error it raised); None to ask again.

    Raises:
        Exception: The call's error, when it is not about the reply (a provider or budget
            error, a bug): no re-ask mends it.
    """
    if not isinstance(output, Exception):
        return run.read(output)
    if is_context_length_error(output):
        return run.too_long(output)
    if run.unreadable(output):
        return None
    raise output


def ask(run: ReplyReader, model: Runnable[Any, Any]) -> Evaluation | None:
    """Ask `model` until `run` has an outcome; None when its calls are spent unread.

    The judge's and the checklist's one flow (`aask` drives it on the async path): each
    call is one `model_invocation`, counted against the budget.

    Raises:
        Exception: A call's error that is not about the reply (see `reply_outcome`).
    """
    while (messages := run.next_messages()) is not None:
        if (evaluation := reply_outcome(run, _called(model.invoke, messages))) is not None:
            return evaluation
    return None


async def aask(run: ReplyReader, model: Runnable[Any, Any]) -> Evaluation | None:
    """`ask` on the async path (`model.ainvoke`)."""
    while (messages := run.next_messages()) is not None:
        try:
            with model_invocation() as done:
                output = done(await model.ainvoke(messages))
        except Exception as exc:  # `reply_outcome` says whether it is about the reply
            output = exc
        if (evaluation := reply_outcome(run, output)) is not None:
            return evaluation
    return None


def _called(invoke: Callable[[Any], Any], messages: list[BaseMessage]) -> Any:
    """What one call gave: its reply, or the error it raised (`reply_outcome` reads both)."""
    try:
        with model_invocation() as done:
            return done(invoke(messages))
    except Exception as exc:
        return exc


@dataclass
class _JudgeRun:
    """One evaluation: the prompt, up to two judge calls, and what came of them.

    Holds the logic shared by the sync and async paths, which differ only in how they
    call the model. A reply that cannot be read, or whose verdict contradicts its score,
    is asked once more with a note saying why.
    """

    prompt: _Prompt
    response: str  # the part of the response the judge was shown
    calls: int = 0
    failures: list[str] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)
    kept: _Scored | None = None  # the latest self-contradicting reply
    retry_note: str = ""

    def next_messages(self) -> list[BaseMessage] | None:
        """The messages of the next judge call, or None when no call is left."""
        if self.calls >= _MAX_JUDGE_CALLS:
            return None
        self.calls += 1
        if self.calls == 1:
            return self.prompt.messages
        system, human = self.prompt.messages
        # The retry note goes after the instructions; it quotes nothing from the reply,
        # which could carry text copied from the response.
        return [system, HumanMessage(str(human.content) + self.retry_note)]

    def unreadable(self, exc: Exception) -> bool:
        """Record a call that failed because its reply was unusable; False for other errors."""
        reason = unreadable_reply(exc, "judge")
        if reason is None:
            return False
        self._unparsable(reason)
        return True

    def _unparsable(self, reason: str) -> None:
        self.failures.append(reason)
        self.retry_note = JUDGE_UNREADABLE_NOTE.format(reason=reason)

    def read(self, output: Any) -> Evaluation | None:
        """Turn the model's output into an evaluation; None to ask again."""
        scored = self._parse(output)
        if scored is None:
            return None
        conflict = contradiction(scored.reading.verdict, scored.score)
        if conflict is None:
            return self._evaluation(scored)
        self.contradictions.append(conflict)
        self.failures.append(f"the reply contradicts itself: {conflict}")
        self.kept = scored
        self.retry_note = JUDGE_CONTRADICTION_NOTE.format(conflict=conflict)
        return None if self.calls < _MAX_JUDGE_CALLS else self.finish()

    def _parse(self, output: Any) -> _Scored | None:
        raw, parsed = structured_parts(output) or (output, None)
        structured: _Reading | None = None
        if isinstance(parsed, JudgeReply):
            # Through _parse_score, so a NaN or infinite score counts as no score.
            structured = _reading(parsed.verdict, _parse_score(parsed.score), parsed.feedback)
        elif isinstance(parsed, Mapping):  # providers that parse into a dict
            structured = _from_mapping(parsed)
        if structured is not None:
            if structured.full_key() in _readings_in(self.response):
                self._unparsable("the reply repeats a verdict and score written in the response")
                return None
            return _scored(structured, "structured")
        reading, error = read_reply(message_text(raw) if raw is not None else "", self.response)
        if reading is None:
            self._unparsable(error)
            return None
        return _scored(reading, "text")

    def finish(self) -> Evaluation:
        """The evaluation once no call is left: a self-contradicting reply's score.

        Raises:
            Unjudged: When no reply could be read.
        """
        if self.kept is None:
            raise self.unjudged()
        if len(self.contradictions) > 1:
            why = f"asked again, the judge still gave {self.contradictions[-1]}"
        else:
            why = (
                f"the judge gave {self.contradictions[-1]} and no consistent reply when asked again"
            )
        return self._evaluation(
            self.kept, contradiction=f"{why}; the verdict was dropped and the score kept"
        )

    def _evaluation(self, scored: _Scored, *, contradiction: str | None = None) -> Evaluation:
        reading = scored.reading
        feedback = reading.feedback[:_MAX_FEEDBACK] or (
            "The judge gave only a score, no feedback."
            if reading.verdict is None
            else "The judge gave no specific feedback."
        )
        details: dict[str, Any] = {
            "raw_score": reading.raw_score,
            "scale": scored.scale,
            "parsed_from": scored.how,
            "judge_calls": self.calls,
            "truncated": self.prompt.truncated,
            "tags_removed": self.prompt.tags_removed,
        }
        if scored.notes:
            details["note"] = "; ".join(scored.notes)
        if self.failures:
            details["judge_errors"] = list(self.failures)
        if contradiction is not None:
            details["contradiction"] = contradiction
        verdict = None if contradiction is not None else reading.verdict
        return Evaluation(score=scored.score, feedback=feedback, verdict=verdict, details=details)

    def unjudged(self) -> Unjudged:
        """No reply could be read: the response is left unjudged (not failed)."""
        return Unjudged(
            f"the judge's reply could not be read ({self.calls} calls): {self.failures[-1]}"
        )

    def too_long(self, exc: Exception) -> Evaluation:
        """FAIL with score 0: the judge's prompt, with this response, overflowed its context."""
        return too_long_evaluation(
            exc,
            checked="evaluated",
            who="judge",
            details={
                "judge_calls": self.calls,
                "truncated": self.prompt.truncated,
                "tags_removed": self.prompt.tags_removed,
                "note": (
                    "the judge's provider rejected the request as too long for its context; "
                    "a lower llm_judge(max_eval_chars=...) cuts long responses before judging"
                ),
            },
        )


class LLMJudge(BaseEvaluator):
    """An evaluator that asks a chat model for feedback, a verdict and a score. See `llm_judge`.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> judge = LLMJudge(GenericFakeChatModel(messages=iter([])), max_eval_chars=5)
        >>> print(judge.messages("abcdefgh", {"task": "t"})[1].content.split("# Instructions")[0])
        # Task
        t
        <BLANKLINE>
        # Response to rate
        (The response was cut to its first 5 characters; rate what is shown.)
        <response_to_rate>
        abcde
        </response_to_rate>
        <BLANKLINE>
        <BLANKLINE>
    """

    name = "llm_judge"
    calls_model = True
    prompt_text = f"{JUDGE_SYSTEM}\n{JUDGE_INSTRUCTIONS}"

    def __init__(
        self,
        model: BaseChatModel,
        *,
        criteria: str | None = None,
        max_eval_chars: int = DEFAULT_MAX_EVAL_CHARS,
        structured_output: bool = True,
    ) -> None:
        # Called through a copy the loop holds, its client's own retries off (`held`).
        self.model = model = held(model)
        self.criteria = criteria
        self.max_eval_chars = max_eval_chars
        self._structured: Any = None
        if structured_output:
            try:
                self._structured = unstreamed(model).with_structured_output(
                    JudgeReply, method="json_schema", include_raw=True
                )
            except (NotImplementedError, ValueError, TypeError):
                # No native structured output: the prompt asks for JSON and we parse it.
                self._structured = None

    def _prompt(self, response: str, state: Mapping[str, Any]) -> _Prompt:
        # A JSON object (a typed loop's response) is easier to rate laid out.
        wrapped, truncated, removed = sandbox(pretty_json(response), self.max_eval_chars)
        # The task and criteria can come from end users too (e.g. a chat message), so
        # they may not contain the sandbox's tags either.
        task, _ = strip_tags(str((state or {}).get("task", "")))
        sections = [f"# Task\n{task.strip()}"]
        criteria = self.criteria_for(state)
        if criteria:
            sections.append(f"# Criteria\n{strip_tags(criteria)[0].strip()}")
        header = "# Response to rate"
        if truncated:
            header += (
                f"\n(The response was cut to its first {self.max_eval_chars} characters; "
                "rate what is shown.)"
            )
        sections.append(f"{header}\n{wrapped}")
        sections.append(f"# Instructions\n{JUDGE_INSTRUCTIONS}")
        messages: list[BaseMessage] = [
            SystemMessage(JUDGE_SYSTEM),
            HumanMessage("\n\n".join(sections)),
        ]
        return _Prompt(messages, truncated, removed)

    def criteria_for(self, state: Mapping[str, Any] | None) -> str | None:
        """The judge's criteria for one request: its own, then the request's (`criteria`)."""
        added = "\n".join(f"- {c}" for c in request_criteria(state))
        return "\n".join(part for part in (self.criteria, added) if part) or None

    def _shown(self, response: str) -> str:
        # Fake replies the judge could copy can only come from what it was shown.
        return pretty_json(response)[: self.max_eval_chars + 1024]

    def messages(self, response: str, state: Mapping[str, Any]) -> list[BaseMessage]:
        """The messages the judge is sent first for `response` (a system and a user message)."""
        return self._prompt(response, state).messages

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        run = _JudgeRun(self._prompt(response, state), self._shown(response))
        evaluation = ask(run, self._structured or self.model)
        return run.finish() if evaluation is None else evaluation

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        run = _JudgeRun(self._prompt(response, state), self._shown(response))
        evaluation = await aask(run, self._structured or self.model)
        return run.finish() if evaluation is None else evaluation


def criteria_items(who: str, criteria: object, max_eval_chars: object) -> list[str]:
    """Check a judging factory's `criteria` and `max_eval_chars`; the criteria as a list.

    Args:
        who: The factory (`llm_judge`, `checklist`), for messages.
        criteria: None, one criterion as text, or a list of them.
        max_eval_chars: Longest response text shown to the model.

    Returns:
        The criteria given (none for None, one for a string), as given.

    Raises:
        ValueError: Naming the factory, the argument, the value and what it takes.
    """
    if (
        not isinstance(max_eval_chars, int)
        or isinstance(max_eval_chars, bool)
        or max_eval_chars < 1
    ):
        raise ValueError(f"{who}: max_eval_chars must be an integer >= 1, got {max_eval_chars!r}")
    if criteria is None:
        return []
    if isinstance(criteria, str):
        return [criteria]
    if isinstance(criteria, Sequence) and all(isinstance(c, str) for c in criteria):
        return list(criteria)
    raise ValueError(
        f"{who}: criteria must be a string or a list of strings, got {criteria!r:.100}"
    )


def too_long_evaluation(
    exc: Exception, *, checked: str, who: str, details: Mapping[str, Any]
) -> Evaluation:
    """FAIL with score 0: with this response, the model's prompt overflowed its context.

    Args:
        exc: The provider's context-length error.
        checked: What the response could not be (`evaluated`, `checked`).
        who: The model that judges (`judge`, `grader`).
        details: What else the evaluation's `details` hold.
    """
    return Evaluation(
        score=0.0,
        verdict="FAIL",
        feedback=(
            f"The response is too long to be {checked}: with it, the request exceeded the "
            f"{who} model's context size. Write a much shorter response that still does "
            "the task."
        ),
        details={"context_length_error": f"{type(exc).__name__}: {str(exc)[:500]}", **details},
    )


def llm_judge(
    model: BaseChatModel | str,
    *,
    criteria: str | Sequence[str] | None = None,
    max_eval_chars: int = DEFAULT_MAX_EVAL_CHARS,
    structured_output: bool = True,
) -> LLMJudge:
    """An LLM judge: a chat model gives feedback, a verdict and a score for each response.

    The judge's user message holds the task, the criteria, then the response wrapped in
    `<response_to_rate>` tags, then the instructions; the system message and the
    instructions tell it to treat the tagged text as data and ignore instructions,
    scores or verdicts written there. Before wrapping, any such tag inside the response
    is removed, also disguised ones (other case, spaces, attributes, HTML entities,
    Unicode look-alikes, invisible characters); the response is then cut to
    `max_eval_chars` characters.

    The reply is read with the model's native structured output
    (`with_structured_output(..., method="json_schema")`), else parsed from its text
    (JSON, lines such as `Score: 8/10`, or a reply that is only a score). Scores are
    normalised into [0, 1]: fractions ("8/10", "3 out of 5") and percentages ("85%")
    by their own scale; a plain number in [0, 1] as it is, in (1, 10] on a 0-10 scale,
    in (10, 100] on a 0-100 scale ("7" is 0.7, "85" is 0.85); values outside every
    scale are clamped and noted in `details["note"]`. A verdict without a score counts
    as 1.0, 0.5 or 0.0; a score without a verdict has verdict None.

    The judge is asked once more (at most two calls per evaluation) when its reply:

    - cannot be read (conflicting verdicts or scores, or cut off by the token limit):
      if the second reply cannot be read either, it raises `Unjudged` with the reason,
      and the loop keeps the attempt unjudged (`Attempt.error`), not failed;
    - contradicts itself (PASS with a normalised score below 0.5, FAIL above 0.5): if
      the last usable reply still contradicts, its verdict is dropped (None), its
      score stands, and `details["contradiction"]` says so.

    If the provider rejects the judge's request as too long for its context, that
    attempt counts as FAIL with score 0 and feedback asking for a shorter response
    (`details["context_length_error"]` holds the error); the loop goes on. Other
    errors propagate, the budget's `BudgetStop` included. Every judge call, a retry
    included, is a model call of the loop, counted against its budget.

    Args:
        model: A chat model or a `"provider:model"` string.
        criteria: What a good response must do, as text or a list of points.
        max_eval_chars: Longest response text shown to the judge (>= 1).
        structured_output: Use the model's native structured output; set False for
            OpenAI-compatible servers that reject `response_format`.

    Returns:
        The judge evaluator. `details` holds `raw_score`, `scale`, `judge_calls`,
        `truncated`, `tags_removed` and, when something was adjusted, `note`,
        `judge_errors` (why a reply was asked again) and `contradiction`.

    Raises:
        ValueError: If `max_eval_chars` is not a positive integer or `criteria` is not
            text or a list of text.
        ModelStringError: A `ValueError`: `model` is a string that names no usable chat
            model (see `resolve_chat_model`, the one resolver of every surface).

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage
        >>> fake = GenericFakeChatModel(messages=iter([AIMessage(
        ...     '{"feedback": "Name a source.", "verdict": "pass", "score": 8}')]))
        >>> result = llm_judge(fake, structured_output=False).evaluate("Paris.", {"task": "?"})
        >>> result.verdict, result.score, result.feedback
        ('PASS', 0.8, 'Name a source.')
    """
    items = criteria_items("llm_judge", criteria, max_eval_chars)
    text_criteria: str | None
    if criteria is None or isinstance(criteria, str):
        text_criteria = criteria.strip() if criteria else None
    else:
        text_criteria = "\n".join(f"- {c.strip()}" for c in items if c.strip()) or None
    return LLMJudge(
        resolve_chat_model(model, option="llm_judge model"),
        criteria=text_criteria,
        max_eval_chars=max_eval_chars,
        structured_output=structured_output,
    )
