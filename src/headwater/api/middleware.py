"""ASGI middleware for every route: request ids, body limits, JSON-only bodies on /v1, and a last
guard that turns any unhandled fault into a 500 error body instead of a dropped connection."""

from __future__ import annotations

import json
import logging
import math
import re
import secrets
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from headwater.domain.http_interface import MAX_JSON_DEPTH, json_too_deep

log = logging.getLogger("headwater.api")

_SAFE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_SURROGATE = re.compile("[\ud800-\udfff]")


async def send_error(send: Send, status: int, message: str, request_id: str | None = None,
                     details: dict[str, list[str]] | None = None,
                     extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """An error body (DECISIONS) sent from below FastAPI, where its exception handlers do not reach."""
    body = json.dumps({"error": message, **({"details": details} if details else {})}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *(extra_headers or [])]
    if request_id:
        headers.append((b"x-request-id", request_id.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BadJson(ValueError):
    """A /v1 body that is JSON text but not something the service can hold: `field` says where."""

    def __init__(self, message: str, field: str = "body", problem: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.details = {field: [problem]}


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise BadJson(f"The number {text[:40]} in the request body is out of range.", "body", "number out of range")
    return value


def _no_constant(name: str) -> Any:
    raise BadJson(f"{name} is not JSON.", "body", f"{name} is not JSON")


def _surrogate_at(value: Any, path: str = "") -> str | None:
    """Where the first lone surrogate is (`name`, `configured_props.a.0`), or None. Only called once
    encoding has failed, so its cost does not matter."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return where or "body"
        elif isinstance(node, dict):
            for key, item in node.items():
                if _SURROGATE.search(key):
                    return where or "body"
                stack.append((f"{where}.{key}" if where else key, item))
        elif isinstance(node, list):
            stack.extend((f"{where}.{i}" if where else str(i), item) for i, item in enumerate(node))
    return None


def check_json_body(raw: bytes) -> None:
    """Refuses (BadJson, a 400) a body FastAPI would parse into something the service cannot hold:
    not UTF-8 JSON, nested past MAX_JSON_DEPTH (parsers recurse per level), NaN/Infinity or numbers
    out of float range (not JSON, and not encodable back), or lone surrogates (`"\\ud800"`), which no
    store or response can encode."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadJson("The request body is not valid JSON: it is not UTF-8.") from None
    if json_too_deep(text):
        raise BadJson(f"The request body nests deeper than {MAX_JSON_DEPTH} levels.", "body",
                      f"nested deeper than {MAX_JSON_DEPTH}")
    try:
        value = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except BadJson:
        raise
    except (ValueError, RecursionError):
        raise BadJson("The request body is not valid JSON.") from None
    if "\\u" in text:  # strict UTF-8 text has no surrogates: only escapes can make them
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            field = _surrogate_at(value) or "body"
            raise BadJson(f"`{field}` has a lone surrogate (\\ud800-\\udfff), which is not valid Unicode.", field,
                          "lone surrogate: not valid Unicode") from None


class RequestGuard:
    """Sets `X-Request-Id`. On /v1 writes: 413 for a body over the limit (declared or streamed),
    415 for a body that is not `application/json`, 400 for JSON the service cannot hold (see
    check_json_body). The body is read here, once and bounded, then replayed to the route."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        incoming = headers.get("x-request-id", "")
        request_id = incoming if _SAFE_ID.fullmatch(incoming) else "req_" + secrets.token_urlsafe(12)
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        path: str = scope["path"]
        if path.startswith("/v1/") and scope["method"] in ("POST", "PUT", "PATCH"):
            too_large = f"The body is over {self.max_body_bytes} bytes."
            length = headers.get("content-length")
            has_body = (length not in (None, "0")) or "chunked" in headers.get("transfer-encoding", "")
            if length and length.isdigit() and int(length) > self.max_body_bytes:
                await send_error(send, 413, too_large, request_id)
                return
            content_type = headers.get("content-type", "").split(";")[0].strip().lower()
            if has_body and content_type != "application/json":
                await send_error(send, 415, "Send the body as `Content-Type: application/json`.", request_id)
                return
            body, last = await self._read(receive)
            if body is None:
                await send_error(send, 413, too_large, request_id)
                return
            if body.strip():
                try:
                    check_json_body(body)
                except BadJson as e:
                    await send_error(send, 400, e.message, request_id, e.details)
                    return
            receive = _replay(body, last, receive)
        await self.app(scope, receive, send_with_id)

    async def _read(self, receive: Receive) -> tuple[bytes | None, Message | None]:
        """The whole body, or None once it passes the limit (a chunked body declares no length).
        Also the disconnect message if the client left, to hand on to the route."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks), message
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None, None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), None


def _replay(body: bytes, last: Message | None, receive: Receive) -> Receive:
    """A receive that gives the already-read body once, then whatever the connection says next."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    if last is not None:
        pending.append(last)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


class ContainFaults:
    """Outermost: a fault that escapes every handler is logged and answered 500 with an error body,
    and never reaches the server, which would drop the connection (and any keep-alive requests
    queued on it). A fault after the answer started can only be logged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            await send(message)
            if message["type"] == "http.response.start":
                started = True

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            if started:
                # FastAPI's handler (errors.server_fault) logged it and answered 500 before re-raising.
                log.debug("fault after the answer started on %s %s", scope["method"], scope["path"], exc_info=True)
                return
            log.exception("unhandled fault on %s %s", scope["method"], scope["path"])
            await send_error(send, 500, "The server failed while handling the request.")
