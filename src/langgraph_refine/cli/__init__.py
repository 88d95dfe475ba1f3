"""The `langgraph-refine` command line: `run`, `batch` and `report`.

Needs the optional `cli` extra (typer and rich): `pip install 'langgraph-refine[cli]'`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]

INSTALL_HINT = "pip install 'langgraph-refine[cli]'"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code.

    Args:
        argv: The arguments after the program name (default: `sys.argv[1:]`).

    Returns:
        0 on success; 1 on an error (reported as one line on stderr); 2 on a usage error.

    Example:
        >>> main(["report", "--help"])  # doctest: +SKIP
    """
    try:
        import rich  # noqa: F401
        import typer  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(
            f"langgraph-refine: the command line needs typer and rich ({exc.name} is missing): "
            f"{INSTALL_HINT}\n"
        )
        return 1
    from langgraph_refine.cli._app import run_app

    return run_app(argv)
