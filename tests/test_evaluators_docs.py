"""The evaluators page's snippets and the evaluators' docstring examples run as written."""

from __future__ import annotations

import doctest
import importlib
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "evaluators.md"
MODULES = [
    "langgraph_refine.evaluators",
    "langgraph_refine.evaluators._agreement",
    "langgraph_refine.evaluators._base",
    "langgraph_refine.evaluators._calibrate",
    "langgraph_refine.evaluators._cascade",
    "langgraph_refine.evaluators._checklist",
    "langgraph_refine.evaluators._combine",
    "langgraph_refine.evaluators._judge",
    "langgraph_refine.evaluators._labels",
    "langgraph_refine.evaluators._openevals",
    "langgraph_refine.evaluators._python_tests",
    "langgraph_refine.evaluators._repetition",
    "langgraph_refine.evaluators._reward",
    "langgraph_refine.evaluators._schema",
    "langgraph_refine.evaluators._tags",
    "langgraph_refine.evaluators._text",
]


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)


def test_page_snippets_run(monkeypatch: Any, tmp_path: Path, capsys: Any) -> None:
    blocks = python_blocks()
    runnable = [b for b in blocks if not b.startswith("# needs")]
    assert len(runnable) >= 10
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("docs_evaluators")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile("\n".join(runnable), str(PAGE), "exec"), module.__dict__)
    printed = capsys.readouterr().out
    # The outputs the page quotes in comments are what the snippets print.
    assert "The response has 4 words, but it must have 5-12 words" in printed
    assert "- at $.items[0].qty: 0 is less than the minimum of 1" in printed
    assert "test_ten: AssertionError: assert fib(10) == 55, where fib(10) is 10" in printed
    assert "0.0 exited\n0.0 timeout" in printed
    assert "\n0.694\n" in printed
    assert "[no_exclamations] score 0.00: Remove all 2 exclamation marks." in printed


def test_snippets_that_need_a_service_still_compile() -> None:
    needing = [b for b in python_blocks() if b.startswith("# needs")]
    assert needing
    for block in needing:
        compile(block, str(PAGE), "exec")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert failures == 0
    assert tried > 0
