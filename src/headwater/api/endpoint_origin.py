"""Every answer of a source's endpoint (`/http/...`) is kept out of the console's origin.

Endpoints are served from the same origin as the console (and the API), and a `customResponse`
source chooses its answer's body and headers: an HTML page with a script would run with the
console's storage, the API key included. So every `/http/` answer (the source's own, the default
`{"success": true}`, and every error: 404, 413, 429, 502, 504, a fault's 500) carries
`Content-Security-Policy: sandbox` (the page gets an opaque origin: no scripts, no storage, no
cookies of the console) and `X-Content-Type-Options: nosniff` (a body is never run as another type
than it says). A component may add its own CSP alongside (browsers enforce every policy sent, so
it can only narrow); it cannot remove, replace or weaken these two, nor send `Clear-Site-Data`
(which would wipe the console's storage). Applied as the outermost ASGI layer, at the last point
before the server, so no path inside (errors raised below FastAPI included) gets around it.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIX = "/http/"
SANDBOX = b"sandbox"
NOSNIFF = b"nosniff"
_DROPPED = {b"x-content-type-options", b"clear-site-data"}


def protect(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers of an endpoint answer as sent: the source's own (less the ones it may not set)
    plus the sandbox and nosniff. A CSP the source set stays, as a policy of its own."""
    kept = [(name, value) for name, value in headers if name.lower() not in _DROPPED]
    return [*kept, (b"content-security-policy", SANDBOX), (b"x-content-type-options", NOSNIFF)]


class EndpointOrigin:
    """ASGI middleware: `protect` on the answer of every request whose path is under /http/."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = protect(list(message.get("headers", [])))
            await send(message)

        await self.app(scope, receive, guarded)
