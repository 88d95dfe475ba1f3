"""The command line's own error: a one-line message for the user and an exit code."""

from __future__ import annotations


class CliError(Exception):
    """A problem with the user's input or environment, shown as one line on stderr.

    Args:
        message: What was wrong, the value received, and how to fix it.
        exit_code: The process exit code (1 by default, 2 for usage errors).
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


_UNREACHABLE = frozenset(
    {"APIConnectionError", "APITimeoutError", "ConnectError", "ConnectTimeout", "ConnectionError"}
)
_MAX_MESSAGE = 600


def one_line(text: str, limit: int = _MAX_MESSAGE) -> str:
    """Collapse whitespace so a message fits on one line, and cut it to `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def is_unreachable(exc: BaseException) -> bool:
    """True if `exc` says the model server could not be reached at all."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if {cls.__name__ for cls in type(current).__mro__} & _UNREACHABLE:
            return True
        current = current.__cause__ or current.__context__
    return False


def describe_error(exc: BaseException, endpoint: str | None = None) -> str:
    """The one-line message shown for an error raised while running a loop.

    Args:
        exc: The error.
        endpoint: Where model requests were sent, named when it is unreachable.
    """
    if isinstance(exc, CliError):
        return one_line(str(exc))
    message = one_line(str(exc)) or type(exc).__name__
    if is_unreachable(exc):
        where = f" at {endpoint}" if endpoint else ""
        return one_line(
            f"cannot reach the model server{where} ({message}); check --base-url / "
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
