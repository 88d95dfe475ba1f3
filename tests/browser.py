"""A headless Chromium driven over the DevTools protocol, for what a chat user's browser does.

Enough of the protocol to open a page, run a script in it and collect the errors the
page threw (`Runtime.exceptionThrown`: an uncaught error in an event handler included),
as a user would see them in the console. Tests skip, saying why, where Chromium or the
`websockets` client is missing (`missing`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def browser_path() -> str | None:
    """The first Chromium-like browser on PATH, or None."""
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def missing() -> str | None:
    """Why a browser test cannot run here, or None."""
    if browser_path() is None:
        return f"no Chromium on PATH (looked for {', '.join(BROWSERS)}): install chromium"
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        return "the websockets package (the DevTools protocol's client) is not installed"
    return None


class Page:
    """One browser tab: navigate, evaluate, and the errors it threw so far."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.errors: list[str] = []
        self.console: list[str] = []
        self._id = 0
        self.call("Runtime.enable")
        self.call("Page.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one protocol command; the events that come before its answer are kept."""
        self._id += 1
        self.socket.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == self._id:
                if "error" in message:
                    raise AssertionError(f"{method} failed: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        params = message.get("params", {})
        if message.get("method") == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            thrown = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(str(thrown))
        elif message.get("method") == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value")) for a in params.get("args", [])))

    def open(self, url: str) -> None:
        """Navigate to `url` and wait for its load."""
        self.call("Page.navigate", url=url)
        self.evaluate(
            "new Promise(r => document.readyState === 'complete' ? r() : "
            "addEventListener('load', () => r()))"
        )

    def evaluate(self, script: str) -> Any:
        """The value of `script` (a promise is awaited); its error fails the test."""
        done = self.call(
            "Runtime.evaluate", expression=script, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in done:
            raise AssertionError(f"the page's script failed: {done['exceptionDetails']}")
        return done["result"].get("value")


@contextmanager
def chromium() -> Iterator[Page]:
    """A headless Chromium with one blank tab, closed at the end."""
    from websockets.sync.client import connect

    path = browser_path()
    assert path is not None, missing()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [
                path,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port = _devtools_port(Path(profile))
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
                targets = json.load(answer)
            page = next(t for t in targets if t.get("type") == "page")
            with connect(page["webSocketDebuggerUrl"], max_size=None) as socket:
                yield Page(socket)
        finally:
            process.terminate()
            process.wait(timeout=30)


def _devtools_port(profile: Path) -> int:
    """The port Chromium chose (`--remote-debugging-port=0` writes it to the profile)."""
    active = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if active.exists() and active.read_text().strip():
            return int(active.read_text().splitlines()[0])
        time.sleep(0.1)
    raise AssertionError("Chromium did not start its DevTools server within 30s")
