"""API Gateway (HTTP API, payload format 2.0) in front of the functions: a request is matched
to the route template.yaml declares (the most specific one, else `$default`), turned into the
event API Gateway would send, and the handler's answer into the response; with API Gateway's
limits (10 MB request, 30 s integration) and its own error bodies."""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import Receive, Scope, Send

from headwater.api.body import read_body
from headwater.emulated.functions import Functions
from headwater.emulated.template import Route

log = logging.getLogger("headwater.emulated.gateway")

MAX_REQUEST_BYTES = 10 * 1024 * 1024
INTEGRATION_TIMEOUT_S = 30.0


class Gateway:
    def __init__(self, routes: list[Route], functions: Functions, domain: str) -> None:
        self.routes = routes
        self.functions = functions
        self.domain = domain

    def route(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            if route.path is None:
                return route, {}
            params = route.match(method, path)
            if params is not None:
                return route, params
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        body = await read_body(receive, MAX_REQUEST_BYTES)
        if body is None:
            await _answer(send, 413, {"content-type": "application/json"}, b'{"message":"Request Entity Too Large"}')
            return
        found = self.route(scope["method"], scope["path"])
        if found is None:
            await _answer(send, 404, {"content-type": "application/json"}, b'{"message":"Not Found"}')
            return
        route, params = found
        event = api_event(scope, body, route, params, self.domain)
        try:
            result = await self.functions.invoke_async(route.function, event, INTEGRATION_TIMEOUT_S)
        except TimeoutError:
            await _answer(send, 503, {"content-type": "application/json"}, b'{"message":"Service Unavailable"}')
            return
        except Exception:
            log.exception("%s failed on %s %s", route.function, scope["method"], scope["path"])
            await _answer(send, 500, {"content-type": "application/json"}, b'{"message":"Internal Server Error"}')
            return
        status, headers, payload = _response(result)
        await _answer(send, status, headers, b"" if scope["method"] == "HEAD" else payload)


def api_event(scope: Scope, body: bytes, route: Route, params: dict[str, str], domain: str) -> dict[str, Any]:
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name == "cookie":
            cookies += [c.strip() for c in value.split(";") if c.strip()]
        else:
            headers[name] = f"{headers[name]},{value}" if name in headers else value
    query = scope["query_string"].decode("latin-1")
    params_q: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        params_q[name] = f"{params_q[name]},{value}" if name in params_q else value
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.key,
        "rawPath": scope["path"],
        "rawQueryString": query,
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012", "apiId": "emulated", "domainName": domain,
            "domainPrefix": domain.split(".")[0],
            "http": {"method": scope["method"], "path": scope["path"], "protocol": "HTTP/1.1",
                     "sourceIp": (scope.get("client") or ("127.0.0.1", 0))[0],
                     "userAgent": headers.get("user-agent", "")},
            "requestId": uuid.uuid4().hex, "routeKey": route.key, "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)), "timeEpoch": int(now * 1000),
        },
        "body": base64.b64encode(body).decode() if body else None,
        "isBase64Encoded": bool(body),
    }
    if cookies:
        event["cookies"] = cookies
    if params_q:
        event["queryStringParameters"] = params_q
    if params:
        event["pathParameters"] = params
    return event


def _response(result: Any) -> tuple[int, dict[str, str | list[str]], bytes]:
    """A payload 2.0 answer: a dict with statusCode (else the whole value is a 200 JSON body)."""
    if not isinstance(result, dict) or "statusCode" not in result:
        return 200, {"content-type": "application/json"}, json.dumps(result).encode()
    body = result.get("body") or ""
    payload = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    headers: dict[str, str | list[str]] = {k.lower(): str(v) for k, v in (result.get("headers") or {}).items()}
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[name.lower()] = [str(v) for v in values]
    if result.get("cookies"):
        headers["set-cookie"] = list(result["cookies"])
    return int(result["statusCode"]), headers, payload




async def _answer(send: Send, status: int, headers: dict[str, str | list[str]], body: bytes) -> None:
    raw = [(name.encode("latin-1"), item.encode("latin-1")) for name, value in headers.items()
           if name not in ("content-length", "transfer-encoding", "connection")
           for item in (value if isinstance(value, list) else [value])]
    if status not in (204, 304):
        raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": b"" if status in (204, 304) else body})
