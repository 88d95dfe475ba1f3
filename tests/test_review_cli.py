"""`run --review` says which attempt it shows; after a revise it shows the revision."""

from __future__ import annotations

from typing import Any

from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    cli,
    drafts_and_judge,
    openai_server,
)


def test_after_a_revise_the_panel_shows_the_revision_and_approve_approves_it(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
) -> None:
    # The revision ties with the first draft at 1.00: the reviewer's request outranks the tie.
    server = openai_server(drafts_and_judge({"draft 0": 1.0, "draft 1": 1.0}))
    args = ["run", "Write a haiku about rain.", "--model", "scripted"]
    run = cli(
        *args, "--base-url", server.base_url, "--review", "--json", stdin="v\nthree lines\na\n"
    )
    assert run.code == 0, run.err
    panels = run.err.split("review — ")
    assert "showing attempt 0, the best so far" in panels[1]
    assert "draft 1" in panels[2]
    assert (
        "showing attempt 1 (the revision you asked for); the best so far is attempt 0 "
        "(score 1.00)" in panels[2]
    )
    data = run.json()
    assert (data["stop_reason"], data["value"]) == ("approved", "draft 1")


def test_a_revision_below_the_best_is_shown_beside_it(
    cli: Any,  # noqa: F811 - a fixture
    openai_server: Any,  # noqa: F811 - a fixture
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95, "draft 1": 0.5}))
    args = ["run", "Write a haiku about rain.", "--model", "scripted"]
    run = cli(*args, "--base-url", server.base_url, "--review", "--json", stdin="v\nshorter\na\n")
    assert run.code == 0, run.err
    panels = run.err.split("review — ")
    assert "draft 1" in panels[2]
    assert (
        "showing attempt 1 (the revision you asked for); the best so far is attempt 0 "
        "(score 0.95)" in panels[2]
    )
    data = run.json()
    assert (data["stop_reason"], data["value"], data["score"]) == ("approved", "draft 1", 0.5)
