"""The command line's own error: a one-line message for the user and an exit code."""

from __future__ import annotations

import re
from typing import Any


class CliError(Exception):
    """A problem with the user's input or environment, shown as one line on stderr.

    Args:
        message: What was wrong, the value received, and how to fix it.
        exit_code: The process exit code (see `USAGE` and docs/cli.md).
        command: A command to paste into a shell, printed after the message as it is
            (never folded onto one line: a task's line breaks and spaces are its own).
        result: The best result so far of a run that ended so (a `RefineResult`), shown
            before the message.
    """

    def __init__(
        self, message: str, exit_code: int = 1, *, command: str = "", result: Any = None
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.command = command
        self.result = result


FAILED = 1
"""Exit code: the command ran and failed (a failed or unjudged task, nothing judged)."""
USAGE = 2
"""Exit code: a usage error (a missing or unusable input, file or folder; no model; a
flag that needs another; a bad value), found before any model call."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command runs, so it stops as on Ctrl-C (exit code 143)."""


_UNREACHABLE = frozenset(
    {"APIConnectionError", "APITimeoutError", "ConnectError", "ConnectTimeout", "ConnectionError"}
)
_CONNECT = frozenset({"ConnectError", "ConnectTimeout"})
_TOO_SLOW = frozenset({"APITimeoutError", "ReadTimeout", "WriteTimeout", "PoolTimeout"})
_MAX_MESSAGE = 600


def one_line(text: str, limit: int = _MAX_MESSAGE) -> str:
    """Collapse whitespace so a message fits on one line, and cut it to `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def given(value: object) -> str:
    """A value the user gave, for a message: JSON's words for null, true and false.

    A batch line's values are JSON, and a flag's are text; Python's `None` or `True`
    appear in neither.

    Example:
        >>> given(None), given(True), given("abc"), given(3)
        ('null', 'true', "'abc'", '3')
    """
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def _names(exc: BaseException) -> set[str]:
    """The class names (with their bases) of `exc` and of the errors it was raised from."""
    names: set[str] = set()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names |= {cls.__name__ for cls in type(current).__mro__}
        current = current.__cause__ or current.__context__
    return names


def is_too_slow(exc: BaseException) -> bool:
    """True if the model server was reached but did not answer within the timeout.

    OpenAI's client reports both a connection that never opened and a reply that never
    came as `APITimeoutError`; the httpx error under it tells them apart.
    """
    names = _names(exc)
    if names & _CONNECT:
        return False
    return bool(names & _TOO_SLOW)


def is_unreachable(exc: BaseException) -> bool:
    """True if `exc` says the model server could not be reached at all."""
    return not is_too_slow(exc) and bool(_names(exc) & _UNREACHABLE)


_PYTHON_HINT = re.compile(r"[;,]? *the best result so far is in this error's \.result")


def cli_words(message: str) -> str:
    """A library message in the command line's words: no pointer to Python's `.result`.

    The command line shows a failed run's best result before its error line (`run`),
    and keeps it in the task's row (`batch`, then `report`).

    Example:
        >>> cli_words("budget exhausted; the best result so far is in this error's .result")
        'budget exhausted; the attempts so far are kept'
    """
    return _PYTHON_HINT.sub("; the attempts so far are kept", message)


def cause_text(exc: BaseException) -> str:
    """What went wrong, from `exc` down to its root cause, on one line.

    A client's own words ("Connection error.") are followed by what the layer under
    them said ("[Errno 111] Connection refused"); an error without words is named by its
    type, so a message never shows an empty cause.

    Example:
        >>> try:
        ...     try:
        ...         raise OSError(111, "Connection refused")
        ...     except OSError as inner:
        ...         raise ConnectionError("Connection error.") from inner
        ... except ConnectionError as exc:
        ...     cause_text(exc)
        'Connection error: [Errno 111] Connection refused'
    """
    texts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        text = one_line(str(current), 200)
        if text and not any(text in earlier for earlier in texts):
            texts.append(text)
        current = current.__cause__ or current.__context__
    if not texts:
        return type(exc).__name__
    if len(texts) == 1:
        return texts[0]
    return f"{texts[0].rstrip('.')}: {texts[-1]}"  # the client's words, then the root's


def describe_error(
    exc: BaseException, endpoint: str | None = None, timeout: float | None = None
) -> str:
    """The one-line message shown for an error raised while running a loop.

    Args:
        exc: The error.
        endpoint: Where model requests were sent, named when it is unreachable or slow.
        timeout: The `--timeout` in force, named when a call ran past it.
    """
    if isinstance(exc, CliError):
        return cli_words(one_line(str(exc)))
    message = cli_words(one_line(str(exc))) or type(exc).__name__
    if is_too_slow(exc):
        where = f" at {endpoint}" if endpoint else ""
        limit = f"{timeout:g} seconds" if timeout is not None else "the time allowed"
        return one_line(
            f"the model server{where} answered too slowly: a model call got no reply within "
            f"{limit} ({message}); it is running, so raise --timeout (or lower --max-tokens "
            "for shorter replies)"
        )
    if is_unreachable(exc):
        where = f" at {endpoint}" if endpoint else ""
        return one_line(
            f"cannot reach the model server{where} ({cause_text(exc)}); check --base-url / "
            "OPENAI_BASE_URL and that the server is running"
        )
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if f"HTTP {status}" in message:  # the loop already named the status and the step
            return message
        return one_line(f"the model server answered HTTP {status}: {message}")
    if isinstance(exc, ValueError | TypeError):
        return message
    return one_line(f"{type(exc).__name__}: {message}")
