"""Test doubles: a scripted chat model that records what it was sent.

For fast unit tests of the library's own logic only; real-model behaviour is covered
by the recorded (cassette) tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import tool
from pydantic import BaseModel, Field, PrivateAttr


class ScriptedChatModel(BaseChatModel):
    """Replies with scripted texts in order (the last one repeats) and records every prompt.

    `replies` items may be strings or callables `(messages) -> str`, or exceptions to raise.
    Each reply carries usage metadata of `input_tokens` / `output_tokens`.
    """

    replies: list[Any] = Field(default_factory=lambda: ["ok"])
    input_tokens: int = 10
    output_tokens: int = 5
    structured: bool = True
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Every prompt received, in order."""
        return self._calls

    @property
    def prompts(self) -> list[str]:
        """The text of the last message of every prompt received."""
        return [str(call[-1].content) for call in self._calls]

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self._calls.append(list(messages))
        reply = self.replies[min(len(self._calls) - 1, len(self.replies) - 1)]
        if isinstance(reply, BaseException):
            raise reply
        text = reply(messages) if callable(reply) else str(reply)
        return AIMessage(
            text,
            usage_metadata={
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
            },
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, method: str = "json_schema", **kwargs: Any
    ) -> Runnable[Any, Any]:
        if not self.structured:
            raise NotImplementedError("no structured output")

        def parse(messages: Any) -> Any:
            raw = self.invoke(messages)
            try:
                parsed: Any = schema.model_validate(json.loads(str(raw.content)))
                error = None
            except Exception as exc:  # mirrors LangChain's include_raw
                parsed, error = None, exc
            if include_raw:
                return {"raw": raw, "parsed": parsed, "parsing_error": error}
            if error is not None:
                raise error
            return parsed

        return RunnableLambda(parse)


def judge_reply(score: float, verdict: str = "NEEDS_IMPROVEMENT", feedback: str = "fix it") -> str:
    """A judge reply in the JSON shape the LLM judge asks for."""
    return json.dumps({"verdict": verdict, "score": score, "feedback": feedback})


def scores(*values: float) -> Callable[[str, Any], float]:
    """A callable evaluator returning the given scores in order (the last one repeats)."""
    seq: Sequence[float] = list(values)
    calls: list[str] = []

    def evaluate(response: str, state: Any) -> float:
        calls.append(response)
        return seq[min(len(calls) - 1, len(seq) - 1)]

    evaluate.calls = calls  # type: ignore[attr-defined]
    return evaluate


class Model(BaseModel):
    """A tiny schema for structured-output tests."""

    name: str


class AgentModel(ScriptedChatModel):
    """A scripted model `create_agent` can bind tools to; replies may carry tool calls."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> AgentModel:  # type: ignore[override]
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        reply = self.replies[min(len(self._calls), len(self.replies) - 1)]
        if not isinstance(reply, AIMessage):
            return super()._next(messages)
        self._calls.append(list(messages))
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        return reply.model_copy(update={"usage_metadata": usage})


def call_tool(topic: str, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": topic}, "id": call_id}])


LOOKUPS: list[str] = []


@tool
def lookup(topic: str) -> str:
    """Look up facts about a topic."""
    LOOKUPS.append(topic)
    return f"{topic}: built in 1889, in Paris"
