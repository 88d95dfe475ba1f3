"""`python_tests`: real child processes running candidate code against unit tests.

Every test here starts a real Python interpreter; timeouts are kept small so the file
runs in a few seconds.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from langgraph_refine.evaluators import (
    LocalRunner,
    PythonTests,
    RunOutcome,
    RunRequest,
    python_tests,
)

FIB_TESTS = """
def test_base():
    assert fib(0) == 0
    assert fib(1) == 1

def test_ten():
    assert fib(10) == 55

def test_negative():
    try:
        fib(-1)
    except ValueError:
        return
    raise AssertionError("fib(-1) must raise ValueError")
"""

GOOD_FIB = """
def fib(n):
    if n < 0:
        raise ValueError("n must be >= 0")
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
"""


def fenced(code: str) -> str:
    return f"Here is the code:\n```python\n{code}\n```\nIt is O(n)."


# ------------------------------------------------------------------------------------------
# Scores and feedback
# ------------------------------------------------------------------------------------------


def test_all_tests_pass() -> None:
    result = python_tests(FIB_TESTS).evaluate(fenced(GOOD_FIB), {})
    assert result.score == 1.0
    assert result.feedback == "All 3 tests passed."
    assert result.details["passed"] == ["test_base", "test_ten", "test_negative"]
    assert result.details["failed"] == []
    assert result.details["status"] == "completed"
    assert result.details["code_source"] == "fenced python block"


def test_score_is_the_fraction_passing_and_feedback_names_failures() -> None:
    wrong = "def fib(n):\n    return n\n"
    result = python_tests(FIB_TESTS).evaluate(fenced(wrong), {})
    assert result.score == pytest.approx(1 / 3)
    assert result.details["passed"] == ["test_base"]
    assert [f["test"] for f in result.details["failed"]] == ["test_ten", "test_negative"]
    lines = result.feedback.splitlines()
    assert lines[0] == "2 of 3 tests failed:"
    # The failed comparison reports the value the code produced.
    assert lines[1].startswith(
        "- test_ten: AssertionError: assert fib(10) == 55, where fib(10) is 10"
    )
    assert lines[2].startswith(
        "- test_negative: AssertionError: fib(-1) must raise ValueError (tests.py, line"
    )
    assert lines[3] == "Passed: test_base."


def test_assertion_messages_and_plain_asserts() -> None:
    tests = """
def test_message():
    assert is_even(3), "3 should count as even here"

def test_plain():
    assert is_even(5)

def test_in():
    assert "x" in letters()
"""
    code = "def is_even(n):\n    return n % 2 == 0\n\ndef letters():\n    return ['a', 'b']\n"
    result = python_tests(tests).evaluate(code, {})
    messages = {f["test"]: f["message"] for f in result.details["failed"]}
    assert messages["test_message"].startswith(
        "AssertionError: 3 should count as even here (assert is_even(3), where is_even(3) is False)"
    )
    assert messages["test_plain"].startswith(
        "AssertionError: assert is_even(5), where is_even(5) is False"
    )
    assert messages["test_in"].startswith(
        "AssertionError: assert 'x' in letters(), where letters() is ['a', 'b']"
    )


def test_exceptions_in_the_code_are_reported_with_their_location() -> None:
    code = "def fib(n):\n    return 1 / 0\n"
    result = python_tests("def test_one():\n    assert fib(1) == 1\n").evaluate(code, {})
    assert result.score == 0.0
    message = result.details["failed"][0]["message"]
    assert message == ("ZeroDivisionError: division by zero (solution.py, line 2: return 1 / 0)")
    assert result.details["status"] == "completed"


def test_missing_function_is_a_name_error_per_test() -> None:
    result = python_tests(FIB_TESTS).evaluate("def fibonacci(n):\n    return n\n", {})
    assert result.score == 0.0
    assert "NameError: name 'fib' is not defined" in result.feedback


def test_tests_can_import_from_solution_and_be_async() -> None:
    tests = """
from solution import double
import asyncio

async def test_async():
    await asyncio.sleep(0)
    assert double(2) == 4

def test_sync():
    assert double(3) == 6
"""
    result = python_tests(tests).evaluate("def double(x):\n    return 2 * x\n", {})
    assert result.score == 1.0


def test_only_the_given_tests_run() -> None:
    # The candidate's own test_* functions neither run nor count.
    code = "def f():\n    return 1\n\ndef test_sneaky():\n    raise AssertionError\n"
    result = python_tests("def test_f():\n    assert f() == 1\n").evaluate(code, {})
    assert result.score == 1.0
    assert result.details["tests"] == 1


# ------------------------------------------------------------------------------------------
# Code extraction
# ------------------------------------------------------------------------------------------


def test_first_python_block_wins() -> None:
    text = (
        "```bash\npip install nothing\n```\n"
        f"```python\n{GOOD_FIB}\n```\n"
        "```python\ndef fib(n):\n    return -1\n```"
    )
    assert python_tests(FIB_TESTS).evaluate(text, {}).score == 1.0


def test_unlabelled_block_and_whole_response() -> None:
    ev = python_tests(FIB_TESTS)
    block = ev.evaluate(f"Code:\n```\n{GOOD_FIB}\n```", {})
    assert (block.score, block.details["code_source"]) == (1.0, "fenced block")
    whole = ev.evaluate(GOOD_FIB, {})
    assert (whole.score, whole.details["code_source"]) == (1.0, "whole response")


def test_indented_code_is_dedented() -> None:
    indented = "\n".join("    " + line for line in GOOD_FIB.splitlines())
    assert python_tests(FIB_TESTS).evaluate(indented, {}).score == 1.0


def test_code_in_another_language_block_gets_a_hint() -> None:
    result = python_tests(FIB_TESTS).evaluate("```java\nint fib(int n) {}\n```", {})
    assert result.score == 0.0
    assert result.feedback.endswith("Put the complete code in one ```python block.")


# ------------------------------------------------------------------------------------------
# Candidates that crash, hang or misbehave: score 0, a clear message, caller unharmed
# ------------------------------------------------------------------------------------------


def test_syntax_error() -> None:
    result = python_tests(FIB_TESTS).evaluate("```python\ndef fib(n)\n    return n\n```", {})
    assert result.score == 0.0
    assert result.details["status"] == "syntax_error"
    assert result.feedback.startswith("The code does not compile, so no test could run:")
    assert "SyntaxError" in result.feedback
    assert "solution.py, line 1: def fib(n)" in result.feedback


def test_exception_at_import() -> None:
    result = python_tests(FIB_TESTS).evaluate("import no_such_module_xyz\n", {})
    assert result.score == 0.0
    assert result.details["status"] == "solution_error"
    assert "ModuleNotFoundError: No module named 'no_such_module_xyz'" in result.feedback
    assert "before any test ran" in result.feedback


def test_tests_that_cannot_load() -> None:
    tests = "from solution import fib\n\ndef test_a():\n    assert fib(1) == 1\n"
    result = python_tests(tests).evaluate("def fibonacci(n):\n    return n\n", {})
    assert result.score == 0.0
    assert result.details["status"] == "tests_error"
    assert "cannot import name 'fib' from 'solution'" in result.feedback


def test_infinite_loop_times_out() -> None:
    code = "def fib(n):\n    while True:\n        pass\n"
    started = time.monotonic()
    result = python_tests(FIB_TESTS, timeout=1.0).evaluate(code, {})
    assert time.monotonic() - started < 6
    assert result.score == 0.0
    assert result.details["status"] == "timeout"
    assert result.details["timed_out"] is True
    assert "did not finish within 1 seconds" in result.feedback
    assert "while running test_base" in result.feedback
    assert "infinite loop" in result.feedback


def test_infinite_loop_at_import_times_out() -> None:
    result = python_tests(FIB_TESTS, timeout=1.0).evaluate("while True:\n    pass\n", {})
    assert result.details["status"] == "timeout"
    assert "while running the code itself (before any test)" in result.feedback


def test_os_exit_scores_zero_even_after_passing_tests() -> None:
    tests = "def test_a():\n    assert f(1) == 1\n\ndef test_b():\n    assert f(2) == 2\n"
    code = "import os\n\ndef f(n):\n    if n == 2:\n        os._exit(0)\n    return n\n"
    result = python_tests(tests).evaluate(code, {})
    assert result.score == 0.0
    assert result.details["status"] == "exited"
    assert result.details["returncode"] == 0
    assert "exited with code 0 while running test_b" in result.feedback
    assert "os._exit()" in result.feedback
    assert "Tests that passed before it stopped: test_a." in result.feedback


def test_os_exit_at_import() -> None:
    result = python_tests(FIB_TESTS).evaluate("import os\nos._exit(3)\n", {})
    assert result.score == 0.0
    assert "exited with code 3 while running the code itself" in result.feedback


def test_sys_exit_inside_a_test_fails_only_that_test() -> None:
    code = "import sys\n\ndef fib(n):\n    if n == 10:\n        sys.exit(1)\n    return n\n"
    result = python_tests(
        "def test_a():\n    assert fib(1) == 1\n\ndef test_b():\n    fib(10)\n"
    ).evaluate(code, {})
    assert result.score == 0.5
    assert "SystemExit: the code called sys.exit(1)" in result.feedback


def test_memory_exhaustion_at_import() -> None:
    code = "data = bytearray(512 * 1024 * 1024)\n"
    result = python_tests(FIB_TESTS, memory_mb=128).evaluate(code, {})
    assert result.score == 0.0
    assert result.details["status"] == "solution_error"
    assert "MemoryError: out of memory (the limit is 128 MB)" in result.feedback


def test_memory_exhaustion_inside_a_test() -> None:
    code = "def fib(n):\n    return len([0] * (10 ** 9))\n"
    result = python_tests("def test_a():\n    assert fib(1) == 1\n", memory_mb=128).evaluate(
        code, {}
    )
    assert result.score == 0.0
    assert "MemoryError: out of memory (the limit is 128 MB)" in result.feedback


def test_huge_output_is_stopped() -> None:
    code = "def fib(n):\n    while True:\n        print('x' * 100_000)\n"
    result = python_tests(FIB_TESTS, timeout=5).evaluate(code, {})
    assert result.score == 0.0
    assert result.details["status"] == "killed"
    assert "more than 1 MB of output" in result.feedback


def test_hard_crash_is_reported() -> None:
    code = "import ctypes\n\ndef fib(n):\n    return ctypes.string_at(0)\n"
    result = python_tests(FIB_TESTS).evaluate(code, {})
    assert result.score == 0.0
    assert result.details["status"] == "killed"
    assert "segmentation fault" in result.feedback


def test_no_inherited_secrets_and_isolated_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("LANGGRAPH_REFINE_FAKE_SECRET", "hunter2")
    tests = """
import os
import sys

def test_no_api_key():
    assert "OPENAI_API_KEY" not in os.environ

def test_no_secret_value_anywhere():
    assert "hunter2" not in repr(dict(os.environ))
    assert "sk-test-not-a-real-key" not in repr(dict(os.environ))

def test_isolated_mode():
    assert sys.flags.isolated == 1

def test_runs_in_its_own_temporary_directory():
    assert os.environ["HOME"] == os.getcwd()
    assert {"solution.py", "tests.py"} <= set(os.listdir("."))
    assert not os.path.exists("config.json")  # read and removed before the code ran
"""
    result = python_tests(tests).evaluate("x = 1\n", {})
    assert result.feedback == "All 4 tests passed."
    assert os.environ["OPENAI_API_KEY"] == "sk-test-not-a-real-key"  # the caller keeps it


def test_the_caller_is_unharmed(tmp_path: Path) -> None:
    cwd = os.getcwd()
    code = (
        "import os, sys\n"
        "os.chdir('/')\n"
        "os.environ.clear()\n"
        "sys.modules.clear()\n"
        "def fib(n):\n    return n\n"
    )
    python_tests(FIB_TESTS).evaluate(code, {})
    assert os.getcwd() == cwd
    assert "PATH" in os.environ
    assert "langgraph_refine" in sys.modules


def test_working_directory_is_removed_and_stray_processes_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "def fib(n):\n    return n\n"
    )
    workdirs: list[Path] = []

    def runner(request: RunRequest) -> RunOutcome:
        workdirs.append(request.workdir)
        return LocalRunner()(request)

    python_tests(FIB_TESTS, runner=runner).evaluate(code, {})
    assert not workdirs[0].exists()
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status  # a zombie is dead, just not reaped yet


def test_results_written_by_the_candidate_do_not_count() -> None:
    # Records written by the candidate (a fake pass, a fake "done") must not count.
    code = (
        "import json, os\n"
        "def fib(n):\n"
        "    with open('results.jsonl', 'a') as f:\n"
        "        for name in ('test_base', 'test_ten', 'test_negative'):\n"
        "            f.write(json.dumps({'event': 'result', 'test': name, 'outcome': 'passed'}))\n"
        "            f.write('\\n')\n"
        "        f.write(json.dumps({'event': 'done'}) + '\\n')\n"
        "    if n == 10:\n"
        "        os._exit(0)\n"
        "    return n\n"
    )
    result = python_tests(FIB_TESTS).evaluate(code, {})
    assert result.score == 0.0
    assert result.details["status"] == "exited"
    assert result.details["passed"] == ["test_base"]


# ------------------------------------------------------------------------------------------
# Runners
# ------------------------------------------------------------------------------------------


def test_runner_receives_a_prepared_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    seen: list[dict[str, Any]] = []

    def runner(request: RunRequest) -> RunOutcome:
        seen.append(
            {
                "args": request.args,
                "env": dict(request.env),
                "timeout": request.timeout,
                "files": sorted(p.name for p in request.workdir.iterdir()),
                "solution": (request.workdir / "solution.py").read_text(),
            }
        )
        return LocalRunner()(request)

    result = python_tests(FIB_TESTS, timeout=7, runner=runner).evaluate(fenced(GOOD_FIB), {})
    assert result.score == 1.0
    request = seen[0]
    assert request["args"][0] == "-I"
    assert request["timeout"] == 7.0
    assert "OPENAI_API_KEY" not in request["env"]
    assert set(request["env"]) <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL"}
    assert request["files"] == ["_refine_harness.py", "config.json", "solution.py", "tests.py"]
    assert request["solution"].strip() == GOOD_FIB.strip()


def test_runner_reporting_a_timeout() -> None:
    result = python_tests(FIB_TESTS, runner=lambda r: RunOutcome(None, timed_out=True)).evaluate(
        GOOD_FIB, {}
    )
    assert result.score == 0.0
    assert result.details["status"] == "timeout"


def test_runner_that_produced_no_results() -> None:
    outcome = RunOutcome(127, stderr="docker: image not found")
    result = python_tests(FIB_TESTS, runner=lambda r: outcome).evaluate(GOOD_FIB, {})
    assert result.score == 0.0
    assert result.details["status"] == "no_result"
    assert "without reporting any result" in result.feedback
    assert "docker: image not found" in result.feedback


def test_local_runner_with_an_explicit_interpreter() -> None:
    ev = python_tests(FIB_TESTS, runner=LocalRunner(python=sys.executable))
    assert ev.evaluate(GOOD_FIB, {}).score == 1.0


async def test_async_path() -> None:
    result = await python_tests(FIB_TESTS).aevaluate(fenced(GOOD_FIB), {})
    assert result.score == 1.0


# ------------------------------------------------------------------------------------------
# Construction
# ------------------------------------------------------------------------------------------


def test_test_names_are_found_with_ast() -> None:
    tests = """
import math

def helper():
    pass

def test_b():
    pass

async def test_a():
    pass

def test_b():  # redefined: still one test
    pass

class TestGrouped:
    def test_not_top_level(self):
        pass

test_not_a_function = 3
"""
    ev = python_tests(tests)
    assert isinstance(ev, PythonTests)
    assert ev.test_names == ["test_b", "test_a"]


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        ("def check():\n    assert True\n", "define no test_\\* function"),
        ("", "define no test_\\* function"),
        ("class TestX:\n    def test_a(self):\n        pass\n", "define no test_\\* function"),
        ("def test_a(:\n    pass\n", "tests are not valid Python"),
        (b"def test_a(): pass", "tests must be Python source \\(a string\\), got bytes"),
    ],
)
def test_bad_tests(tests: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        python_tests(tests)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "5"])
def test_bad_timeout(timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        python_tests(FIB_TESTS, timeout=timeout)


@pytest.mark.parametrize("memory_mb", [0, 8, 64.5, True])
def test_bad_memory_limit(memory_mb: Any) -> None:
    with pytest.raises(ValueError, match="memory_mb must be an integer >= 16"):
        python_tests(FIB_TESTS, memory_mb=memory_mb)


def test_bad_runner() -> None:
    with pytest.raises(ValueError, match="runner must be a callable"):
        python_tests(FIB_TESTS, runner=5)  # type: ignore[arg-type]


def test_no_memory_limit_is_allowed() -> None:
    assert python_tests(FIB_TESTS, memory_mb=None).evaluate(GOOD_FIB, {}).score == 1.0


def test_metadata() -> None:
    ev = python_tests(FIB_TESTS)
    assert ev.name == "python_tests"
    assert ev.calls_model is False
    assert repr(ev) == "python_tests(<3 tests>, timeout=10)"
