"""`{public_url}/http/{endpoint_id}[/sub/path]`: the HTTP interface of sources, any method.

A plain ASGI app in front of FastAPI: this is the hot path (every webhook a user receives), so it
skips routing, dependency injection and validation it does not need.
"""

from __future__ import annotations

import secrets
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from headwater.domain.errors import HeadwaterError, PayloadTooLarge, QuotaExceeded
from headwater.services.ingest import HttpAnswer, Ingest, http_event

PREFIX = "/http/"


class IngestApp:
    def __init__(self, ingest: Ingest, max_body_bytes: int, fallback: ASGIApp) -> None:
        self.ingest = ingest
        self.max_body_bytes = max_body_bytes
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.fallback(scope, receive, send)
            return
        endpoint_id, _, sub_path = scope["path"][len(PREFIX):].partition("/")
        request_id = "req_" + secrets.token_urlsafe(12)
        try:
            body = await self._body(scope, receive)
            event = http_event(
                scope["method"],
                "/" + sub_path,
                parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True),
                [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
                body,
            )
            answer = await self.ingest.receive(endpoint_id, event)
        except HeadwaterError as e:
            answer = HttpAnswer.json(e.status, {"error": e.message})
            if isinstance(e, QuotaExceeded):
                answer.headers["retry-after"] = str(e.retry_after)
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.items()
                   if k not in ("content-length", "transfer-encoding")]
        headers += [(b"content-length", str(len(answer.body)).encode()), (b"x-request-id", request_id.encode())]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body if scope["method"] != "HEAD" else b""})

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self.max_body_bytes
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                raise PayloadTooLarge(f"The body is over {limit} bytes.")
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"The body is over {limit} bytes.")
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)
