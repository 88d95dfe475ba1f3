"""What `run` shows in the terminal: one line per round while the loop runs, then the result.

Model text is always printed as plain `rich.text.Text`, never as console markup, so a
response containing `[brackets]` is shown as written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.status import Status
from rich.text import Text

from langgraph_refine._display import shorten, usage_text
from langgraph_refine._result import RefineResult
from langgraph_refine._typed import plain
from langgraph_refine.cli._ladder_view import models_text, per_model

FEEDBACK_CHARS = 100
TITLE_MARGIN = 6
"""Columns of the box's top border around its title (corners, dashes, spaces)."""

_VERDICT_STYLES = {"PASS": "green", "NEEDS_IMPROVEMENT": "yellow", "FAIL": "red"}


def short(text: str, limit: int = FEEDBACK_CHARS) -> str:
    """`text` on one line, cut at a word boundary to `limit` characters (see `shorten`)."""
    return shorten(text, limit)


def score_text(score: float | None) -> str:
    """A score with two decimals, or a dash when there is none."""
    return "-" if score is None else f"{score:.2f}"


def phase_text(node: str, rounds: int) -> str | None:
    """What the loop is doing as its node `node` starts, after `rounds` judged rounds.

    The one wording of the loop's phases: `run`'s spinner and `mcp`'s progress say it.

    Example:
        >>> phase_text("generate", 0), phase_text("evaluate", 1), phase_text("finalize", 2)
        ('round 0: generating', 'round 1: judging', 'choosing the result')
    """
    if node == "generate":
        return f"round {rounds}: " + ("generating a refinement" if rounds else "generating")
    if node == "evaluate":
        return f"round {rounds}: judging"
    if node == "finalize":
        return "choosing the result"
    return None


class RoundView:
    """Live view of one loop: a spinner while a model works, a line per evaluated round.

    Args:
        console: Where to draw.
        enabled: False draws nothing (the `--json` mode).
        show_reasoning: Also print the reasoning the model gave beside each answer.
    """

    def __init__(
        self, console: Console, *, enabled: bool = True, show_reasoning: bool = False
    ) -> None:
        self.console = console
        self.enabled = enabled
        self.show_reasoning = show_reasoning
        self._status: Status | None = None
        self._best: float | None = None
        self._rounds = 0  # rounds shown; a resumed run's first event sets it

    def start(self, what: str) -> None:
        """Show a spinner saying what the loop is doing."""
        if not self.enabled:
            return
        if self._status is None:
            self._status = self.console.status(what)
            self._status.start()
        else:
            self._status.update(what)

    def stop(self) -> None:
        """Remove the spinner (before prompting the user, or at the end)."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def resume(self, rounds: int) -> None:
        """Continue an interrupted run whose thread holds `rounds` attempts."""
        self._rounds = rounds
        self.start(f"resuming after {rounds} round(s)…" if rounds else "resuming…")

    def step(self, node: str) -> None:
        """Say what the loop does as each of its nodes starts (a model works in two).

        The round's number is the attempt being made: one more than the rounds shown.
        """
        what = phase_text(node, self._rounds)
        if what is not None:
            self.start(f"{what}…")

    def event(self, event: Any) -> None:
        """Handle one custom stream event of the loop (`round` or `stop`)."""
        if not self.enabled or not isinstance(event, Mapping):
            return
        if event.get("type") == "round":
            self._round(event)
            self._rounds = int(event.get("iteration", self._rounds)) + 1
        elif event.get("type") == "stop":
            self.stop()

    def _round(self, event: Mapping[str, Any]) -> None:
        score = event.get("score")
        best = event.get("best_score")
        line = Text()
        line.append(f"round {event.get('iteration', '?'):>2}  ", style="bold")
        line.append(f"score {score_text(score)}", style="cyan")
        if isinstance(score, int | float) and self._best is not None:
            arrow = "▲" if score > self._best else ("▼" if score < self._best else "=")
            line.append(f" {arrow}")
        line.append(f"  best {score_text(best)}  ")
        if event.get("rung") is not None and event.get("model"):  # a ladder: who wrote it
            line.append(f"by {event['model']}  ", style="blue")
        edits = event.get("edits")
        if edits is not None:  # refined by edits: how many blocks applied, or none
            line.append(f"{edits} edit(s)  " if edits else "edits failed  ", style="magenta")
        verdict = event.get("verdict")
        if verdict:
            line.append(str(verdict), style=_VERDICT_STYLES.get(str(verdict), ""))
            line.append("  ")
        if event.get("stopped_at"):  # a cascade: the stage that held this attempt back
            line.append(f"stopped at {event['stopped_at']}  ", style="magenta")
        if score is None and event.get("error"):  # the judge could not judge this one
            line.append("unjudged  ", style="yellow")
            # Whole: the error ends with how to fix it, which a cut would drop.
            line.append(" ".join(str(event["error"]).split()), style="dim")
        else:
            line.append(short(str(event.get("feedback") or "")), style="dim")
        self.console.print(line, soft_wrap=True)
        if self.show_reasoning and event.get("reasoning"):
            self.console.print(_reasoning_text(str(event["reasoning"])), soft_wrap=True)
        if isinstance(best, int | float):
            self._best = float(best)


def _reasoning_text(reasoning: str) -> Text:
    indented = "\n".join(f"  │ {line}" for line in reasoning.strip().splitlines())
    return Text(f"  reasoning:\n{indented}", style="dim italic")


def show_result(
    console: Console, result: RefineResult, *, show_reasoning: bool = False, failed: bool = False
) -> None:
    """Print the final response with its score and why the loop stopped.

    A typed result (`--schema`) is shown as its object, formatted JSON; with
    `show_reasoning`, the best attempt's reasoning is printed above it. With `failed`,
    the result is the best one of a run that ended with an error (printed after it); an
    interrupted run's (`stop_reason` "interrupted") is titled so too.
    """
    ended = "the run failed" if failed else f"stopped: {result.stop_reason}"
    so_far = failed or result.stop_reason == "interrupted"
    title = f"best response{' so far' if so_far else ''} — score {score_text(result.score)}" + (
        f", {result.verdict}" if result.verdict else ""
    )
    how = f"{ended}, {result.iterations} refinement round(s)"
    # The title sits in the box's top border: one too wide for the terminal would be cut
    # mid-word, so then how the loop ended goes on a line of its own below the box.
    below = len(title) + len(how) + 2 > console.width - TITLE_MARGIN
    if not below:
        title = f"{title}, {how}"
    best = next((a for a in result.attempts if a.index == result.best_index), None)
    if show_reasoning and best is not None and best.reasoning:
        console.print(_reasoning_text(best.reasoning), soft_wrap=True)
    shown = result.value
    if result.output is not None:
        shown = json.dumps(plain(result.output), ensure_ascii=False, indent=2)
    console.print(Panel(Text(shown), title=title, title_align="left"))
    if below:
        console.print(Text(how, style="dim"), soft_wrap=True)
    if result.feedback:
        console.print(Text("feedback: " + short(result.feedback, 300), style="dim"))
    if result.metadata.get("selection"):
        console.print(Text(selection_text(result.metadata["selection"]), style="dim"))
    calibration = calibration_text(result.metadata)
    if calibration:
        console.print(Text(calibration, style="dim"), soft_wrap=True)
    console.print(Text("spent: " + usage_text(result.usage), style="dim"))
    if any(attempt.rung is not None for attempt in result.attempts):
        shown = "by model: " + models_text(per_model(result.attempts))
        console.print(Text(shown, style="dim"), soft_wrap=True)


def calibration_text(metadata: Mapping[str, Any]) -> str:
    """One line on whether the result's PASS was calibrated (empty for a plain run).

    Example:
        >>> calibration_text({"calibration": {"n": 60, "kappa": 0.97, "alpha": 0.1,
        ...                   "threshold": 0.8, "bound": 0.079, "met": True}})
        'calibrated judge: a PASS needs 0.80 (60 labels, kappa 0.97, false-PASS bound 0.079 <= 0.1)'
        >>> calibration_text({"untrusted_pass": [{"attempt": 0, "stop": "passed"}]})
        'not trusted (uncalibrated judge): the passed of attempt #0'
    """
    parts = []
    summary = metadata.get("calibration")
    if summary:
        if summary.get("threshold") is None:
            parts.append(
                f"calibrated judge: alpha {summary.get('alpha')} not met with "
                f"{summary.get('n')} labels, so it passes nothing"
            )
        else:
            parts.append(
                f"calibrated judge: a PASS needs {summary['threshold']:.2f} ({summary.get('n')} "
                f"labels, kappa {summary.get('kappa'):.2f}, false-PASS bound "
                f"{summary.get('bound')} <= {summary.get('alpha')})"
            )
    refused = metadata.get("untrusted_pass") or []
    if refused:
        stops = ", ".join(f"the {r.get('stop')} of attempt #{r.get('attempt')}" for r in refused)
        parts.append(f"not trusted (uncalibrated judge): {stops}")
    return "; ".join(parts)


def selection_text(selection: Mapping[str, Any]) -> str:
    """One line on how `--select pairwise` chose the result.

    Example:
        >>> selection_text({"method": "pairwise", "candidates": [1, 2], "chosen": 2,
        ...                 "comparisons": [{"pair": [1, 2], "outcome": 2}]})
        'selection: pairwise among #1, #2 -> #2 (1 pair compared in both orders, 0 ties)'
    """
    candidates = ", ".join(f"#{c}" for c in selection.get("candidates") or [])
    comparisons = selection.get("comparisons") or []
    ties = sum(1 for c in comparisons if c.get("outcome") == "tie")
    text = (
        f"selection: {selection.get('method')} among {candidates or 'none'} -> "
        f"#{selection.get('chosen')} ({len(comparisons)} pair"
        f"{'' if len(comparisons) == 1 else 's'} compared in both orders, {ties} tie"
        f"{'' if ties == 1 else 's'})"
    )
    note = selection.get("note")
    return f"{text}; {note}" if note else text


def show_review(console: Console, payload: Mapping[str, Any]) -> None:
    """Print what a human review is about: the response, its score and feedback."""
    if payload.get("error"):
        console.print(Text(f"that answer was not accepted: {payload['error']}", style="red"))
    title = (
        f"review — score {score_text(payload.get('score'))}"
        + (f", {payload['verdict']}" if payload.get("verdict") else "")
        + (f", loop would stop: {payload['stop_reason']}" if payload.get("stop_reason") else "")
    )
    console.print(Panel(Text(str(payload.get("response", ""))), title=title, title_align="left"))
    if payload.get("feedback"):
        console.print(Text("feedback: " + short(str(payload["feedback"]), 300), style="dim"))
