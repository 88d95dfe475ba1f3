"""The Turing-test paragraph: refine towards an 80 to 200 word target.

The evaluator is `word_count(80, 200)`: 1.0 inside the range, less the further outside
it, with feedback that says how many words to add or cut. The loop stops as soon as a
paragraph is inside the range (`target_score=1.0`), or after two refinement rounds.

Run: `python examples/turing_paragraph.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from langgraph_refine import RefineResult, refine
from langgraph_refine.evaluators import word_count

try:
    from examples._common import default_model, show
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from _common import default_model, show  # type: ignore[no-redef,import-not-found]

TASK = (
    "Write one paragraph of 80 to 200 words that explains the Turing test: who proposed "
    "it, how it works, and one criticism of it."
)


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the paragraph until its length is in range; print and return the result."""
    result = refine(
        model or default_model(),
        TASK,
        word_count(80, 200),
        target_score=1.0,
        max_iterations=2,
        patience=None,
    )
    show(result)
    return result


if __name__ == "__main__":
    main()
