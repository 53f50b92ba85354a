"""ASGI middleware for every route: request ids, body limits, and JSON-only bodies on /v1."""

from __future__ import annotations

import json
import re
import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from headwater.domain.errors import PayloadTooLarge

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


async def _send_error(send: Send, status: int, message: str, request_id: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-request-id", request_id.encode()),
        ],
    })
    await send({"type": "http.response.body", "body": body})


class RequestGuard:
    """Sets `X-Request-Id`; refuses bodies over the limit (413) and non-JSON bodies on /v1 (415)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode(errors="replace") for k, v in scope["headers"]}
        incoming = headers.get("x-request-id", "")
        request_id = incoming if _SAFE_ID.match(incoming) else "req_" + secrets.token_urlsafe(12)
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        path: str = scope["path"]
        if path.startswith("/v1/") and scope["method"] in ("POST", "PUT", "PATCH"):
            length = headers.get("content-length")
            has_body = (length not in (None, "0")) or "chunked" in headers.get("transfer-encoding", "")
            if length and length.isdigit() and int(length) > self.max_body_bytes:
                await _send_error(send, 413, f"The body is over {self.max_body_bytes} bytes.", request_id)
                return
            content_type = headers.get("content-type", "").split(";")[0].strip().lower()
            if has_body and content_type != "application/json":
                await _send_error(send, 415, "Send the body as `Content-Type: application/json`.", request_id)
                return
            receive = self._limited(receive)
        await self.app(scope, receive, send_with_id)

    def _limited(self, receive: Receive) -> Receive:
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                raise PayloadTooLarge(f"The body is over {self.max_body_bytes} bytes.")
            return message

        return limited_receive
