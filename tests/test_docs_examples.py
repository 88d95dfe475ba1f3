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
- A block that warns (Python warnings, or a WARNING logged by LangGraph or this
  library) fails.
- In ```bash blocks, lines starting with `langgraph-refine` are run (a trailing `\\`
  continues the line; `export NAME=VALUE` lines set the environment; `# ...` lines are
  comments); each must exit 0 unless the line ends with a `# exits N` comment.
- The PostgreSQL address the pages use (`DOCS_POSTGRES_URI`) is replaced by the test
  database's (`LANGGRAPH_REFINE_TEST_POSTGRES_URI`), the local model server's
  (`DOCS_MODEL_URL`) by the scripted model's, and LangGraph Server addresses by the one
  started for the page.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shlex
import sys
import types
import warnings
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
CONTINUES = re.compile(r"^# Continues the blocks? above", re.I)
DOCS_POSTGRES_URI = "postgresql://postgres@localhost:5432/postgres"
DOCS_MODEL_URL = "http://127.0.0.1:8080/v1"  # the local model server (tools/local_model.py)
SERVER_URL = re.compile(r"http://127\.0\.0\.1:202\d")  # `langgraph dev`'s address
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
        shown = [
            line.strip()[2:] for line in self.source.splitlines() if line.strip().startswith("#>")
        ]
        return "\n".join(line.strip() for line in shown) if shown else None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(page, text.count("\n", 0, m.start(1)) + 1, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    ]


def run_block(block: Block, namespace: dict[str, Any], server: str | None = None) -> str:
    """Run the block in `namespace` (with its real line numbers in tracebacks); its output."""
    source = "\n" * (block.line - 1) + localised(block.source, server)
    code = compile(source, str(block.page), "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Python's default filters hide ResourceWarning, so a reader never sees it; and the
        # garbage collector may close an earlier block's connections during any later block.
        warnings.simplefilter("ignore", ResourceWarning)
        exec(code, namespace)
    shown = [f"{w.category.__name__}: {w.message}" for w in caught]
    assert not shown, f"{page_id(block.page)}:{block.line}: the block warned: {shown}"
    return out.getvalue()


@pytest.fixture(scope="session")
def docs_model() -> Iterator[FaultServer]:
    """The scripted model, on loopback."""
    with FaultServer(content=reply).serve() as server:
        yield server


@pytest.fixture
def docs_env(
    docs_model: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> FaultServer:
    """The scripted model's address in the environment, and a scratch directory."""
    monkeypatch.setenv("OPENAI_BASE_URL", docs_model.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-scripted")
    monkeypatch.setenv("REFINE_MODEL", "gpt-4o-mini")
    monkeypatch.chdir(tmp_path)
    return docs_model


@pytest.fixture(scope="session")
def docs_langgraph_server(
    docs_model: FaultServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`langgraph dev` serving the repository's `langgraph.json` on the scripted model."""
    from examples.batch_on_server import serve

    logs = tmp_path_factory.mktemp("docs-langgraph-dev") / "server.log"
    with serve(docs_model.base_url, "gpt-4o-mini", logs=logs, state=logs.parent) as url:
        yield url


def needs_server(page: Path) -> bool:
    return bool(SERVER_URL.search(page.read_text()))


def page_params(pages: list[Path]) -> list[Any]:
    return [
        pytest.param(p, id=page_id(p), marks=[pytest.mark.server] if needs_server(p) else [])
        for p in pages
    ]


def write_page_files(page: Path, where: Path) -> list[str]:
    names = []
    for name, body in TITLED.findall(page.read_text()):
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(body)
        names.append(name)
    return names


def localised(source: str, server: str | None = None) -> str:
    """The block with the documented addresses pointing at the test's services."""
    uri = postgres_uri()
    if uri:
        source = source.replace(DOCS_POSTGRES_URI, uri)
    if server:
        source = SERVER_URL.sub(server, source)
    return source.replace(DOCS_MODEL_URL, os.environ["OPENAI_BASE_URL"])


def fresh_namespace(page: Path, index: int) -> dict[str, Any]:
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}_{index}")
    sys.modules[module.__name__] = module  # pickling, dataclasses and typing look it up
    return module.__dict__


@pytest.mark.slow
@pytest.mark.parametrize("page", page_params([p for p in PAGES if blocks(p)]))
def test_python_blocks_run(
    page: Path,
    docs_env: FaultServer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="langgraph")
    write_page_files(page, tmp_path)
    server = request.getfixturevalue("docs_langgraph_server") if needs_server(page) else None
    namespace: dict[str, Any] = {}
    for index, block in enumerate(blocks(page)):
        if not block.continues:
            namespace = fresh_namespace(page, index)
        where = f"{page_id(page)}:{block.line}"
        printed = run_block(block, namespace, server)
        if os.environ.get("DOCS_SHOW_OUTPUT"):  # to write a page's `#>` lines
            sys.__stderr__.write(f"--- {where}\n{printed}")
        shown = block.shown_output
        if shown is not None:
            got = "\n".join(line.strip() for line in printed.strip().splitlines())
            assert got == shown.strip(), f"{where}: the block printed\n{printed}"
    # No warning logged by LangGraph either (such as "Deserializing unregistered type").
    logged = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("langgraph")
    ]
    assert logged == []


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


@pytest.mark.slow
@pytest.mark.parametrize("page", page_params(CLI_PAGES))
def test_command_lines_run(
    page: Path,
    docs_env: FaultServer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # In this process, as `langgraph-refine ARGS` runs `main(ARGS)`: a process per line cost
    # a second or two of imports each (a minute for the pages). The console script itself
    # runs in tests/test_cli_errors.py.
    from langgraph_refine.cli import main

    write_page_files(page, tmp_path)
    server = request.getfixturevalue("docs_langgraph_server") if needs_server(page) else None
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    for line, expected in commands(page):
        words = shlex.split(localised(line, server), comments=True)
        if words[0] == "export":
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                if name not in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):  # the scripted model's
                    monkeypatch.setenv(name, value)
            continue
        capsys.readouterr()
        code = main(words[1:])
        out, err = capsys.readouterr()
        assert code == expected, f"{line}\n{out[-2000:]}\n{err[-2000:]}"
        assert "Traceback" not in err, f"{line}\n{err[-3000:]}"
