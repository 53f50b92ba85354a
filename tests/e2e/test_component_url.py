"""`component_url`: fetched over real HTTP on loopback, with clear errors when it cannot be."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.conftest import Server, free_port

CODE = """module.exports = {
  name: "From URL",
  key: "from-url",
  version: "1.0.0",
  props: { greeting: { type: "string", default: "hi", optional: true } },
  async run() { this.$emit({ greeting: this.greeting }) },
};
"""


class Files(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        status, body = self.routes.get(self.path, (404, b"not found"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def files() -> Iterator[str]:
    Files.routes = {"/c.js": (200, CODE.encode()), "/big.js": (200, b"//" + b"x" * (600 * 1024))}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_code_fetched_from_url(api: httpx.Client, files: str) -> None:
    r = api.post("/components", json={"component_url": files + "/c.js"})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["code"] == CODE
    assert data["component_url"] == files + "/c.js"
    assert data["configurable_props"] == [
        {"name": "greeting", "type": "string", "optional": True, "default": "hi"}
    ]


def test_code_wins_over_url_which_is_kept_as_metadata(api: httpx.Client) -> None:
    r = api.post("/components", json={"component_code": CODE, "component_url": "http://127.0.0.1:9/never-fetched"})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["component_url"] == "http://127.0.0.1:9/never-fetched"


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://example.com/c.js", "http or https"),
        ("not a url", "http or https"),
        ("http:///c.js", "hostname"),
        ("http://no-such-host.invalid/c.js", "does not resolve"),
        ("http://169.254.169.254/latest/meta-data", "private"),
    ],
)
def test_bad_urls_are_422(api: httpx.Client, url: str, fragment: str) -> None:
    r = api.post("/components", json={"component_url": url})
    assert r.status_code == 422, r.text
    assert fragment in r.json()["error"]
    assert "component_url" in r.json()["details"]


def test_unreachable_url_is_422_and_service_up(server: Server, api: httpx.Client) -> None:
    closed = f"http://127.0.0.1:{free_port()}/c.js"
    r = api.post("/components", json={"component_url": closed})
    assert r.status_code == 422
    assert "connection failed" in r.json()["error"]
    assert httpx.get(server.base_url + "/healthz").status_code == 200


def test_missing_and_oversized_code_at_url(api: httpx.Client, files: str) -> None:
    r = api.post("/components", json={"component_url": files + "/missing.js"})
    assert r.status_code == 422 and "answered 404" in r.json()["error"]
    r = api.post("/components", json={"component_url": files + "/big.js"})
    assert r.status_code == 422 and "over" in r.json()["error"]
