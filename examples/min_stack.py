"""A min-stack with O(1) `getMin`, checked by unit tests.

The evaluator is `python_tests`: the model's code (its first ```python block) runs in a
separate, time-limited process against the tests below; the score is the fraction that
pass, and the failures are the feedback for the next round. The O(1) test does not time
anything (timings would make the score depend on the machine): it pushes values that
count how often they are compared, so a `getMin` that scans the stack is caught exactly.

Run: `python examples/min_stack.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from langgraph_refine import RefineResult, refine
from langgraph_refine.evaluators import python_tests

try:
    from examples._common import default_model, show
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from _common import default_model, show  # type: ignore[no-redef,import-not-found]

TASK = (
    "Write a Python class MinStack with the methods push(x), pop(), top() and getMin(). "
    "pop() removes the top element and returns it; top() returns it without removing it; "
    "getMin() returns the smallest element in O(1) time, without scanning the stack. "
    "Reply with the complete class in one ```python block."
)

TESTS = '''
class Counted:
    """A number that counts every comparison made with it."""

    comparisons = 0

    def __init__(self, value):
        self.value = value

    def _other(self, other):
        Counted.comparisons += 1
        return other.value if isinstance(other, Counted) else other

    def __lt__(self, other):
        return self.value < self._other(other)

    def __le__(self, other):
        return self.value <= self._other(other)

    def __gt__(self, other):
        return self.value > self._other(other)

    def __ge__(self, other):
        return self.value >= self._other(other)

    def __eq__(self, other):
        return self.value == self._other(other)

    __hash__ = None

    def __repr__(self):
        return f"Counted({self.value})"


def test_push_and_top():
    stack = MinStack()
    stack.push(3)
    stack.push(5)
    assert stack.top() == 5


def test_get_min_tracks_the_minimum():
    stack = MinStack()
    for value in [5, 3, 7, 3, 8]:
        stack.push(value)
    assert stack.getMin() == 3


def test_pop_restores_the_previous_minimum():
    stack = MinStack()
    for value in [5, 2, 4, 1]:
        stack.push(value)
    assert stack.pop() == 1
    assert stack.getMin() == 2
    stack.pop()
    stack.pop()
    assert stack.getMin() == 5


def test_get_min_is_constant_time():
    stack = MinStack()
    for i in range(500):
        stack.push(Counted((i * 37) % 501))
    Counted.comparisons = 0
    for _ in range(100):
        stack.getMin()
    made = Counted.comparisons
    assert made <= 100, (
        f"100 getMin() calls on a 500-element stack made {made} comparisons; "
        "keep the running minimum so that getMin() does not scan the stack"
    )
'''


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the class until every test passes; print and return the result."""
    result = refine(
        model or default_model(),
        TASK,
        python_tests(TESTS, timeout=5.0),
        target_score=1.0,
        max_iterations=2,
        patience=None,
    )
    show(result)
    return result


if __name__ == "__main__":
    main()
