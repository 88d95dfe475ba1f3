"""How the loop's text and figures are shown in one line (CLI progress, `make demo`).

Progress lines cut long feedback at a word boundary, so a reader never sees half a word
("Missing 1 of 4 required wo"); usage reads as calls, tokens and dollars.
"""

from __future__ import annotations

from langgraph_refine._state import Usage

ELLIPSIS = "…"


def shorten(text: str, limit: int) -> str:
    """`text` on one line (whitespace collapsed), cut to at most `limit` characters.

    A cut ends at the last word boundary that fits, followed by an ellipsis; a single
    word longer than the limit is cut inside it.

    Example:
        >>> shorten("Missing 1 of 4 required words: lamp, owl", 30)
        'Missing 1 of 4 required…'
        >>> shorten("short  enough", 30)
        'short enough'
    """
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    room = max(limit - len(ELLIPSIS), 1)
    cut = line[: room + 1]  # one more: a space right after the room is a clean boundary
    end = cut.rfind(" ")
    head = cut[:end] if end > 0 else line[:room]
    return head.rstrip(" ,;:.-") + ELLIPSIS


def cost_text(cost: float | None) -> str:
    """US dollars with the digits that matter for small amounts, or 'cost unknown'.

    Example:
        >>> cost_text(1.5), cost_text(0.00045), cost_text(0.0), cost_text(None)
        ('$1.50', '$0.00045', '$0.00', 'cost unknown')
    """
    if cost is None:
        return "cost unknown"
    if cost >= 0.01 or cost == 0:
        return f"${cost:,.2f}"
    return f"${cost:.6f}".rstrip("0")


def usage_text(usage: Usage) -> str:
    """Calls, tokens and cost of a run in a few words.

    Example:
        >>> usage_text(Usage(calls=3, total_tokens=1200, cost=0.0021))
        '3 model calls, 1,200 tokens, $0.0021'
        >>> usage_text(Usage(cache_hits=2))
        '0 model calls, 0 tokens, $0.00, 2 cache hits'
    """
    calls = f"{usage.calls} model call" + ("" if usage.calls == 1 else "s")
    text = f"{calls}, {usage.total_tokens:,} tokens, {cost_text(usage.cost)}"
    if usage.cache_hits:  # answered by --cache: not calls, and not paid for
        text += f", {usage.cache_hits} cache hit" + ("" if usage.cache_hits == 1 else "s")
    return text
