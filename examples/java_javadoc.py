"""Java code with Javadoc, judged by an LLM judge with PASS / NEEDS_IMPROVEMENT / FAIL.

The judge's criteria say what each verdict means; a PASS verdict stops the loop. A
regular-expression check is combined with it, so a reply without a `/** ... */` comment
that carries `@param` and `@return` tags can never pass on the judge's word alone (a
combination passes only when every part passes).

Run: `python examples/java_javadoc.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from langgraph_refine import RefineResult, refine
from langgraph_refine.evaluators import combine, llm_judge, matches_regex

try:
    from examples._common import default_model, show
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from _common import default_model, show  # type: ignore[no-redef,import-not-found]

TASK = (
    "Write a Java method `public static int clamp(int value, int min, int max)` that "
    "returns value limited to the range from min to max. Document it with a Javadoc "
    "comment (/** ... */): a summary sentence, an @param tag for each parameter and an "
    "@return tag. Reply with the method in one ```java block."
)

CRITERIA = """\
PASS: the method is valid Java, returns the clamped value, and its Javadoc comment has a
summary sentence, an @param tag for each of value, min and max, and an @return tag.
NEEDS_IMPROVEMENT: the method works but the Javadoc lacks the summary or one of the tags.
FAIL: the code is not valid Java, does not clamp, or has no Javadoc comment."""

JAVADOC = r"/\*\*[\s\S]*?@param[\s\S]*?@return[\s\S]*?\*/"


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the method until the judge passes it; print and return the result."""
    model = model or default_model()
    evaluator = combine(
        matches_regex(
            JAVADOC, description="contain a /** ... */ comment with @param and @return tags"
        ),
        llm_judge(model, criteria=CRITERIA),
    )
    result = refine(model, TASK, evaluator, max_iterations=2, patience=None)
    show(result)
    return result


if __name__ == "__main__":
    main()
