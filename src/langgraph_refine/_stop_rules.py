"""Stop rules: every reason the loop stops is decided here.

`StopRules.decide` applies the contract's rules after each evaluation; `BUDGET_STOP` is
the reason a node gives when the budget refuses a model call; `review_stop` maps a
reviewer's action to its reason; `stop_reason_of` reads the reason a finished (or
paused) state ended with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_refine._state import Attempt, Evaluation, StopReason

BUDGET_STOP: StopReason = "budget_exhausted"
"""The reason given when the budget refuses a model call (before or during a round)."""

CONFIRMABLE_STOPS: frozenset[StopReason] = frozenset({"passed", "target_reached"})
"""Stops that `confirm_pass=True` judges once more before they stand."""


def needs_confirmation(reason: StopReason | None, confirm_pass: bool) -> bool:
    """True when a round's stop must be confirmed by a second judgment (`confirm_pass`)."""
    return confirm_pass and reason in CONFIRMABLE_STOPS


_REVIEW_STOPS: dict[str, StopReason | None] = {
    "approve": "approved",
    "edit": "edited",
    "reject": "rejected",
    "revise": None,  # one more round
}


def review_stop(action: str, current: StopReason | None) -> StopReason | None:
    """The stop reason after a reviewer's action.

    `approve`, `edit` and `reject` stop with their reason; `revise` clears it (one more
    round); `continue` keeps the stop rules' decision (`current`).
    """
    return _REVIEW_STOPS.get(action, current)


def stop_reason_of(state: Mapping[str, Any]) -> StopReason | None:
    """The reason a loop's state stopped with; None while it has not stopped.

    A state paused for review, or from a custom topology that never decided, has none.
    """
    reason = state.get("stop_reason")
    return reason if reason else None


@dataclass(frozen=True)
class StopRules:
    """The rules checked after every evaluation, first match wins.

    1. `"passed"`: the verdict is `"PASS"`;
    2. `"target_reached"`: the score is at least `target_score`;
       with `require_calibration`, these two hold only for a calibrated PASS (the
       evaluation of an `evaluators.calibrate` judge, verdict PASS): any other is not
       trusted (`distrusted`) and the loop goes on to its other limits;
    3. `"max_iterations"`: `1 + max_iterations` attempts have been generated;
    4. `"plateau"`: the last `patience` refinement rounds each failed to raise the best
       score by more than `min_delta` (`patience=None` or 0 disables this rule).

    Args:
        target_score: Score in [0, 1] that counts as good enough.
        max_iterations: Refinement rounds allowed after the first generation (>= 0).
        patience: Consecutive non-improving refinement rounds tolerated (>= 1); None or
            0 disables the rule (kept as None).
        min_delta: Improvement of the best score that counts as progress (>= 0).
        require_calibration: Stop on a PASS or the target only when the PASS is
            calibrated (see `is_calibrated`).

    Raises:
        ValueError: If an option is outside its allowed range.
    """

    target_score: float = 0.9
    max_iterations: int = 4
    patience: int | None = 2
    min_delta: float = 0.0
    require_calibration: bool = False

    def __post_init__(self) -> None:
        if not _is_number(self.target_score) or not 0.0 <= self.target_score <= 1.0:
            raise ValueError(f"target_score must be in [0, 1], got {self.target_score!r}")
        if not _is_int(self.max_iterations) or self.max_iterations < 0:
            raise ValueError(f"max_iterations must be an integer >= 0, got {self.max_iterations!r}")
        if self.patience is not None and (not _is_int(self.patience) or self.patience < 0):
            raise ValueError(
                f"patience must be an integer >= 1, or 0 to disable the plateau rule; "
                f"got {self.patience!r}"
            )
        if self.patience == 0:  # one meaning on every surface: the command line's "0 disables"
            object.__setattr__(self, "patience", None)
        if not _is_number(self.min_delta) or self.min_delta < 0:
            raise ValueError(f"min_delta must be a number >= 0, got {self.min_delta!r}")
        if not isinstance(self.require_calibration, bool):
            raise ValueError(
                f"require_calibration must be True or False, got {self.require_calibration!r}"
            )

    def decide(self, attempts: Sequence[Attempt]) -> StopReason | None:
        """Apply the rules to the attempts so far; the last one was just evaluated.

        Args:
            attempts: Every attempt in order; the last was just evaluated, or left
                unjudged (`Attempt.error`), which only the iteration cap stops.

        Returns:
            The stop reason, or None if the loop should refine again.
        """
        latest = attempts[-1].evaluation
        if latest is None:  # unjudged: it neither passes nor stalls, but it is a round
            return "max_iterations" if len(attempts) >= 1 + self.max_iterations else None
        automatic = self.automatic_stop(latest)
        if automatic is not None and not self.distrusted(latest):
            return automatic
        if len(attempts) >= 1 + self.max_iterations:
            return "max_iterations"
        if self.patience is not None and self.stalled_rounds(attempts) >= self.patience:
            return "plateau"
        return None

    def automatic_stop(self, evaluation: Evaluation) -> StopReason | None:
        """The stop an evaluation makes by itself: `"passed"`, `"target_reached"` or None."""
        if evaluation.verdict == "PASS":
            return "passed"
        if evaluation.score >= self.target_score:
            return "target_reached"
        return None

    def distrusted(self, evaluation: Evaluation) -> bool:
        """Whether `require_calibration` refuses this evaluation's automatic stop.

        Only a calibrated judge's PASS is trusted: an uncalibrated judge's PASS or score,
        and a calibrated judge's score under its threshold (no PASS), are not.
        """
        return self.require_calibration and not (
            is_calibrated(evaluation) and evaluation.verdict == "PASS"
        )

    def stalled_rounds(self, attempts: Sequence[Attempt]) -> int:
        """Count the trailing refinement rounds that did not raise the best score enough.

        An answer that got further through a staged check than every earlier one
        (`Evaluation.reach`: a cascade's judge after its cheap stages) is progress,
        whatever its score; its score is then the one to beat.
        """
        stalled = 0
        best: tuple[int, float] | None = None
        for attempt in attempts:
            if attempt.evaluation is None:
                continue
            here = (attempt.evaluation.reach, attempt.evaluation.score)
            if best is None:
                best = here
                continue
            if here[0] > best[0] or (here[0] == best[0] and here[1] > best[1] + self.min_delta):
                stalled = 0
            else:
                stalled += 1
            best = max(best, here)
        return stalled


def is_calibrated(evaluation: Evaluation | None) -> bool:
    """Whether an evaluation came from a calibrated judge (`evaluators.calibrate`).

    Example:
        >>> is_calibrated(Evaluation(score=1.0, details={"calibration": {"threshold": 0.8}}))
        True
    """
    return evaluation is not None and isinstance(evaluation.details.get("calibration"), dict)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
