"""Every Python block and every command-line example in README.md and docs/ runs as written.

The examples run against a scripted model (tests/docs_model.py) served over the OpenAI
protocol on loopback: `OPENAI_BASE_URL` points every `ChatOpenAI`, `"openai:..."` model
and `--model` at it. Conventions the pages follow, which this module checks:

- Each ```python block is self-contained, or starts with a comment saying it continues
  the block above (`# Continues the block above ...`); such a block runs with the names
  the blocks before it defined.
- Output a page shows is written as `#> ...` lines under the `print(...)` that prints it
  (pytest-examples' convention): in a block that shows any, everything the block prints
  must be what its `#>` lines show, in order.
- A block with a title (```json title="cat.schema.json"```) is a file the examples use:
  it is written to the working directory before the page's examples run.
- In ```bash blocks, lines starting with `langgraph-refine` are run (a trailing `\\`
  continues the line; `export NAME=VALUE` lines set the environment; `# ...` lines are
  comments); each must exit 0 unless the line ends with a `# exits N` comment.
- The PostgreSQL address the pages use (`DOCS_POSTGRES_URI`) is replaced by the test
  database's (`LANGGRAPH_REFINE_TEST_POSTGRES_URI`), and LangGraph Server addresses by the
  one started for the page.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import postgres_uri
from tests.docs_model import reply
from tests.fault_server import FaultServer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONTINUES = re.compile(r"^# Continues the block above", re.I)
DOCS_POSTGRES_URI = "postgresql://postgres@localhost:5432/postgres"
TITLED = re.compile(r'^```\w*[^\n]*title="([^"]+)"[^\n]*\n(.*?)^```', re.S | re.M)
BASH = re.compile(r"^```(?:bash|console|sh)\n(.*?)^```", re.S | re.M)


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@dataclass
class Block:
    """One ```python block: where it starts (the line after the fence) and its source."""

    page: Path
    line: int
    source: str

    @property
    def continues(self) -> bool:
        return bool(CONTINUES.match(self.source))

    @property
    def shown_output(self) -> str | None:
        """The output the page shows (`#> ...` lines), or None when it shows none."""
        shown = [m[3:] if m.startswith("#> ") else m[2:] for m in re.findall(
            r"^\s*#>.*$", self.source, flags=re.M
        )]
        return "\n".join(line.strip() for line in shown) if shown else None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(page, text.count("\n", 0, m.start(1)) + 1, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    ]


def run_block(block: Block, namespace: dict[str, Any]) -> str:
    """Run the block in `namespace` (with its real line numbers in tracebacks); its output."""
    code = compile("\n" * (block.line - 1) + localised(block.source), str(block.page), "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, namespace)
    return out.getvalue()


@pytest.fixture
def docs_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    """The scripted model on loopback, its address in the environment, a scratch directory."""
    with FaultServer(content=reply).serve() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-scripted")
        monkeypatch.setenv("REFINE_MODEL", "gpt-4o-mini")
        monkeypatch.chdir(tmp_path)
        yield server


def write_page_files(page: Path, where: Path) -> list[str]:
    names = []
    for name, body in TITLED.findall(page.read_text()):
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(body)
        names.append(name)
    return names


def localised(source: str) -> str:
    uri = postgres_uri()
    return source.replace(DOCS_POSTGRES_URI, uri) if uri else source


def fresh_namespace(page: Path, index: int) -> dict[str, Any]:
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}_{index}")
    sys.modules[module.__name__] = module  # pickling, dataclasses and typing look it up
    return module.__dict__


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=page_id)
def test_python_blocks_run(page: Path, docs_env: FaultServer, tmp_path: Path) -> None:
    write_page_files(page, tmp_path)
    namespace: dict[str, Any] = {}
    for index, block in enumerate(blocks(page)):
        if not block.continues:
            namespace = fresh_namespace(page, index)
        where = f"{page_id(page)}:{block.line}"
        printed = run_block(block, namespace)
        shown = block.shown_output
        if shown is not None:
            got = "\n".join(line.strip() for line in printed.strip().splitlines())
            assert got == shown.strip(), f"{where}: the block printed\n{printed}"


def commands(page: Path) -> list[tuple[str, int]]:
    """The page's command lines (`\\` continuations joined) with their expected exit code."""
    found = []
    for block in BASH.findall(page.read_text()):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.strip()
            if line.startswith(("langgraph-refine ", "export ")):
                expected = re.search(r"#\s*exits (\d+)\s*$", line)
                found.append((line, int(expected.group(1)) if expected else 0))
    return found


CLI_PAGES = [p for p in PAGES if any(c.startswith("langgraph-refine") for c, _ in commands(p))]


@pytest.mark.parametrize("page", CLI_PAGES, ids=page_id)
def test_command_lines_run(page: Path, docs_env: FaultServer, tmp_path: Path) -> None:
    write_page_files(page, tmp_path)
    env = dict(os.environ)
    cli = [sys.executable, "-m", "langgraph_refine.cli"]
    for line, expected in commands(page):
        words = shlex.split(line, comments=True)
        if words[0] == "export":
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                if name not in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):  # the scripted model's
                    env[name] = value
            continue
        proc = subprocess.run(
            cli + words[1:], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == expected, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, f"{line}\n{proc.stderr[-3000:]}"
