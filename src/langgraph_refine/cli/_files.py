"""Files the command line writes (reports, calibrations, pages): whole or not at all.

Each is written to a temporary file beside its target, synced, then renamed over it
(`os.replace`): a failure while writing (a row that cannot be encoded, a full disk, an
interrupt) leaves the old file as it was, never an empty or half-written one.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from langgraph_refine.cli._errors import USAGE, CliError


def write_whole(target: Path, text: str, *, option: str) -> None:
    r"""Write `text` to `target` whole, as UTF-8.

    Text no UTF-8 file can hold (a lone surrogate, which a provider's reply or a JSON
    line may carry) is written as its escape (`\udc80`), so any text renders.

    Args:
        target: The file to write (replaced if it exists).
        text: Its content.
        option: The option that named the file, for messages (`--html`).

    Raises:
        CliError: A usage error (exit code 2) if `target` is a folder or cannot be
            written; the old file is then unchanged.
    """

    def write(temporary: Path) -> None:
        with temporary.open("w", encoding="utf-8", errors="backslashreplace") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())

    replace_whole(target, write, option=option)


def replace_whole(target: Path, write: Callable[[Path], None], *, option: str) -> None:
    """Have `write` write a temporary file beside `target`, then rename it over `target`.

    Raises:
        CliError: A usage error (exit code 2) if `target` is a folder, its folder is
            missing, or writing fails; the temporary file is removed.
    """
    if target.is_dir():
        raise CliError(f"{option} {target} is a folder; give a file name", USAGE)
    if not target.parent.is_dir():
        raise CliError(f"{option} {target}: the folder {target.parent} does not exist", USAGE)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        # Made as a plain new file would be (the umask's permissions), not private.
        os.close(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        write(temporary)
        os.replace(temporary, target)
    except (OSError, ValueError) as exc:
        raise CliError(
            f"cannot write {option} {target}: {getattr(exc, 'strerror', None) or exc}", USAGE
        ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
