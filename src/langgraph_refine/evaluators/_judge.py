"""`llm_judge`: a chat model rates the response, sandboxed in `<response_to_rate>` tags."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from langgraph_refine._budget import current_meter
from langgraph_refine._evaluation import BaseEvaluator
from langgraph_refine._models import message_text
from langgraph_refine._prompts import JUDGE_INSTRUCTIONS, JUDGE_SYSTEM
from langgraph_refine._state import Evaluation, Verdict

DEFAULT_MAX_EVAL_CHARS = 32_768
TAG = "response_to_rate"
_TAG_PATTERN = re.compile(r"<\s*/?\s*response_to_rate\s*/?\s*>", re.IGNORECASE)
_VERDICTS: tuple[Verdict, ...] = ("PASS", "NEEDS_IMPROVEMENT", "FAIL")


class JudgeReply(BaseModel):
    """The structured reply asked of the judge model."""

    verdict: Literal["PASS", "NEEDS_IMPROVEMENT", "FAIL"] = Field(
        description="PASS, NEEDS_IMPROVEMENT or FAIL"
    )
    score: float = Field(description="quality from 0.0 to 1.0")
    feedback: str = Field(description="concrete changes that would improve the response")


def sandbox(response: str, max_chars: int) -> tuple[str, bool]:
    """Strip sandbox tags from `response`, cut it to `max_chars`, and wrap it in the tags.

    Returns:
        The wrapped text and whether it was truncated.
    """
    cleaned = _TAG_PATTERN.sub("", response)
    truncated = len(cleaned) > max_chars
    if truncated:
        cleaned = cleaned[:max_chars]
    return f"<{TAG}>\n{cleaned}\n</{TAG}>", truncated


def normalise_score(raw: float) -> tuple[float, str | None]:
    """Map a judge's score onto [0, 1].

    Scores in [0, 1] are kept; (1, 10] are read as a 0-10 scale and (10, 100] as 0-100.
    Anything else (negative, above 100, NaN) is clamped, and a note says so.

    Returns:
        The normalised score and a note (None when the score needed no clamping).
    """
    if math.isnan(raw):
        return 0.0, "judge gave NaN as score; counted as 0"
    if 0.0 <= raw <= 1.0:
        return raw, None
    if 1.0 < raw <= 10.0:
        return raw / 10.0, None
    if 10.0 < raw <= 100.0:
        return raw / 100.0, None
    clamped = 0.0 if raw < 0 else 1.0
    return clamped, f"judge score {raw!r} is outside every known scale; clamped to {clamped}"


def parse_reply(text: str) -> JudgeReply | None:
    """Parse a judge reply given as free text: a JSON object, possibly fenced or embedded."""
    for candidate in _json_candidates(text):
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            reply = _reply_from_dict(data)
            if reply is not None:
                return reply
    return None


def _json_candidates(text: str) -> list[str]:
    candidates = [text.strip()]
    candidates += re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    return candidates


def _reply_from_dict(data: dict[str, Any]) -> JudgeReply | None:
    lowered = {str(k).lower(): v for k, v in data.items()}
    verdict = str(lowered.get("verdict", "")).strip().upper().replace(" ", "_")
    try:
        score = float(lowered["score"])
    except (KeyError, TypeError, ValueError):
        return None
    if verdict not in _VERDICTS:
        return None
    return JudgeReply(verdict=verdict, score=score, feedback=str(lowered.get("feedback", "")))  # type: ignore[arg-type]


class LLMJudge(BaseEvaluator):
    """An evaluator that asks a chat model for a verdict, a score and feedback."""

    name = "llm_judge"
    calls_model = True

    def __init__(
        self,
        model: BaseChatModel,
        *,
        criteria: str | None = None,
        max_eval_chars: int = DEFAULT_MAX_EVAL_CHARS,
    ) -> None:
        self.model = model
        self.criteria = criteria
        self.max_eval_chars = max_eval_chars
        try:
            self._structured: Any = model.with_structured_output(
                JudgeReply, method="json_schema", include_raw=True
            )
        except (NotImplementedError, ValueError, TypeError):
            # No native structured output: ask for JSON in the prompt and parse it.
            self._structured = None

    def messages(self, response: str, state: Mapping[str, Any]) -> tuple[list[BaseMessage], bool]:
        """The messages sent to the judge, and whether the response was truncated."""
        wrapped, truncated = sandbox(response, self.max_eval_chars)
        parts = [f"# Task\n{state.get('task', '')}"]
        if self.criteria:
            parts.append(f"# Criteria\n{self.criteria}")
        parts.append(f"# Response\n{wrapped}")
        if truncated:
            parts.append(f"(The response was cut to its first {self.max_eval_chars} characters.)")
        parts.append(f"# Instructions\n{JUDGE_INSTRUCTIONS}")
        return [SystemMessage(JUDGE_SYSTEM), HumanMessage("\n\n".join(parts))], truncated

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        messages, truncated = self.messages(response, state)
        failures: list[str] = []
        for _ in range(2):  # an unparsable reply is retried once
            _check_budget()
            output = (self._structured or self.model).invoke(messages)
            reply, error = self._read(output)
            if reply is not None:
                return self._evaluation(reply, truncated)
            failures.append(error)
        return self._unparsable(failures)

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        messages, truncated = self.messages(response, state)
        failures: list[str] = []
        for _ in range(2):
            _check_budget()
            output = await (self._structured or self.model).ainvoke(messages)
            reply, error = self._read(output)
            if reply is not None:
                return self._evaluation(reply, truncated)
            failures.append(error)
        return self._unparsable(failures)

    def _read(self, output: Any) -> tuple[JudgeReply | None, str]:
        """Record usage and extract a reply from a structured or plain model output."""
        raw = output.get("raw") if isinstance(output, dict) else output
        meter = current_meter()
        if meter is not None:
            meter.record(raw)
        if isinstance(output, dict) and isinstance(output.get("parsed"), JudgeReply):
            return output["parsed"], ""
        text = message_text(raw) if raw is not None else ""
        reply = parse_reply(text)
        if reply is not None:
            return reply, ""
        return None, f"unparsable judge reply: {text[:200]!r}"

    def _evaluation(self, reply: JudgeReply, truncated: bool) -> Evaluation:
        score, note = normalise_score(reply.score)
        details: dict[str, Any] = {"raw_score": reply.score, "truncated": truncated}
        if note:
            details["note"] = note
        return Evaluation(score=score, feedback=reply.feedback, verdict=reply.verdict, details=details)

    def _unparsable(self, failures: list[str]) -> Evaluation:
        return Evaluation(
            score=0.0,
            verdict="FAIL",
            feedback="The judge's reply could not be parsed, so this attempt counts as failed: "
            + failures[-1],
            details={"judge_error": failures},
        )


def _check_budget() -> None:
    meter = current_meter()
    if meter is not None:
        meter.before_call()


def llm_judge(
    model: BaseChatModel | str,
    *,
    criteria: str | None = None,
    max_eval_chars: int = DEFAULT_MAX_EVAL_CHARS,
) -> LLMJudge:
    """An LLM judge: the model returns a verdict, a score and feedback for each response.

    The response is wrapped in `<response_to_rate>` tags (any such tag inside it removed
    first), cut to `max_eval_chars` characters, and the judge is told to treat it as data.
    Scores on 0-10 or 0-100 scales are normalised into [0, 1]. An unparsable reply is
    retried once, then counts as FAIL with score 0. Each judge call counts against the budget.

    Args:
        model: A chat model or a `"provider:model"` string.
        criteria: What a good response must do, in plain words.
        max_eval_chars: Longest response text shown to the judge (>= 1).

    Returns:
        The judge evaluator.

    Raises:
        ValueError: If `max_eval_chars` is not a positive integer.
    """
    from langgraph_refine._models import resolve_chat_model

    if not isinstance(max_eval_chars, int) or isinstance(max_eval_chars, bool) or max_eval_chars < 1:
        raise ValueError(f"max_eval_chars must be an integer >= 1, got {max_eval_chars!r}")
    return LLMJudge(
        resolve_chat_model(model, option="llm_judge model"),
        criteria=criteria,
        max_eval_chars=max_eval_chars,
    )
