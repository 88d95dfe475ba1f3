"""The chat server's HTTP additions: the progress card's script, addressed to this server.

A chat loads a generative-UI component by asking the server (`POST /ui/<graph>`) for a
snippet of HTML that it puts in the page: a `<script>` that renders the component. LangGraph
Server answers with the script's path only (`src="/ui/<graph>/entrypoint.js"`), which the
browser resolves against the chat's own address; a chat served from elsewhere (LangChain's
agent-chat-ui on its own port, its hosted copy) then asks itself for the script, gets a
404, and shows an empty card. This middleware gives those paths the address the request
came to, so the browser fetches the script from this server (a `<script>` needs no CORS).

The snippet's script renders the component when it has loaded (its `onload` calls the
bundle's `render(name, shadowRootId)`), into the element the chat made for it. A chat
that removes that element first (agent-chat-ui does when a Refresh replaces the answer,
or when the card moves to the answer at the end) leaves the script loading; the bundle's
`render` then finds no element and throws `TypeError: Cannot read properties of null
(reading 'shadowRoot')`. So the middleware also makes the `onload` render only into an
element still in the page (`guarded_render`).

It is LangGraph Server's own extension point: `langgraph.json` names this app under
`"http": {"app": ...}`, and the server runs its middleware around every request; this one
touches only the answers of `POST /ui/<graph>`.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COMPONENT_REQUEST = re.compile(r"/ui/[^/]+")
"""The path a chat posts to for a component's HTML (`LoadExternalComponent`)."""

RELATIVE_ASSET = re.compile(rb'(src|href)="/ui/')

RENDER_CALL = re.compile(
    rb"onload='(?P<bundle>__LGUI_\w+)\.render\("
    rb"(?P<name>[^']*?), (?P<id>\"\{\{shadowRootId\}\}\")\)'"
)
"""The script's `onload`: `__LGUI_<graph>.render(<name>, "{{shadowRootId}}")`. The chat
fills the placeholder once (its first occurrence only), so a guard must not repeat it."""

GUARDED_RENDER = (
    rb"onload='(function(name,id){document.getElementById(id)&&\g<bundle>.render(name,id)})"
    rb"(\g<name>, \g<id>)'"
)


def absolute_assets(html: bytes, origin: str) -> bytes:
    """`html` with its `/ui/...` script and stylesheet paths prefixed with `origin`.

    Example:
        >>> absolute_assets(b'<script src="/ui/chat_agent/entrypoint.js">', "http://h:2024")
        b'<script src="http://h:2024/ui/chat_agent/entrypoint.js">'
    """
    return RELATIVE_ASSET.sub(rb'\1="' + origin.rstrip("/").encode() + rb"/ui/", html)


def guarded_render(html: bytes) -> bytes:
    """`html` whose script renders only into an element still in the page.

    Example:
        >>> call = b"__LGUI_g.render(&quot;card&quot;, " + b'"{{shadowRootId}}")'
        >>> guarded = guarded_render(b"<script onload='" + call + b"'>").decode()
        >>> guarded.count("{{shadowRootId}}"), "getElementById(id)&&__LGUI_g.render(" in guarded
        (1, True)
    """
    return RENDER_CALL.sub(GUARDED_RENDER, html)


class AbsoluteComponentAssets:
    """ASGI middleware: rewrites the answers to `POST /ui/<graph>` (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass a request on; hold a component request's answer to rewrite its body."""
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not COMPONENT_REQUEST.fullmatch(scope["path"])
        ):
            await self.app(scope, receive, send)
            return
        origin = str(Request(scope).base_url)
        start: dict[str, Any] = {}
        body = bytearray()

        async def rewrite(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)  # sent with the body, once its length is known
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body"):
                return
            html = guarded_render(absolute_assets(bytes(body), origin))
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(html)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": html})

        await self.app(scope, receive, rewrite)


app = Starlette(middleware=[Middleware(AbsoluteComponentAssets)])
"""The app `langgraph.json` names under `"http"`: no routes of its own, the middleware only."""
