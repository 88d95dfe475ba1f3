"""An openevals judge in the loop: LangChain's evaluator library, plugged in as it is.

`openevals.llm.create_llm_as_judge` builds an evaluator that takes keyword-only
`inputs` and `outputs` and returns `{"key", "score", "comment"}`. The loop accepts such
evaluators anywhere an evaluator goes: it calls them with `inputs` = the task and
`outputs` = the response, a boolean score counts as 1.0 or 0.0, and the comment is the
feedback the next round sees. Here openevals' own conciseness rubric judges (on the same
model), combined with a word count, whose feedback says what to change.

Needs the `openevals` extra: `pip install 'langgraph-refine[openevals]'`.
Run: `python examples/openevals_judge.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from openevals.llm import create_llm_as_judge
from openevals.prompts import CONCISENESS_PROMPT

from langgraph_refine import RefineResult, refine
from langgraph_refine.evaluators import word_count

try:
    from examples._common import default_model, show
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from _common import default_model, show  # type: ignore[no-redef,import-not-found]

TASK = "In one or two sentences, say why the sky looks blue on a clear day."


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the answer with openevals' conciseness judge and a word count."""
    model = model or default_model()
    conciseness = create_llm_as_judge(
        prompt=CONCISENESS_PROMPT,
        judge=model,
        feedback_key="conciseness",
        # A 135M model writing its reasoning rambles past any token limit: ask for the
        # verdict alone (a boolean score). With a larger judge, keep the reasoning: it
        # becomes the comment, and so the feedback the next round sees.
        use_reasoning=False,
        # The provider's own structured output: llama.cpp enforces the reply's schema.
        structured_output_kwargs={"method": "json_schema"},
    )
    result = refine(
        model,
        TASK,
        [conciseness, word_count(10, 45)],
        target_score=1.0,
        max_iterations=2,
        patience=None,
    )
    show(result)
    return result


if __name__ == "__main__":
    main()
