"""`{public_url}/http/{endpoint_id}[/sub/path]`: the HTTP interface of sources, any method.

A plain ASGI app in front of FastAPI: this is the hot path (every webhook a user receives), so it
skips routing, dependency injection and validation it does not need.
"""

from __future__ import annotations

import secrets
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from headwater.api.body import read_body
from headwater.domain.errors import HeadwaterError, PayloadTooLarge, QuotaExceeded
from headwater.domain.http_interface import NO_BODY, HttpAnswer, http_event, wire_headers
from headwater.services.ingest import Ingest

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
            answer = HttpAnswer.json(e.status, {"error": e.message, **({"details": e.details} if e.details else {})})
            if isinstance(e, QuotaExceeded):
                answer.headers["retry-after"] = str(e.retry_after)
        headers = wire_headers(answer, request_id)
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        bodyless = scope["method"] == "HEAD" or answer.status in NO_BODY
        await send({"type": "http.response.body", "body": b"" if bodyless else answer.body})

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self.max_body_bytes
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                raise PayloadTooLarge(f"The body is over {limit} bytes.")
        body = await read_body(receive, limit)
        if body is None:
            raise PayloadTooLarge(f"The body is over {limit} bytes.")
        return body
