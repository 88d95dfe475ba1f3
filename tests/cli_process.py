"""The installed `langgraph-refine` command in a process of its own, as a user runs it.

The tests of what the command line promises (exit codes, files written whole, the
command printed after an interruption) run the console script the package installs, in
a real process, against a model server the test starts on loopback. The model variables
of the environment are cleared, so only the test's flags count; the folder of the
console script is first on `PATH`, so a pasted command finds it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.test_cli_helpers import MODEL_ENV, Script

BIN = Path(sys.executable).parent
COMMAND = shutil.which("langgraph-refine", path=str(BIN))


@dataclass
class Finished:
    """What a finished process of the command did."""

    code: int
    out: str
    err: str

    def lines(self) -> list[str]:
        """Stderr's non-empty lines."""
        return [line for line in self.err.splitlines() if line.strip()]


def environment() -> dict[str, str]:
    """The environment the command runs in: no model variables, its folder on `PATH`."""
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _argv(args: Sequence[Any]) -> list[str]:
    assert COMMAND, f"the langgraph-refine console script is not installed in {BIN}"
    return [COMMAND, *(str(a) for a in args)]


def run_command(*args: Any, timeout: float = 120, **popen: Any) -> Finished:
    """Run `langgraph-refine ARGS...` to its end (`popen`: more of `subprocess.run`'s keywords)."""
    proc = subprocess.run(
        _argv(args),
        capture_output=True,
        text=True,
        env=environment(),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        **popen,
    )
    return Finished(proc.returncode, proc.stdout, proc.stderr)


def run_in_shell(command: str, timeout: float = 120) -> Finished:
    """Run `command` as pasted into a POSIX shell (`/bin/sh -c`)."""
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Finished(proc.returncode, proc.stdout, proc.stderr)


def _default_sigint() -> None:
    # A suite started in the background ignores SIGINT, and so would its children.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_command(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start `langgraph-refine ARGS...`; its stdout and stderr are pipes."""
    return subprocess.Popen(
        _argv(args),
        env=environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
        **kwargs,
    )


def stop(proc: subprocess.Popen[bytes], sig: int, timeout: float = 20) -> Finished:
    """Send `sig` to a started command and collect what it printed."""
    try:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Finished(proc.returncode, out.decode(), err.decode())


def wait_until(condition: Callable[[], bool], timeout: float = 60) -> None:
    """Wait until `condition()` holds (fails the test after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def held_after(script: Script, calls: int, release: threading.Event) -> Script:
    """`script`, holding every request after the first `calls` until `release` (30 s at most).

    A process whose requests are held is still running when the test acts on it, however
    slowly the machine runs the processes the test starts.
    """
    seen = {"n": 0}
    lock = threading.Lock()

    def held(body: dict[str, Any]) -> Any:
        with lock:
            seen["n"] += 1
            n = seen["n"]
        if n > calls:
            release.wait(30)
        return script(body)

    return held
