"""Refining by edits: SEARCH/REPLACE blocks read from a reply and applied to an attempt.

With `edits=True` (or `"auto"` on a long attempt) a refinement asks the model for
changes instead of the whole answer again, in the blocks aider uses::

    <<<<<<< SEARCH
    the exact text to find
    =======
    the text to put there
    >>>>>>> REPLACE

The blocks apply in order, each to the text the blocks before it left, and whole or
not at all: if one block's search text is missing or found more than once, none is
applied and the reply becomes a FAIL attempt holding its parent's text unchanged, with
feedback naming each block that did not apply (the evaluator is not called). A reply
with no block is a whole rewrite, read like any reply.

What models really do is tolerated, without ever guessing between two places: the
blocks may sit in a code fence or among prose, the reply may use CRLF, a search text
may carry trailing spaces the attempt lacks (or lack ones it has), and a search and
replace text both wrapped in a fence of their own are unwrapped when the fenced text is
not in the attempt. Each looser reading is tried only when the stricter found nothing,
and any reading that finds two places fails the block.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from langchain_core.messages import BaseMessage

from langgraph_refine._decisions._prompts import edits_failed_feedback
from langgraph_refine._reasoning import split_reasoning
from langgraph_refine._state import Attempt, Evaluation
from langgraph_refine._typed import OutputSchema, Reply, pretty_json

EditsMode: TypeAlias = bool | Literal["auto"]
"""`True`: every refinement asks for edits; `False`: whole rewrites; `"auto"`: edits
only for an attempt longer than `EDITS_AUTO_MIN_CHARS`."""

EDITS_AUTO_MIN_CHARS = 2000
"""With `edits="auto"`, an attempt longer than this many characters (about 350 words)
is refined by edits; a shorter one is rewritten whole, which costs little more and is
a format every model follows."""

_SEARCH = re.compile(r"^\s*<{5,9}\s*SEARCH\s*$", re.IGNORECASE)
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9}\s*REPLACE\s*$", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_SHOWN_CHARS = 60


def check_edits(value: object) -> EditsMode:
    """Return `value` if it is a valid `edits` option, else raise.

    Raises:
        ValueError: Naming the value and the allowed ones.
    """
    if value is True or value is False or value == "auto":
        return value
    raise ValueError(f"edits must be True, False or 'auto'; got {value!r}")


def edit_text(attempt: Attempt, schema: OutputSchema | None) -> str:
    """The text edits apply to: the response, a typed one pretty-printed one key a line.

    Line-stable, so blocks can quote whole lines; the prompt shows exactly this text.
    """
    return pretty_json(attempt.response) if schema is not None else attempt.response


def asks_for_edits(mode: EditsMode, attempt: Attempt, schema: OutputSchema | None) -> bool:
    """Whether a refinement of `attempt` asks for edits under `mode`."""
    if mode == "auto":
        return len(edit_text(attempt, schema)) > EDITS_AUTO_MIN_CHARS
    return bool(mode)


@dataclass(frozen=True)
class Block:
    """One SEARCH/REPLACE block of a reply.

    Attributes:
        number: Its position in the reply, from 1.
        search: The text to find (None when the block is not closed).
        replace: The text to put in its place.
    """

    number: int
    search: str | None
    replace: str = ""


def parse_blocks(reply: str) -> list[Block]:
    """The SEARCH/REPLACE blocks in a reply, in order (empty: the reply has none).

    Text outside the blocks (prose, fence lines, file names) is ignored. A block that is
    never closed is returned with `search=None`, so it fails rather than being read as
    part of a rewrite.
    """
    blocks: list[Block] = []
    search: list[str] | None = None
    replacement: list[str] | None = None
    for line in reply.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if _SEARCH.match(line):
            if search is not None:  # a new block before the last one closed
                blocks.append(Block(len(blocks) + 1, None))
            search, replacement = [], None
        elif search is None:
            continue
        elif replacement is None and _DIVIDER.match(line):
            replacement = []
        elif replacement is not None and _REPLACE.match(line):
            blocks.append(Block(len(blocks) + 1, "\n".join(search), "\n".join(replacement)))
            search, replacement = None, None
        else:
            (search if replacement is None else replacement).append(line)
    if search is not None:
        blocks.append(Block(len(blocks) + 1, None))
    return blocks


@dataclass(frozen=True)
class Applied:
    """The outcome of applying a reply's blocks.

    Attributes:
        text: The edited text, or None when any block did not apply.
        applied: How many blocks applied (0 when any did not).
        failures: One line per block that did not apply, naming it and why.
    """

    text: str | None
    applied: int
    failures: tuple[str, ...] = ()


def apply_blocks(text: str, blocks: Sequence[Block]) -> Applied:
    """Apply `blocks` to `text` in order, whole or not at all.

    Every block is tried (each on the text the applied ones before it left), so the
    failures name each block that did not apply, not only the first.
    """
    crlf = "\r\n" in text
    current = text.replace("\r\n", "\n") if crlf else text
    failures: list[str] = []
    for block in blocks:
        edited, why = _apply_one(current, block)
        if edited is None:
            failures.append(f"block {block.number}{_quoted(block)}: {why}")
        else:
            current = edited
    if failures:
        return Applied(None, 0, tuple(failures))
    return Applied(current.replace("\n", "\r\n") if crlf else current, len(blocks))


def _quoted(block: Block) -> str:
    first = next((line.strip() for line in (block.search or "").split("\n") if line.strip()), "")
    if not first:
        return ""
    shown = first if len(first) <= _SHOWN_CHARS else first[: _SHOWN_CHARS - 3] + "..."
    return f" (SEARCH starting {shown!r})"


def _apply_one(text: str, block: Block) -> tuple[str | None, str]:
    """`text` with the block applied, or `(None, why)`."""
    if block.search is None:
        return None, "it is not closed (each block needs its ======= and >>>>>>> REPLACE lines)"
    if not block.search.strip():
        return None, "its SEARCH text is empty; quote the text to change"
    for search, replacement in _readings(block):
        spans = _find(text, search)
        if len(spans) > 1:
            return None, (
                f"its SEARCH text is found {len(spans)} times; include more of the "
                "surrounding text so it matches one place"
            )
        if spans:
            start, end = spans[0]
            return _splice(text, start, end, replacement), ""
    return None, "its SEARCH text is not in the attempt; copy it exactly from the attempt"


def _readings(block: Block) -> list[tuple[str, str]]:
    """The (search, replace) readings of a block, strictest first."""
    if block.search is None:  # a block without a SEARCH part has nothing to find
        return []
    readings = [(block.search, block.replace)]
    unfenced = _unfenced(block.search), _unfenced(block.replace)
    if unfenced[0] is not None and unfenced[1] is not None:
        readings.append((unfenced[0], unfenced[1]))
    return readings


def _unfenced(text: str) -> str | None:
    """`text` without a fence line first and last, or None if it is not so wrapped."""
    lines = text.split("\n")
    if len(lines) >= 2 and _FENCE.match(lines[0]) and _FENCE.match(lines[-1]):
        return "\n".join(lines[1:-1])
    return None


def _find(text: str, search: str) -> list[tuple[int, int]]:
    """The places `search` matches: exactly, else line by line ignoring trailing spaces.

    Overlapping places count; at most two are returned (two already mean ambiguous).
    """
    spans: list[tuple[int, int]] = []
    at = text.find(search)
    while at != -1 and len(spans) < 2:
        spans.append((at, at + len(search)))
        at = text.find(search, at + 1)
    if spans:
        return spans
    return _find_lines(text, search)


def _find_lines(text: str, search: str) -> list[tuple[int, int]]:
    wanted = [line.rstrip() for line in search.split("\n")]
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    spans: list[tuple[int, int]] = []
    stripped = [line.rstrip() for line in lines]
    for i in range(len(lines) - len(wanted) + 1):
        if stripped[i : i + len(wanted)] == wanted:
            last = i + len(wanted) - 1
            spans.append((starts[i], starts[last] + len(lines[last])))
            if len(spans) == 2:
                break
    return spans


def _splice(text: str, start: int, end: int, replacement: str) -> str:
    # Deleting whole lines takes their line break too, so no blank line is left behind.
    whole_lines = (start == 0 or text[start - 1] == "\n") and text[end : end + 1] == "\n"
    if not replacement and whole_lines:
        end += 1
    return text[:start] + replacement + text[end:]


def read_edits(
    output: Any,
    parent: Attempt,
    schema: OutputSchema | None,
    whole: Callable[[Any], Reply],
) -> Reply:
    """A reply to an edit request, read into the attempt's fields.

    Blocks that all apply give the edited text (validated as the object when typed),
    with `edits` set to their number. Blocks that do not all apply give the parent's
    text and object unchanged, already evaluated FAIL (see `failed_evaluation`), with
    `edits=0`. A reply without blocks (or not text) is a whole rewrite, read by `whole`.

    Args:
        output: What the generator returned.
        parent: The attempt the blocks edit.
        schema: The loop's output schema, or None for text.
        whole: Reads a reply written whole (the generate step's usual reading).
    """
    if not isinstance(output, str | BaseMessage):
        return whole(output)
    text, reasoning = split_reasoning(output)
    blocks = parse_blocks(text)
    if not blocks:
        return whole(output)
    applied = apply_blocks(edit_text(parent, schema), blocks)
    if applied.text is None:
        evaluation = failed_evaluation(parent, applied.failures, len(blocks))
        return Reply(parent.response, parent.output, reasoning, evaluation, edits=0)
    edited = schema.read(applied.text) if schema is not None else Reply(applied.text)
    return replace(edited, reasoning=reasoning, edits=applied.applied)


def failed_evaluation(parent: Attempt, failures: Sequence[str], blocks: int) -> Evaluation:
    """FAIL, score 0: the blocks that did not apply, then the parent's own feedback.

    The parent's feedback is carried once (never nested), so the next round still
    knows what the answer lacks.
    """
    earlier = parent.evaluation
    carried = ""
    if earlier is not None:
        carried = str(earlier.details.get("earlier_feedback", earlier.feedback))
    return Evaluation(
        score=0.0,
        verdict="FAIL",
        feedback=edits_failed_feedback(failures, blocks, carried),
        details={
            "evaluator": "edits",
            "edit_errors": list(failures),
            "earlier_feedback": carried,
        },
    )
