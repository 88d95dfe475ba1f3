"""The child side of `python_tests`: runs the candidate code and the tests in one process.

This file is copied into the run's working directory and executed there as a script by a
separate Python interpreter (`python -I _refine_harness.py config.json`); it is never
imported by the library. It uses only the standard library so that any Python 3.10+ can
run it (for example inside a container with another interpreter).

It first applies the resource limits named in the config, then loads `solution.py` as the
module `solution`, runs `tests.py` in a namespace that already holds the solution's
names, and calls each `test_*` function in turn. Progress and results are appended as
JSON lines to the results file, so the parent learns how far a run got even when the
candidate kills the process. Plain `assert a == b` statements in the tests are rewritten
to report the values compared (much like pytest does), because a bare AssertionError
tells the generator nothing.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import linecache
import os
import sys
import types
from typing import Any

SOLUTION = "solution.py"
TESTS = "tests.py"
_MAX_MESSAGE = 2000
_MAX_REPR = 300
_EXPLAIN = "__refine_explain__"


def _clip(text: str, limit: int = _MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _repr(value: Any) -> str:
    try:
        return _clip(repr(value), _MAX_REPR)
    except BaseException as exc:
        return f"<unprintable {type(value).__name__}: {type(exc).__name__}>"


class _Results:
    """Appends JSON lines to the results file.

    The descriptor is opened, and the functions used are bound, before any candidate
    code runs: the candidate may monkeypatch `os` or `json`.
    """

    def __init__(self, path: str, token: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._write = os.write
        self._dumps = json.dumps
        self._token = token

    def __call__(self, **record: Any) -> None:
        record["token"] = self._token
        self._write(self._fd, (self._dumps(record) + "\n").encode("utf-8", "replace"))


def _apply_limits(config: dict[str, Any]) -> dict[str, str]:
    """Apply the resource limits; returns the ones that could not be applied, with why."""
    skipped: dict[str, str] = {}
    try:
        import resource
        import signal
    except ImportError:  # pragma: no cover - Windows has no resource module
        return {"all": "the resource module is not available on this platform"}
    # CPython ignores SIGXFSZ at startup, which would turn "output too large" into an
    # OSError the candidate could swallow; restore the default so the kernel stops it.
    for name in ("SIGXFSZ", "SIGXCPU"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    limits = []
    if config.get("memory_mb"):
        memory = int(config["memory_mb"]) * 1024 * 1024
        limits.append(("RLIMIT_AS", memory, memory))
    if config.get("cpu_seconds"):
        cpu = int(config["cpu_seconds"])
        limits.append(("RLIMIT_CPU", cpu, cpu + 1))
    if config.get("max_file_bytes"):
        size = int(config["max_file_bytes"])
        limits.append(("RLIMIT_FSIZE", size, size))
    limits.append(("RLIMIT_CORE", 0, 0))
    for name, soft, hard in limits:
        if not hasattr(resource, name):
            skipped[name] = "not available on this platform"
            continue
        kind = getattr(resource, name)
        try:
            _, current_hard = resource.getrlimit(kind)
            if current_hard != resource.RLIM_INFINITY:
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.setrlimit(kind, (soft, hard))
        except (ValueError, OSError) as exc:  # e.g. RLIMIT_AS on macOS
            skipped[name] = str(exc)
    return skipped


class _AssertRewriter(ast.NodeTransformer):
    """Rewrites `assert left OP right` so a failure reports both values.

    `assert f(x) == 3` becomes `assert (_l := f(x)) == (_r := 3), explain(...)`: each
    side is evaluated once, as before, and the message is built only on failure.
    """

    def __init__(self) -> None:
        self.count = 0

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.count += 1
        source = ast.unparse(node.test)
        user_message = node.msg if node.msg is not None else ast.Constant(None)
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left_name, right_name = f"_refine_l{self.count}", f"_refine_r{self.count}"
            left, right = test.left, test.comparators[0]
            new_test: ast.expr = ast.Compare(
                left=ast.NamedExpr(ast.Name(left_name, ast.Store()), left),
                ops=test.ops,
                comparators=[ast.NamedExpr(ast.Name(right_name, ast.Store()), right)],
            )
            shown = [
                (ast.unparse(side), ast.Name(name, ast.Load()))
                for side, name in ((left, left_name), (right, right_name))
                if not isinstance(side, ast.Constant)
            ]
        elif not isinstance(test, ast.Constant):
            value_name = f"_refine_v{self.count}"
            new_test = ast.NamedExpr(ast.Name(value_name, ast.Store()), test)
            shown = [(source, ast.Name(value_name, ast.Load()))]
        else:
            return node
        message = ast.Call(
            func=ast.Name(_EXPLAIN, ast.Load()),
            args=[
                ast.Constant(source),
                user_message,
                ast.List([ast.Constant(text) for text, _ in shown], ast.Load()),
                ast.List([value for _, value in shown], ast.Load()),
            ],
            keywords=[],
        )
        return ast.copy_location(ast.Assert(test=new_test, msg=message), node)


def _explain(source: str, user_message: Any, texts: list[str], values: list[Any]) -> str:
    parts = [f"assert {source}"]
    shown = [
        f"{text} is {_repr(value)}"
        for text, value in zip(texts, values, strict=True)
        if text != _repr(value)
    ]
    if shown:
        parts.append("where " + " and ".join(shown))
    text = ", ".join(parts)
    if user_message is not None:
        text = f"{user_message} ({text})"
    return text


def _compile_tests(source: str) -> types.CodeType:
    try:
        tree = ast.parse(source, TESTS)
        tree = ast.fix_missing_locations(_AssertRewriter().visit(tree))
        return compile(tree, TESTS, "exec")
    except (SyntaxError, ValueError):  # pragma: no cover - fall back to the plain source
        return compile(source, TESTS, "exec")


def _location(tb: types.TracebackType | None, message: str) -> str:
    """Where an exception was raised: the last frame in the solution or the tests.

    The source line is included unless `message` already quotes it.
    """
    found = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in (SOLUTION, TESTS):
            found = tb
        tb = tb.tb_next
    if found is None:
        return ""
    filename, line = found.tb_frame.f_code.co_filename, found.tb_lineno
    text = linecache.getline(filename, line).strip()
    quoted = text.removeprefix("assert ") in message or (
        filename == TESTS and text.startswith("assert ") and "assert " in message
    )
    if not text or quoted:
        return f" ({filename}, line {line})"
    return f" ({filename}, line {line}: {_clip(text, 200)})"


def _describe(exc: BaseException, config: dict[str, Any]) -> str:
    name = type(exc).__name__
    if isinstance(exc, SyntaxError):
        where = f" ({exc.filename}, line {exc.lineno}" if exc.lineno else ""
        text = (exc.text or "").strip()
        if where:
            where += f": {_clip(text, 200)})" if text else ")"
        return f"SyntaxError: {exc.msg}{where}"
    message = str(exc)
    if isinstance(exc, MemoryError) and config.get("memory_mb"):
        message = f"out of memory (the limit is {config['memory_mb']} MB)"
    elif isinstance(exc, SystemExit):
        message = f"the code called sys.exit({'' if exc.code is None else _repr(exc.code)})"
    text = f"{name}: {message}" if message else name
    return _clip(text + _location(exc.__traceback__, text))


def _register_source(filename: str, source: str) -> None:
    # Tracebacks and messages quote source lines; register them so that works even if
    # the candidate changes directory or deletes its files.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as file:
        return file.read()


def _run_test(fn: Any) -> None:
    # An `async def test_*` gets its own event loop. This runs in the child process that
    # executes the candidate, never in the library's (sync or async) loop.
    result = fn()
    if result is not None and hasattr(result, "__await__"):
        import asyncio

        async def _await() -> Any:
            return await result

        asyncio.run(_await())


def main() -> None:
    """Run the solution and the tests named in the config file given as argv[1]."""
    with open(sys.argv[1], encoding="utf-8") as file:
        config = json.load(file)
    # The parent trusts only records carrying this run's token; the config that holds it
    # is gone before any candidate code runs, so code that writes its own "results"
    # (by accident or to game the tests) is ignored.
    emit = _Results(config["results"], config.pop("token"))
    with contextlib.suppress(OSError):
        os.remove(sys.argv[1])
    skipped = _apply_limits(config)
    emit(event="limits", skipped=skipped)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="backslashreplace")

    emit(event="phase", phase="solution")
    source = _read(SOLUTION)
    _register_source(SOLUTION, source)
    module = types.ModuleType("solution")
    module.__file__ = SOLUTION
    sys.modules["solution"] = module
    try:
        code = compile(source, SOLUTION, "exec")
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes in the source
        emit(event="fatal", phase="solution", kind="syntax", message=_describe(exc, config))
        return
    try:
        exec(code, module.__dict__)
    except BaseException as exc:
        emit(event="fatal", phase="solution", kind="error", message=_describe(exc, config))
        return

    emit(event="phase", phase="tests")
    tests_source = _read(TESTS)
    _register_source(TESTS, tests_source)
    namespace = {
        key: value
        for key, value in vars(module).items()
        if not (key.startswith("__") and key.endswith("__"))
    }
    namespace.update(
        __name__="tests", __file__=TESTS, __builtins__=builtins, **{_EXPLAIN: _explain}
    )
    try:
        exec(_compile_tests(tests_source), namespace)
    except BaseException as exc:
        emit(event="fatal", phase="tests", kind="error", message=_describe(exc, config))
        return

    for name in config["tests"]:
        emit(event="start", test=name)
        fn = namespace.get(name)
        if not callable(fn):
            emit(event="result", test=name, outcome="error", message=f"{name} is not a function")
            continue
        try:
            _run_test(fn)
        except AssertionError as exc:
            emit(event="result", test=name, outcome="failed", message=_describe(exc, config))
        except BaseException as exc:
            emit(event="result", test=name, outcome="error", message=_describe(exc, config))
        else:
            emit(event="result", test=name, outcome="passed", message="")
    emit(event="done")


if __name__ == "__main__":
    main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):  # output is best effort
            stream.flush()
    # Skip interpreter shutdown: the candidate's atexit hooks and finalizers must not
    # change the outcome once the results are written.
    os._exit(0)
