"""`python_tests`: run the candidate code against unit tests in a separate Python process.

What this gives is isolation, not a security sandbox. The code runs in its own
interpreter (`python -I`), in a fresh temporary directory, with a minimal environment (no
inherited API keys or other variables), a wall-clock timeout, CPU, memory and file-size
limits, and its own process group that is killed afterwards. That protects the loop from
accidents: crashes, infinite loops, `os._exit`, runaway memory or output. It does not
stop deliberately hostile code, which can still read and write files the user can,
open network connections and so on. For untrusted code, pass a `runner` that executes
the run somewhere stronger (a container or VM without network); see `RunRequest`.

The resource limits are applied by the harness script itself (`resource.setrlimit`, first
thing in the child, before any candidate code runs) rather than in a `preexec_fn`: that
way they hold under any runner, containers included, and the parent avoids `preexec_fn`,
which is unsafe in a process with threads (LangGraph runs sync nodes in a thread pool).
"""

from __future__ import annotations

import ast
import functools
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from langgraph_refine._fences import first_block
from langgraph_refine._state import Evaluation
from langgraph_refine.evaluators._base import BaseEvaluator

HARNESS = "_refine_harness.py"
CONFIG = "config.json"
RESULTS = "results.jsonl"
_PYTHON_LANGS = frozenset({"python", "py", "python3", "py3"})
_MAX_OUTPUT_BYTES = 1024 * 1024
_MAX_RESULTS_BYTES = 4 * 1024 * 1024
_TAIL_CHARS = 1500


@dataclass(frozen=True)
class RunRequest:
    r"""One run for a runner to execute: a Python interpreter, in a prepared directory.

    The directory holds `solution.py` (the candidate code), `tests.py`, the harness
    script and its config. A runner must run `python <args>` with `workdir` as the current
    directory (for a container: mount `workdir` and set it as the working directory),
    with exactly the environment `env`, and stop it after `timeout` seconds. The harness
    writes its results into `workdir`, so a container must mount it writable.

    Attributes:
        workdir: The prepared directory.
        args: Arguments for the Python interpreter, e.g. `["-I", "_refine_harness.py",
            "config.json"]`; paths are relative to `workdir`.
        env: The complete environment for the process.
        timeout: Wall-clock seconds allowed.

    Example:
        >>> def logging_runner(request: RunRequest) -> RunOutcome:
        ...     print(request.args[0], request.timeout, "OPENAI_API_KEY" in request.env)
        ...     return LocalRunner()(request)
        >>> ev = python_tests("def test_a():\n    assert a == 1", timeout=3, runner=logging_runner)
        >>> ev.evaluate("a = 1", {}).score
        -I 3.0 False
        1.0
    """

    workdir: Path
    args: list[str]
    env: dict[str, str]
    timeout: float


@dataclass(frozen=True)
class RunOutcome:
    r"""How a run ended, as reported by a runner.

    Attributes:
        returncode: The process's exit code; negative means killed by that signal
            (POSIX); None if unknown.
        timed_out: True if the runner stopped the process at the timeout.
        stdout: The end of what the process wrote to stdout (may be empty).
        stderr: The end of what it wrote to stderr (may be empty).

    Example:
        >>> ev = python_tests("def test_a():\n    pass", runner=lambda r: RunOutcome(-9))
        >>> ev.evaluate("x = 1", {}).feedback.split(":")[0]
        'The process was killed before the tests started'
    """

    returncode: int | None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""


Runner = Callable[[RunRequest], RunOutcome]
"""Executes a `RunRequest` and reports its `RunOutcome`."""


def _tail(path: Path, limit: int = _TAIL_CHARS) -> str:
    try:
        with path.open("rb") as file:
            file.seek(0, os.SEEK_END)
            size = file.tell()
            file.seek(max(0, size - limit * 4))
            text = file.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return text[-limit:]


@dataclass(frozen=True)
class LocalRunner:
    r"""The default runner: a child process of this one, in its own process group.

    Output goes to files in the working directory (never into this process's memory),
    and the whole process group is killed when the run ends, so stray children of the
    candidate do not outlive it.

    Args:
        python: The interpreter to run; the current one by default.

    Example:
        >>> from langgraph_refine.evaluators import LocalRunner, python_tests
        >>> ev = python_tests("def test_one():\n    assert one() == 1",
        ...                   runner=LocalRunner(python=sys.executable))
        >>> ev.evaluate("def one():\n    return 1", {}).score
        1.0
    """

    python: str = field(default_factory=lambda: sys.executable)

    def __call__(self, request: RunRequest) -> RunOutcome:
        """Run the request and wait for it (at most `request.timeout` seconds)."""
        out_path, err_path = request.workdir / "stdout.txt", request.workdir / "stderr.txt"
        posix = os.name == "posix"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                [self.python, *request.args],
                cwd=request.workdir,
                env=request.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                close_fds=True,
                start_new_session=posix,
            )
            timed_out = False
            try:
                returncode = process.wait(timeout=request.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(process, group=posix)
                returncode = process.wait()
            finally:
                if process.poll() is None:  # interrupted while waiting
                    _kill(process, group=posix)
                    process.wait()
                if posix:
                    _kill(process, group=True)  # stray children of the candidate
        return RunOutcome(returncode, timed_out, _tail(out_path), _tail(err_path))


def _kill(process: subprocess.Popen[bytes], *, group: bool) -> None:
    try:
        if group:
            # The group id is the child's pid; the kernel does not reuse it while any
            # process of the group is alive, so this reaches only what we started.
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover - non-POSIX
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _minimal_env(workdir: Path) -> dict[str, str]:
    """An environment with nothing inherited that could hold a secret."""
    env = {
        "PATH": os.defpath,
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    if os.name == "nt":  # pragma: no cover - Windows needs these to start Python at all
        for name in ("SYSTEMROOT", "SYSTEMDRIVE"):
            if name in os.environ:
                env[name] = os.environ[name]
    return env


def find_test_names(tests: str) -> list[str]:
    r"""The names of the top-level `test_*` functions defined in `tests`, in order.

    Raises:
        ValueError: If `tests` is not valid Python or defines no `test_*` function.

    Example:
        >>> find_test_names("def helper(): pass\ndef test_a(): pass\nasync def test_b(): pass")
        ['test_a', 'test_b']
    """
    try:
        tree = ast.parse(tests, "tests.py")
    except SyntaxError as exc:
        raise ValueError(
            f"python_tests: the tests are not valid Python: {exc.msg} (line {exc.lineno}: "
            f"{(exc.text or '').strip()!r})"
        ) from exc
    names: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if node.name.startswith("test_") and node.name not in names:
            names.append(node.name)  # a redefinition replaces the earlier one: count it once
    if not names:
        raise ValueError(
            "python_tests: the tests define no test_* function; write them as top-level "
            "functions such as `def test_add(): assert add(1, 2) == 3`"
        )
    return names


def extract_code(response: str) -> tuple[str, str]:
    """The code to test, and where it came from.

    That is the first fenced python block, else the first unlabelled block, else the
    whole response.
    """
    block = first_block(response, _PYTHON_LANGS)
    if block is not None:
        where = "fenced python block" if block.lang else "fenced block"
        return textwrap.dedent(block.body), where
    return textwrap.dedent(response), "whole response"


class PythonTests(BaseEvaluator):
    r"""Runs unit tests against the candidate code in a child process. See `python_tests`.

    Example:
        >>> PythonTests("def test_a():\n    pass\ndef test_b():\n    pass").test_names
        ['test_a', 'test_b']
    """

    name = "python_tests"

    def __init__(
        self,
        tests: str,
        *,
        timeout: float = 10.0,
        memory_mb: int | None = 1024,
        runner: Runner | None = None,
    ) -> None:
        if not isinstance(tests, str):
            raise ValueError(
                f"python_tests: tests must be Python source (a string), got {type(tests).__name__}"
            )
        tests = textwrap.dedent(tests)
        self.test_names = find_test_names(tests)
        self.tests = tests
        if (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ValueError(
                f"python_tests: timeout must be a positive number of seconds, got {timeout!r}"
            )
        if memory_mb is not None and (
            not isinstance(memory_mb, int) or isinstance(memory_mb, bool) or memory_mb < 16
        ):
            raise ValueError(
                f"python_tests: memory_mb must be an integer >= 16 (megabytes) or None for "
                f"no limit, got {memory_mb!r}"
            )
        if runner is not None and not callable(runner):
            raise ValueError(
                f"python_tests: runner must be a callable (RunRequest) -> RunOutcome, "
                f"got {type(runner).__name__}"
            )
        self.timeout = float(timeout)
        self.memory_mb = memory_mb
        self.runner: Runner = runner or LocalRunner()

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        code, source = extract_code(response)
        workdir = Path(tempfile.mkdtemp(prefix="refine-python-tests-"))
        token = secrets.token_hex(16)
        try:
            request = self._prepare(workdir, code, token)
            outcome = self.runner(request)
            records = [r for r in _read_records(workdir / RESULTS) if r.get("token") == token]
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        evaluation = self._interpret(records, outcome)
        hint = ""
        if source == "whole response" and "```" in response and evaluation.score == 0.0:
            hint = "\nPut the complete code in one ```python block."
        return evaluation.model_copy(
            update={
                "feedback": evaluation.feedback + hint,
                "details": {**evaluation.details, "code_source": source},
            }
        )

    def _prepare(self, workdir: Path, code: str, token: str) -> RunRequest:
        (workdir / HARNESS).write_text(_harness_source(), encoding="utf-8")
        (workdir / "solution.py").write_text(code, encoding="utf-8", errors="replace")
        (workdir / "tests.py").write_text(self.tests, encoding="utf-8")
        config = {
            "results": RESULTS,
            "token": token,
            "tests": self.test_names,
            "memory_mb": self.memory_mb,
            "cpu_seconds": math.ceil(self.timeout) + 1,
            # One limit covers every file the process writes: its output and the results.
            "max_file_bytes": _MAX_OUTPUT_BYTES + 8192 * len(self.test_names),
        }
        (workdir / CONFIG).write_text(json.dumps(config), encoding="utf-8")
        return RunRequest(
            workdir=workdir,
            args=["-I", HARNESS, CONFIG],
            env=_minimal_env(workdir),
            timeout=self.timeout,
        )

    def _interpret(self, records: list[dict[str, Any]], outcome: RunOutcome) -> Evaluation:
        total = len(self.test_names)
        results = {r["test"]: r for r in records if r.get("event") == "result" and "test" in r}
        passed = [n for n in self.test_names if results.get(n, {}).get("outcome") == "passed"]
        failed = [
            {"test": n, "message": str(results[n].get("message", ""))}
            for n in self.test_names
            if n in results and results[n].get("outcome") != "passed"
        ]
        details: dict[str, Any] = {
            "tests": total,
            "passed": passed,
            "failed": failed,
            "returncode": outcome.returncode,
            "timed_out": outcome.timed_out,
        }
        if any(r.get("event") == "done" for r in records):
            return Evaluation(
                score=len(passed) / total,
                feedback=_results_feedback(passed, failed, total),
                details={**details, "status": "completed"},
            )
        fatal = next((r for r in records if r.get("event") == "fatal"), None)
        if fatal is not None:
            status, feedback = _fatal_feedback(fatal)
        else:
            status, feedback = self._abnormal_feedback(records, outcome, passed)
        if outcome.stderr.strip() and fatal is None:
            feedback += "\nEnd of the error output:\n" + outcome.stderr.strip()[-_TAIL_CHARS:]
        return Evaluation(score=0.0, feedback=feedback, details={**details, "status": status})

    def _abnormal_feedback(
        self, records: list[dict[str, Any]], outcome: RunOutcome, passed: list[str]
    ) -> tuple[str, str]:
        where = _where(records)
        if outcome.timed_out:
            status = "timeout"
            text = (
                f"The run did not finish within {self.timeout:g} seconds; it was stopped {where}. "
                "Look for an infinite loop or a far too slow algorithm."
            )
        elif outcome.returncode is not None and outcome.returncode < 0:
            status = "killed"
            text = f"The process was killed {where}: {_signal_reason(-outcome.returncode, self)}."
        elif not records:
            status = "no_result"
            text = (
                f"The test process ended (exit code {outcome.returncode}) without reporting "
                "any result."
            )
        else:
            status = "exited"
            text = (
                f"The process exited with code {outcome.returncode} {where}, before the tests "
                "finished. Do not call os._exit(), sys.exit() or exit() in the code."
            )
        text += " No test result counts, so the score is 0."
        if passed:
            text += f" (Tests that passed before it stopped: {', '.join(passed)}.)"
        return status, text

    def __repr__(self) -> str:
        return f"python_tests(<{len(self.test_names)} tests>, timeout={self.timeout:g})"


@functools.cache
def _harness_source() -> str:
    return resources.files(__package__).joinpath("_harness.py").read_text("utf-8")


def _read_records(path: Path) -> list[dict[str, Any]]:
    try:
        with path.open("rb") as file:
            data = file.read(_MAX_RESULTS_BYTES)
    except OSError:
        return []
    records = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _where(records: list[dict[str, Any]]) -> str:
    started = [r["test"] for r in records if r.get("event") == "start"]
    finished = {r.get("test") for r in records if r.get("event") == "result"}
    if started and started[-1] not in finished:
        return f"while running {started[-1]}"
    phases = [r.get("phase") for r in records if r.get("event") == "phase"]
    if phases and phases[-1] == "solution":
        return "while running the code itself (before any test)"
    if phases and phases[-1] == "tests":
        return "while loading the tests"
    return "before the tests started"


def _signal_reason(number: int, evaluator: PythonTests) -> str:
    name = _signal_name(number)
    reasons = {
        "SIGXFSZ": f"it wrote more than {_MAX_OUTPUT_BYTES // (1024 * 1024)} MB of output; "
        "do not print so much",
        "SIGXCPU": f"it used more than {math.ceil(evaluator.timeout) + 1} seconds of CPU time",
        "SIGSEGV": "it crashed (segmentation fault), e.g. from unbounded recursion",
        "SIGKILL": "it was killed, most likely for using too much memory",
        "SIGABRT": "it aborted",
    }
    return reasons.get(name, f"signal {name}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _fatal_feedback(fatal: dict[str, Any]) -> tuple[str, str]:
    message = str(fatal.get("message", ""))
    if fatal.get("phase") == "solution" and fatal.get("kind") == "syntax":
        return "syntax_error", f"The code does not compile, so no test could run: {message}."
    if fatal.get("phase") == "solution":
        return "solution_error", (
            f"Running the code raised an error before any test ran: {message}. "
            "Module-level code must run without errors."
        )
    return "tests_error", (
        f"The tests could not be loaded with this code: {message}. Define every name the "
        "tests use, with the same names and signatures."
    )


def _results_feedback(passed: list[str], failed: list[dict[str, Any]], total: int) -> str:
    if not failed:
        return "The test passed." if total == 1 else f"All {total} tests passed."
    lines = [f"{len(failed)} of {total} {'test' if total == 1 else 'tests'} failed:"]
    lines += [f"- {f['test']}: {f['message']}" for f in failed]
    if passed:
        lines.append(f"Passed: {', '.join(passed)}.")
    return "\n".join(lines)


def python_tests(
    tests: str,
    *,
    timeout: float = 10.0,
    memory_mb: int | None = 1024,
    runner: Runner | None = None,
) -> PythonTests:
    r"""Run unit tests against the candidate code; score the fraction that pass.

    The code is the first fenced python block of the response (else the first
    unlabelled block, else the whole response). It is saved as `solution.py` and
    run as the module `solution`; then `tests` run in a namespace that already holds
    the solution's names (so tests may call `fib(10)` directly, or
    `from solution import fib`). Each top-level `test_*` function (sync or async, no
    arguments) is called in order; a test passes if it returns without raising.
    Failed `assert a == b` statements report both values. The feedback lists each
    failing test with its message, e.g.
    `- test_fib: AssertionError: assert fib(10) == 55, where fib(10) is 34`.

    Everything runs in a separate Python process (`python -I`) in a temporary directory,
    with a minimal environment (none of this process's variables, so no API keys), a
    wall-clock `timeout`, a CPU-time limit, a `memory_mb` address-space limit and a
    cap on output. A syntax error, an exception at import, a crash, an infinite loop,
    `os._exit` or huge output scores 0 with a message saying what happened; nothing
    the candidate does reaches this process.

    This is isolation, not a security sandbox: the code still runs as your user, can
    read your files and use the network. For untrusted code pass `runner`, a callable
    that executes a `RunRequest` somewhere stronger (e.g. a container with no network)
    and returns a `RunOutcome`.

    Args:
        tests: Python source defining `test_*` functions (plain `assert`s; pytest
            fixtures are not available).
        timeout: Wall-clock seconds for the whole run (> 0).
        memory_mb: Address-space limit in megabytes (>= 16), or None for no limit.
        runner: Executes the run; defaults to `LocalRunner()` (a local child process).

    Returns:
        The evaluator. `details` holds `passed` (names), `failed` (`{"test",
        "message"}` dicts), `tests` (count) and `status` (`"completed"`,
        `"syntax_error"`, `"solution_error"`, `"tests_error"`, `"timeout"`, `"killed"`,
        `"exited"` or `"no_result"`).

    Raises:
        ValueError: If `tests` does not parse or defines no `test_*` function, or
            `timeout`, `memory_mb` or `runner` is invalid.

    Example:
        >>> tests = '''
        ... def test_small():
        ...     assert fib(1) == 1
        ... def test_ten():
        ...     assert fib(10) == 55
        ... '''
        >>> ev = python_tests(tests, timeout=5)
        >>> result = ev.evaluate("```python\ndef fib(n):\n    return n\n```", {})
        >>> result.score
        0.5
        >>> print(result.feedback)
        1 of 2 tests failed:
        - test_ten: AssertionError: assert fib(10) == 55, where fib(10) is 10 (tests.py, line 5)
        Passed: test_small.
    """
    return PythonTests(tests, timeout=timeout, memory_mb=memory_mb, runner=runner)
