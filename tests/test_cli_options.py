"""Loop options of the command line: allowed values from the library's Literals, per-line keys."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest

from langgraph_refine._calls._budget import Budget
from langgraph_refine._state import Strategy
from langgraph_refine.cli._errors import CliError
from langgraph_refine.cli._flags import loop_flags
from langgraph_refine.cli._options import MEMORY_CHOICES, CommandOptions, budget_dict
from langgraph_refine.cli._shared import SharedFlags
from tests.test_cli_helpers import assert_one_line_error, cli  # noqa: F401


def test_choices_come_from_the_literals() -> None:
    choices = {flag.name: flag.choices for flag in loop_flags("run")}
    assert choices["strategy"] == get_args(Strategy) == ("chain", "explore", "sample")
    assert MEMORY_CHOICES == ("all", "last", "best_and_last")
    assert choices["on_budget_exhausted"] == ("stop", "raise")


def test_strategy_is_passed_only_when_given() -> None:
    plain = SharedFlags(evaluator=["words:1-5"], loop={}, memory="last").options()
    assert "strategy" not in plain.graph_kwargs(lambda: None)  # type: ignore[arg-type,return-value]
    chosen = SharedFlags(
        evaluator=["words:1-5"], loop={"strategy": "Explore"}, memory="last"
    ).options()
    assert chosen.graph_kwargs(lambda: None)["strategy"] == "explore"  # type: ignore[arg-type,return-value]
    line = plain.override({"strategy": "sample", "budget": {"max_calls": 4}, "min_delta": 0.1})
    kwargs = line.graph_kwargs(lambda: None)  # type: ignore[arg-type,return-value]
    assert (kwargs["strategy"], kwargs["min_delta"]) == ("sample", 0.1)
    assert kwargs["budget"] == Budget(max_calls=4)
    assert budget_dict(line.run_budget()) == {"max_calls": 4}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"strategy": "beam"}, "'strategy' must be one of chain, explore, sample; got 'beam'"),
        ({"on_budget_exhausted": "explode"}, "must be one of stop, raise"),
        ({"budget": {"calls": 3}}, "'budget' must be null or an object with keys among"),
        ({"budget": {"max_calls": -1}}, "budget:"),
        ({"min_delta": -0.5}, "min_delta must be a number >= 0"),
    ],
)
def test_bad_per_line_values_name_the_key(line: dict[str, Any], message: str) -> None:
    with pytest.raises(CliError, match=message.replace("(", r"\(")):
        CommandOptions().override(line)


def test_bad_strategy_option_is_one_line(cli: Any, tmp_path: Path) -> None:
    run = cli("run", "Say hi.", "--model", "m", "--strategy", "beam")
    assert_one_line_error(run, "--strategy must be one of chain, explore, sample", "'beam'")
    run = cli("run", "Say hi.", "--model", "m", "--on-budget-exhausted", "maybe")
    assert_one_line_error(run, "--on-budget-exhausted must be one of stop, raise")
    run = cli("run", "Say hi.", "--model", "m", "--budget-calls", "-2")
    assert_one_line_error(run, "budget:")
