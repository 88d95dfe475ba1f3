"""`run --review`: ask the human in the terminal to approve, edit, reject or revise."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from langgraph_refine.cli._errors import CliError
from langgraph_refine.cli._view import show_review

ACTIONS = {
    "a": "approve",
    "approve": "approve",
    "e": "edit",
    "edit": "edit",
    "r": "reject",
    "reject": "reject",
    "v": "revise",
    "revise": "revise",
}
END_OF_EDIT = "."


class TerminalReviewer:
    """Answers the loop's review interrupt from lines typed on stdin.

    `edit` reads the new response over several lines, ended by a line holding only `.`
    (or end of input); `revise` reads one line of feedback for one more round.

    Args:
        console: Where the review and the prompts are shown.
        stdin: Where answers are read (the process's stdin by default).
    """

    def __init__(self, console: Console, stdin: TextIO | None = None) -> None:
        self.console = console
        self.stdin = stdin

    def _readline(self, prompt: str) -> str | None:
        self.console.print(Text(prompt, style="bold"), end="")
        self.console.file.flush()
        stream = self.stdin or sys.stdin
        line = stream.readline()
        if line and not stream.isatty():
            self.console.print(Text(line.rstrip("\r\n")))  # echo piped answers, as a terminal would
        return None if line == "" else line.rstrip("\r\n")

    def _require(self, prompt: str) -> str:
        line = self._readline(prompt)
        if line is None:
            self.console.print()  # end the prompt's line so the error stands on its own
            raise CliError(
                "--review needs answers on stdin, but the input ended; answer approve, edit, "
                "reject or revise (or run without --review)"
            )
        return line

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Show the review and return the resume value, e.g. `{"action": "approve"}`."""
        show_review(self.console, payload)
        self.console.print(Text(shown_attempt(payload), style="bold"))
        while True:
            answer = self._require("[a]pprove, [e]dit, [r]eject or re[v]ise? ").strip().lower()
            action = ACTIONS.get(answer)
            if action is None:
                self.console.print(
                    Text(f"unknown answer {answer!r}; type a, e, r or v", style="red")
                )
                continue
            if action == "edit":
                text = self._read_edit()
                if text.strip():
                    return {"action": "edit", "response": text}
                self.console.print(Text("the edited response is empty; choose again", style="red"))
                continue
            if action == "revise":
                feedback = self._require("what should the next attempt change? ").strip()
                if feedback:
                    return {"action": "revise", "feedback": feedback}
                self.console.print(Text("the feedback is empty; choose again", style="red"))
                continue
            return {"action": action}

    def _read_edit(self) -> str:
        self.console.print(
            Text(f"type the new response; end it with a line holding only '{END_OF_EDIT}'")
        )
        lines: list[str] = []
        while (line := self._readline("")) is not None and line != END_OF_EDIT:
            lines.append(line)
        return "\n".join(lines)


def shown_attempt(payload: Mapping[str, Any]) -> str:
    """Which attempt the review shows, and the best so far beside it when that is another.

    After a revise the review shows the revision (a person's request outranks a tie);
    approving approves what is shown.
    """
    attempt, best = payload.get("attempt"), payload.get("best_attempt")
    if attempt is None:
        return "no attempt to show"
    line = f"showing attempt {attempt}"
    if payload.get("mode") == "every_round":
        line += " (the latest)"
    if best is None or best == attempt:
        return line + (", the best so far" if best == attempt else "")
    best_score = payload.get("best_score")
    scored = "not scored" if best_score is None else f"score {best_score:.2f}"
    why = " (the revision you asked for)" if payload.get("mode") != "every_round" else ""
    return f"{line}{why}; the best so far is attempt {best} ({scored})"


Reviewer = Callable[[Mapping[str, Any]], Mapping[str, Any]]
