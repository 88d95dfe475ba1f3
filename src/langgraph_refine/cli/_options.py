"""Loop options shared by `run` and `batch`, and how they become `create_refine_graph` arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.types import RetryPolicy

from langgraph_refine._retry import DEFAULT_RETRY_POLICY
from langgraph_refine.cli._errors import CliError
from langgraph_refine.cli._specs import EvaluatorSpec, build_evaluators, parse_specs

CLI_RETRY_POLICY: RetryPolicy = DEFAULT_RETRY_POLICY._replace(max_attempts=3)
"""Transient errors are retried twice (about 1.5 s of backoff), so a dead server fails fast."""

MEMORY_CHOICES = ("all", "last", "best_and_last")
PER_LINE_OPTIONS = ("evaluator", "target_score", "max_iterations", "patience", "memory")
"""Keys a batch line may set for itself; other keys are carried along and ignored."""


def parse_memory(value: str | int) -> str | int:
    """`--memory`: `all`, `last`, `best_and_last`, or a whole number (a window of attempts)."""
    if isinstance(value, int) and not isinstance(value, bool):
        window = value
    elif isinstance(value, str) and value.strip().lower().replace("-", "_") in MEMORY_CHOICES:
        return value.strip().lower().replace("-", "_")
    elif isinstance(value, str) and value.strip().isdigit():
        window = int(value.strip())
    else:
        raise CliError(
            f"memory must be one of {', '.join(MEMORY_CHOICES)} or a whole number >= 1 "
            f"(a window of recent attempts), got {value!r}"
        )
    if window < 1:
        raise CliError(f"memory window must be >= 1, got {window}")
    return window


def parse_patience(value: int | None) -> int | None:
    """`--patience`: rounds without progress before stopping; 0 (or None) disables the rule."""
    if value is None or value == 0:
        return None
    if value < 0:
        raise CliError(f"--patience must be >= 1, or 0 to disable the plateau rule; got {value}")
    return value


@dataclass(frozen=True)
class LoopOptions:
    """The loop's settings, as given on the command line (or a batch line).

    Attributes:
        specs: Parsed evaluator specs; empty means the default LLM judge.
        target_score: Score that stops the loop.
        max_iterations: Refinement rounds after the first generation.
        patience: Non-improving rounds tolerated (None disables the rule).
        memory: Which earlier attempts the generator sees.
    """

    specs: list[EvaluatorSpec] = field(default_factory=list)
    target_score: float = 0.9
    max_iterations: int = 4
    patience: int | None = 2
    memory: str | int = "best_and_last"

    @classmethod
    def from_cli(
        cls,
        evaluator: Sequence[str] | None,
        target_score: float,
        max_iterations: int,
        patience: int | None,
        memory: str,
    ) -> LoopOptions:
        """Parse and check the command-line values (before any model is built)."""
        options = cls(
            specs=parse_specs(list(evaluator or [])),
            target_score=target_score,
            max_iterations=max_iterations,
            patience=parse_patience(patience),
            memory=parse_memory(memory),
        )
        options.check()
        return options

    def check(self) -> None:
        """Reject values outside their ranges with the option's name.

        Raises:
            CliError: For a value the loop would refuse.
        """
        if not 0.0 <= self.target_score <= 1.0:
            raise CliError(f"target score must be in [0, 1], got {self.target_score}")
        if self.max_iterations < 0:
            raise CliError(f"max iterations must be >= 0, got {self.max_iterations}")

    def override(self, line: Mapping[str, Any]) -> LoopOptions:
        """These options with a batch line's own values on top.

        Raises:
            CliError: For a per-line value of the wrong type or range.
        """
        changes: dict[str, Any] = {}
        if "evaluator" in line:
            specs = line["evaluator"]
            if isinstance(specs, str):
                specs = [specs]
            if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
                raise CliError(
                    f"'evaluator' must be a spec string or a list of them, got {specs!r}"
                )
            changes["specs"] = parse_specs(specs)
        if "target_score" in line:
            changes["target_score"] = _number(line, "target_score")
        if "max_iterations" in line:
            changes["max_iterations"] = _whole(line, "max_iterations")
        if "patience" in line:
            changes["patience"] = (
                None if line["patience"] is None else parse_patience(_whole(line, "patience"))
            )
        if "memory" in line:
            changes["memory"] = parse_memory(line["memory"])
        updated = replace(self, **changes)
        updated.check()
        return updated

    def graph_kwargs(self, judge_model: Callable[[], BaseChatModel]) -> dict[str, Any]:
        """Keyword arguments for `create_refine_graph` / `refine` / `arefine`.

        Args:
            judge_model: Returns the LLM judge's model (called only if a judge is used).

        Raises:
            CliError: If a model cannot be built or an evaluator rejects its argument.
        """
        evaluator = build_evaluators(self.specs, judge_model)
        kwargs: dict[str, Any] = {
            "evaluator": evaluator,
            "target_score": self.target_score,
            "max_iterations": self.max_iterations,
            "patience": self.patience,
            "memory": self.memory,
            "retry_policy": CLI_RETRY_POLICY,
        }
        if evaluator is None:
            kwargs["judge_model"] = judge_model()
        return kwargs


def _number(line: Mapping[str, Any], key: str) -> float:
    value = line[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CliError(f"{key!r} must be a number, got {value!r}")
    return float(value)


def _whole(line: Mapping[str, Any], key: str) -> int:
    value = line[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise CliError(f"{key!r} must be a whole number, got {value!r}")
    return value
