"""Reasoning kept apart: the thinking a model writes beside its answer is not the answer.

Reasoning models put their thinking in one of three places, depending on the model and
the provider: in the content, between `<think>` and `</think>` (llama.cpp, vLLM or
Ollama serving DeepSeek-R1, Qwen3 and the like, unless told to split it off); in a
`reasoning_content` field beside the content (the OpenAI-compatible servers that split
it off; LangChain's integrations put it in `additional_kwargs` or `response_metadata`);
or in reasoning content blocks (`{"type": "reasoning"}`, Anthropic's `"thinking"`).
`split_reasoning` takes it out of all three, so the loop's `response` holds the answer
only: evaluators and refinement prompts never see the thinking, and `Attempt.reasoning`
keeps it for people to read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage

_BLOCK = re.compile(r"<think(?:ing)?>(.*?)</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_FIELDS = ("reasoning_content", "reasoning", "thinking")
_BLOCK_TYPES = {"reasoning": ("reasoning", "summary"), "thinking": ("thinking",)}


def split_think_tags(text: str) -> tuple[str, str | None]:
    r"""Take `<think>...</think>` blocks out of a text.

    A closing tag without an opening one (chat templates that open the block in the
    prompt) makes everything before it reasoning; an opening tag that is never closed
    (a reply cut off while thinking) makes everything after it reasoning.

    Returns:
        The text without its reasoning (stripped), and the reasoning (None if none).

    Example:
        >>> split_think_tags("<think>2 + 2 is 4</think>\nFour.")
        ('Four.', '2 + 2 is 4')
    """
    if "<" not in text:  # every tag starts with one: the common reply, with no regex pass
        return text, None
    parts = [m.group(1).strip() for m in _BLOCK.finditer(text)]
    rest = _BLOCK.sub("", text)
    if (close := _CLOSE.search(rest)) is not None:
        parts.insert(0, rest[: close.start()].strip())
        rest = rest[close.end() :]
    if (opened := _OPEN.search(rest)) is not None:
        parts.append(rest[opened.end() :].strip())
        rest = rest[: opened.start()]
    if not parts:
        return text, None
    return rest.strip(), "\n\n".join(p for p in parts if p) or None


def _text_of(value: Any) -> str | None:
    """Reasoning given as text, a list of text parts, or a dict holding them."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, Mapping):
        for key in ("text", "content", "reasoning", "thinking", "summary"):
            if key in value:
                return _text_of(value[key])
        return None
    if isinstance(value, list | tuple):
        texts = [t for t in map(_text_of, value) if t]
        return "\n\n".join(texts) or None
    return None


def _block_reasoning(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    found = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") in _BLOCK_TYPES:
            keys = _BLOCK_TYPES[str(block["type"])]
            text = next((t for k in keys if (t := _text_of(block.get(k)))), None)
            if text:
                found.append(text)
    return found


def split_reasoning(reply: BaseMessage | str) -> tuple[str, str | None]:
    """The answer text of a model reply, and its reasoning kept apart.

    Args:
        reply: A chat message or a plain string.

    Returns:
        `(answer, reasoning)`: the reply's text without any reasoning, and the reasoning
        found (from `reasoning_content` fields, reasoning content blocks and `<think>`
        blocks, in that order), or None.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> reply = AIMessage("Paris.", additional_kwargs={"reasoning_content": "Capital."})
        >>> split_reasoning(reply)
        ('Paris.', 'Capital.')
    """
    if isinstance(reply, str):
        return split_think_tags(reply)
    found: list[str] = []
    for where in (reply.additional_kwargs, reply.response_metadata):
        for key in _FIELDS:
            text = _text_of(where.get(key))
            if text and text not in found:
                found.append(text)
    found += [t for t in _block_reasoning(reply.content) if t not in found]
    # `.text` joins the text blocks only: reasoning blocks are already left out of it.
    answer, tagged = split_think_tags(reply.text)
    if tagged:
        found.append(tagged)
    return answer, "\n\n".join(found) or None
