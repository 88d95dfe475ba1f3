"""A scripted chat model for keyword tasks that fixes what feedback names, with a set chance.

It stands for models stronger (or weaker) than the local one, so the strategy comparison
does not speak only for a 135M model. For the task "Write one sentence that uses all of
these words: a, b, c, d.":

- a fresh answer uses each word with probability `p_word`;
- a refinement starts from the refined attempt's words, adds each word the feedback names
  as missing with probability `p_fix`, and drops each word it had with probability
  `p_forget`;
- a guided sample (the feedback without the attempt it was about) is a fresh answer
  that also adds each word the feedback names with probability `p_fix`.

It reads the refined attempt and the feedback from either prompt form: the multi-turn
conversation (the attempt as its own AI turn, the feedback in the next human message) or
the single message (the attempt between answer tags).
"""

from __future__ import annotations

import random
import re
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

_TASK = re.compile(r"uses all of these words: ([^.\n]+)")
_MISSING = re.compile(r"required words: ([^.\n]+)")
_ANSWER = re.compile(r"<answer>\n(.*?)\n</answer>", re.S)


class ScriptedRefiner(BaseChatModel):
    """Answers keyword tasks; fixes named misses with probability `p_fix`."""

    p_word: float = 0.6
    p_fix: float = 0.8
    p_forget: float = 0.0
    seed: int = 0
    rng: Any = None

    @property
    def _llm_type(self) -> str:
        return "scripted-refiner"

    def model_post_init(self, context: Any) -> None:
        self.rng = random.Random(self.seed)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = "\n".join(str(m.content) for m in messages)
        task = _TASK.search(text)
        words = [w.strip() for w in task.group(1).split(",")] if task else []
        missing = _MISSING.findall(text)
        before = self._refined_text(messages, text) if missing else None
        if not missing:  # a fresh sample of the task
            chosen = [w for w in words if self.rng.random() < self.p_word]
        elif not before:  # a guided sample: a fresh answer told what was missing
            named = {w.strip().strip('"') for w in missing[-1].split(",")}
            chosen = [
                w
                for w in words
                if self.rng.random() < self.p_word or (w in named and self.rng.random() < self.p_fix)
            ]
        else:
            named = {w.strip().strip('"') for w in missing[-1].split(",")}
            chosen = [
                w
                for w in words
                if (w in before.split() and self.rng.random() >= self.p_forget)
                or (w in named and self.rng.random() < self.p_fix)
            ]
        answer = "A sentence with " + (" ".join(chosen) or "nothing") + " ."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(answer))])

    @staticmethod
    def _refined_text(messages: list[BaseMessage], text: str) -> str:
        ai = [m for m in messages if isinstance(m, AIMessage)]
        if ai:
            return str(ai[-1].content)
        answers = _ANSWER.findall(text)
        return answers[-1] if answers else ""
