"""Finding fenced code blocks (```lang ... ```) in model output.

Models often wrap code or JSON in Markdown fences, sometimes with prose around them and
sometimes without the closing fence (a reply cut off by a token limit). The evaluators
that check code or JSON look inside the first fitting block; judges and comparers read
the JSON objects a reply holds anywhere (`json_objects`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# An opening fence at the start of a line: three or more backticks or tildes, then an
# optional info string whose first word is the language.
_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One fenced block: its language (lower case, "" if none) and its body."""

    lang: str
    body: str


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block in `text`, in order.

    A block whose closing fence is missing runs to the end of the text.
    """
    blocks: list[Block] = []
    position = 0
    while (opening := _OPEN.search(text, position)) is not None:
        fence = opening.group("fence")
        info = opening.group("info").strip()
        lang = info.split()[0].lower() if info else ""
        body_start = opening.end() + 1
        closing = re.compile(
            rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE
        ).search(text, body_start)
        if closing is None:
            blocks.append(Block(lang, text[body_start:]))
            break
        blocks.append(Block(lang, text[body_start : closing.start()].rstrip("\n")))
        position = closing.end()
    return blocks


def first_block(text: str, langs: frozenset[str]) -> Block | None:
    """The first block labelled with one of `langs`, else the first unlabelled block."""
    blocks = fenced_blocks(text)
    for block in blocks:
        if block.lang in langs:
            return block
    for block in blocks:
        if not block.lang:
            return block
    return None


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in `text`."""
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            objects.append(value)
        position = text.find("{", end)
    return objects
