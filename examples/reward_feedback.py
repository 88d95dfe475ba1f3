"""Reward-model feedback with the full response history.

Some evaluators give only a number: a served reward model scores `(task, response)` and
says nothing about what to change. `evaluators.reward_model(fn)` wraps such a function;
with `memory="all"` every refinement prompt shows all earlier attempts with their
scores, so the model can compare what it tried and move towards what scored higher.

The task is a data correction: fix the misspelled city names in a small CSV. The reward
function here is deterministic and local (+1 per correct row, -0.5 per stray line), a
stand-in for a reward model served elsewhere; pass your own `fn` to use a real one.

Run: `python examples/reward_feedback.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from langgraph_refine import RefineResult, refine
from langgraph_refine.evaluators import reward_model

try:
    from examples._common import default_model, show
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from _common import default_model, show  # type: ignore[no-redef,import-not-found]

HEADER = ("city", "country")
ROWS = [("Paris", "France"), ("Berlin", "Germany"), ("Madrid", "Spain"), ("Rome", "Italy")]
MISSPELT = ["Pariss,France", "Berln,Germany", "Madird,Spain", "Rom,Italy"]

TASK = (
    "Fix the spelling of the city names in this CSV. Keep the header and the same rows, "
    "change nothing else, and reply with the corrected CSV only.\n\n"
    + "\n".join([",".join(HEADER), *MISSPELT])
)


def correction_reward(task: str, response: str) -> float:
    """Reward a corrected CSV: +1 per correct data row, -0.5 per line that does not belong.

    A missing header costs 0.5 as well. The range is [-inf, 4]; `reward_model` maps
    [-2, 4] onto [0, 1] and clamps the rest.
    """
    lines = [line.strip() for line in response.splitlines() if line.strip() and "```" not in line]
    cells = [tuple(part.strip() for part in line.split(",")) for line in lines]
    correct = {row for row in cells if row in ROWS}
    stray = sum(1 for row in cells if row not in ROWS and row != HEADER)
    header = 0.0 if HEADER in cells else -0.5
    return len(correct) - 0.5 * stray + header


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the correction towards the highest reward; print and return the result."""
    result = refine(
        model or default_model(),
        TASK,
        reward_model(correction_reward, low=-2.0, high=4.0),
        memory="all",
        strategy="chain",  # every round refines the last, seeing the whole history
        target_score=1.0,
        max_iterations=2,
        patience=None,
    )
    show(result)
    return result


if __name__ == "__main__":
    main()
