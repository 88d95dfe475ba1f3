"""The agent wing's shape: the loop's own modules do no I/O, and the record stays one record.

What each of `RefineMiddleware`'s steps writes is decided without I/O (`_agent_loop`,
`_agent_state`, `_transcript`, `_evidence`, `_progress`, the card's words): only the
middleware's hooks push a progress card, send a stop event or pause for a review. The
loop's state is one typed record, so few string literals name `refine_*` keys.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).parent.parent / "src" / "langgraph_refine"
AGENTS = SRC / "_agents"

IO_NAMES = {"push_ui_message", "delete_ui_message", "emit", "interrupt", "get_stream_writer"}
"""What pushes to a chat, sends an event or pauses a run."""

WITHOUT_IO = [
    AGENTS / "_agent_loop.py",
    AGENTS / "_agent_state.py",
    AGENTS / "_transcript.py",
    AGENTS / "_evidence.py",
    AGENTS / "_progress.py",
    SRC / "_decisions" / "_card.py",
]


def names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            used |= {alias.asname or alias.name for alias in node.names}
    return used


def test_only_the_middleware_pushes_cards_sends_events_or_pauses() -> None:
    doing_io = {path.name: sorted(names_used(path) & IO_NAMES) for path in WITHOUT_IO}
    assert {name: found for name, found in doing_io.items() if found} == {}
    assert {"push_ui_message", "emit"} <= names_used(AGENTS / "_middleware.py")


def test_no_agent_module_is_longer_than_450_lines() -> None:
    sizes = {path.name: len(path.read_text().splitlines()) for path in AGENTS.glob("*.py")}
    assert {name: size for name, size in sizes.items() if size > 450} == {}


def test_at_most_40_string_literals_name_the_loops_state_keys() -> None:
    literal = re.compile(r"[\"']refine_[a-z_]+[\"']")
    found = sum(len(literal.findall(path.read_text())) for path in SRC.rglob("*.py"))
    assert found <= 40, found
