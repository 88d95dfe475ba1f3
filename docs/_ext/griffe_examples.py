"""Griffe extension for the API reference: read `Example:` sections as doctest examples.

The project's Google-style docstrings title their doctests `Example:`. Griffe parses only
the plural `Examples:` as an examples section (code blocks, highlighted); the singular is
an admonition whose doctest lines would be rendered as Markdown (quotes, stray links).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Rename `Example:` to `Examples:` in every docstring of the loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Fix the docstrings once the whole package is loaded."""
        self._fix(pkg, set())

    def _fix(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._fix(member, seen)  # type: ignore[arg-type]
