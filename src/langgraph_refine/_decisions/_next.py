"""The next attempt, decided once for the graph and the agent: its move, parent and form.

What the round chose (`_round.decided` writes the strategy's move and parent) and what a
reviewer asked (`_reviewed`) meet here: `next_attempt` says which attempt the next answer
refines, the kind of move it is recorded as, whether it is asked as edits, and what a
guided sample is told; `NextAttempt.read` reads the answer (its edits applied, the
loop's own prompt text taken out) and `NextAttempt.attempt` makes it the pending attempt.
The drivers only render it: the graph's generate step as a prompt, the agent as a turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from langgraph_refine._decisions._edits import asks_for_edits, read_edits
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._prompts import clean_reply
from langgraph_refine._decisions._view import LoopView
from langgraph_refine._result import best_feedback
from langgraph_refine._state import Attempt, Candidate, MoveKind, Usage
from langgraph_refine._typed import OutputSchema, Reply


class NextAttempt(NamedTuple):
    """The next answer, before it is written.

    Attributes:
        number: Its index (`Attempt.index`).
        move: How it is recorded (`Attempt.move`): `"revise"` for a reviewer's request,
            `"refine"` for a refinement, `"guided"` or `"sample"` for a fresh answer.
        parent: The attempt it refines (None: a fresh answer).
        edited: The attempt it is asked as edits to (`edits=`), or None: written whole.
        guidance: A guided sample's feedback (the best attempt's), else "".
        request: The reviewer's request it answers, or None.
    """

    number: int
    move: MoveKind
    parent: Attempt | None
    edited: Attempt | None
    guidance: str
    request: str | None

    def read(
        self,
        output: Any,
        whole: Callable[[Any], Reply],
        typed: OutputSchema | None,
        copied: frozenset[str],
    ) -> Reply:
        """The generator's `output` as a reply, the one reading of the graph and the agent.

        Args:
            output: What the generator returned.
            whole: Reads a whole answer (no edit blocks) into a reply.
            typed: The output schema, or None.
            copied: The loop's own prompt lines an answer copied back would carry
                (`_prompts.scaffolding`): they are taken out.
        """
        reply = (
            whole(output) if self.edited is None else read_edits(output, self.edited, typed, whole)
        )
        return clean_reply(reply, copied)

    def attempt(
        self,
        reply: Reply,
        *,
        model: str | None,
        rung: int | None,
        usage: Usage,
        candidates: Sequence[Reply] = (),
    ) -> Attempt:
        """The pending attempt this answer makes, before its evaluation.

        Args:
            reply: The answer, read (an invalid object or failed edits come evaluated FAIL).
            model: The model that wrote it, as the record names it.
            rung: Its rung on the ladder (None without one).
            usage: What writing it spent.
            candidates: Every candidate of the round when it sampled more than one.
        """
        return Attempt(
            index=self.number,
            response=reply.response,
            evaluation=reply.evaluation,
            output=reply.output,
            reasoning=reply.reasoning,
            edits=reply.edits,
            instruction=self.request,
            parent=self.parent.index if self.parent is not None else None,
            move=self.move,
            model=model,
            rung=rung,
            usage=usage,
            candidates=[
                Candidate(
                    response=c.response,
                    evaluation=c.evaluation,
                    output=c.output,
                    reasoning=c.reasoning,
                    edits=c.edits,
                )
                for c in candidates
            ]
            if len(candidates) > 1
            else [],
        )


def next_attempt(view: LoopView, options: LoopOptions, *, takes_prompt: bool = True) -> NextAttempt:
    """The next answer's move, parent, edit target and guidance.

    A reviewer's request always refines (the attempt they reviewed, else the latest);
    otherwise the strategy's choice stands.

    Args:
        view: The loop's state.
        options: The run's options (`edits`, `output_schema`).
        takes_prompt: False for a generator that builds its own prompt (a callable):
            it is never asked for edits.
    """
    parent_index = view.parent
    if view.request and parent_index is None and view.latest is not None:
        parent_index = view.latest.index
    parent = view.attempt(parent_index)
    move: MoveKind
    if parent is None:
        move = "guided" if view.move == "guided" else "sample"
    else:
        move = "revise" if view.request else "refine"
    edited = None
    if parent is not None and takes_prompt:  # a callable writes its own prompt: never edits
        edited = parent if asks_for_edits(options.edits, parent, options.output_schema) else None
    return NextAttempt(
        number=view.latest.index + 1 if view.latest is not None else 0,
        move=move,
        parent=parent,
        edited=edited,
        guidance=best_feedback(view.attempts) if move == "guided" else "",
        request=view.request,
    )
