"""The documentation site builds with warnings as errors, offline, API reference included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "index",
    "concepts",
    "evaluators",
    "checkpointing",
    "human-review",
    "embedding",
    "agents",
    "cli",
    "deployment",
    "mcp",
    "scaling-out",
    "tracing",
    "architecture",
    "api",
]


def nav_files() -> list[str]:
    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may hold !!python/name tags (theme extensions); they are not needed here.
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    return [next(iter(item.values())) for item in config["nav"]]


def test_nav_lists_every_page_and_every_page_exists() -> None:
    assert nav_files() == [f"{page}.md" for page in PAGES]
    for page in PAGES:
        assert (ROOT / "docs" / f"{page}.md").is_file(), f"docs/{page}.md is missing"


@pytest.mark.slow
def test_site_builds_strict_without_warnings(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "WARNING" not in output, output[-4000:]
    for page in PAGES:
        path = site / ("index.html" if page == "index" else f"{page}/index.html")
        assert path.is_file(), f"{path} was not built"

    api = (site / "api" / "index.html").read_text()
    # The reference is generated from the docstrings: signatures, parameters, examples.
    for name in (
        "create_refine_graph",
        "RefineResult",
        "BudgetExhaustedError",
        "llm_judge",
        "word_count",
    ):
        assert (
            f'id="langgraph_refine.{name}"' in api
            or f'id="langgraph_refine.evaluators.{name}"' in api
        ), name
    assert "Build the refine loop as an uncompiled" in api
    assert "max_iterations" in api
    # Doctest examples are rendered as code, not as Markdown quotes.
    assert "&gt;&gt;&gt;" in api and "<blockquote>" not in api

    # The built site fetches nothing: no fonts or scripts from the network.
    for page in site.rglob("*.html"):
        html = page.read_text()
        assert "fonts.googleapis.com" not in html and "fonts.gstatic.com" not in html, page
        assert 'src="http' not in html, page


def test_all_extra_brings_every_user_facing_extra() -> None:
    # `[all]` is "everything a user needs": every extra but the site's and the suite's tools.
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    [bundle] = extras["all"]
    included = set(bundle.split("[", 1)[1].rstrip("]").split(","))
    assert included == set(extras) - {"all", "test", "docs"}
    assert "server" in included  # `langgraph dev` (langgraph-cli[inmem])
