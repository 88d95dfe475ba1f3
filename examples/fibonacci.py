"""Fibonacci code refined for speed and readability.

The task hands the model a correct but exponential recursive `fib`. Two evaluators are
combined: `python_tests` for correctness and speed (one test asks for `fib(90)`, which
the naive recursion cannot finish within the timeout, so a slow answer scores low with
feedback naming the test it was stuck in), and an `llm_judge` on readability. The loop
passes only when every test passes and the judge says PASS.

Run: `python examples/fibonacci.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from langgraph_refine import RefineResult, refine
from langgraph_refine.evaluators import combine, llm_judge, python_tests

try:
    from examples._common import default_model, show
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from _common import default_model, show  # type: ignore[no-redef,import-not-found]

SLOW_FIB = """def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)"""

TASK = (
    "This Python function is correct but far too slow for large n:\n\n"
    f"```python\n{SLOW_FIB}\n```\n\n"
    "Rewrite fib(n) so that it runs in linear time and is easy to read: clear variable "
    "names and a one-line docstring. Reply with the complete function in one ```python block."
)

TESTS = """
def test_small_values():
    assert [fib(n) for n in range(10)] == [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]


def test_large_n():
    # The naive recursion makes about 10**19 calls here: it cannot finish in time.
    assert fib(90) == 2880067194370816120


def test_very_large_n():
    assert fib(1000) % 1_000_000_007 == 517691607
"""

READABILITY = [
    "The code is easy to read: descriptive names, no needless cleverness.",
    "The function has a short docstring.",
    "The function does not call itself recursively.",
]


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the function for speed and readability; print and return the result."""
    model = model or default_model()
    evaluator = combine(
        python_tests(TESTS, timeout=3.0),
        llm_judge(model, criteria=READABILITY),
        weights=[0.7, 0.3],
    )
    result = refine(model, TASK, evaluator, target_score=0.95, max_iterations=2, patience=None)
    show(result)
    return result


if __name__ == "__main__":
    main()
