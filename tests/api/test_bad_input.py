"""Crafted inputs on /v1, in-process over the fakes: each gets the exact 4xx with the DECISIONS
error body, never a 5xx, and the app answers /healthz afterwards. What needs the real thing (an
endpoint's run on Node, a customResponse, chunked framing, the connection kept alive after a
refusal) is tests/e2e/test_bad_input.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from headwater.domain.http_interface import MAX_JSON_DEPTH
from tests.api.conftest import App
from tests.services.test_services import HTTP, component_code

DEEP = 2000


def assert_error(r: httpx.Response, status: int, message: str, details: dict[str, list[str]] | None = None) -> None:
    """The DECISIONS error body, exactly: `{"error": sentence}` plus `details` only when given."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert "x-request-id" in r.headers
    expected: dict[str, Any] = {"error": message}
    if details is not None:
        expected["details"] = details
    assert r.json() == expected


def assert_still_serving(app: App) -> None:
    assert app.http.get("/healthz").status_code == 200


def cursor_of(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps({"s": value}).encode()).decode().rstrip("=")


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def plain_source(api: httpx.Client) -> str:
    r = api.post("/sources", json={"component_code": component_code(configurable_props=HTTP)})
    assert r.status_code == 200, r.text
    return r.json()["data"]["id"]


# 1. cursors


BAD_CURSORS = [
    pytest.param(cursor_of(2**63), id="int64-max-plus-1"),
    pytest.param(cursor_of(10**30), id="huge"),
    pytest.param(cursor_of(-1), id="negative"),
    pytest.param(cursor_of(1.5), id="float"),
    pytest.param(cursor_of(True), id="bool"),
    pytest.param(cursor_of({"s": 1}), id="nested"),
    pytest.param(cursor_of("7"), id="string"),
    pytest.param(base64.urlsafe_b64encode(b"[" * 40).decode(), id="deep-array"),
    pytest.param(base64.urlsafe_b64encode(b'{"s": ' + b"9" * 5000 + b"}").decode(), id="5000-digits"),
    pytest.param("%%%", id="not-base64"),
    pytest.param("é", id="not-ascii"),
]
LISTS = ["/users/me/sources", "/users/me/components", "/components/registry", "/users/me/webhooks",
         "/users/me/accounts"]


@pytest.mark.parametrize("field", ["after", "before"])
@pytest.mark.parametrize("cursor", BAD_CURSORS)
def test_a_cursor_the_service_could_not_have_issued_is_400(app: App, api: httpx.Client, cursor: str,
                                                           field: str) -> None:
    for path in LISTS:
        r = api.get(path, params={field: cursor})
        assert_error(r, 400, f"`{field}` is not a cursor this service issued.", {field: ["invalid cursor"]})
    assert_still_serving(app)


def test_the_largest_int64_cursor_is_still_a_cursor(api: httpx.Client) -> None:
    for field in ("after", "before"):
        r = api.get("/users/me/sources", params={field: cursor_of(2**63 - 1)})
        assert r.status_code == 200, r.text


# 2. deeply nested JSON


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/sources"), ("PUT", "/sources/{sid}"), ("POST", "/sources/{sid}/run"), ("POST", "/components"),
    ("POST", "/subscriptions"), ("POST", "/components/registry:headwater-schedule/props/timer/options"),
])
def test_json_nested_2000_deep_on_v1_is_400(app: App, api: httpx.Client, method: str, path: str) -> None:
    body = '{"name": ' + deep(DEEP) + "}"
    r = api.request(method, path.format(sid=plain_source(api)), content=body,
                    headers={"content-type": "application/json"})
    assert_error(r, 400, f"The request body nests deeper than {MAX_JSON_DEPTH} levels.",
                 {"body": [f"nested deeper than {MAX_JSON_DEPTH}"]})
    assert_still_serving(app)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_numbers_json_cannot_carry_are_400_on_v1(app: App, api: httpx.Client, literal: str) -> None:
    body = '{"component_key": "headwater-http", "configured_props": {"n": ' + literal + "}}"
    r = api.post("/sources", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["details"] == {"body": [
        f"{literal} is not JSON" if literal != "1e999" else "number out of range"]}, r.text
    assert_still_serving(app)


# 3. lone surrogates


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/sources", b'{"component_key": "headwater-http", "name": "a\\ud800b"}', "name"),
    ("/components", b'{"component_code": "export default {name: \\"\\udc00\\"}"}', "component_code"),
    ("/sources", b'{"component_key": "headwater-http", "configured_props": {"x": ["ok", "\\udfff"]}}',
     "configured_props.x.1"),
    ("/sources", b'{"component_key": "headwater-http", "configured_props": {"\\ud800": 1}}', "configured_props"),
])
def test_a_lone_surrogate_on_v1_is_400(app: App, api: httpx.Client, path: str, body: bytes, field: str) -> None:
    r = api.post(path, content=body, headers={"content-type": "application/json"})
    assert_error(r, 400, f"`{field}` has a lone surrogate (\\ud800-\\udfff), which is not valid Unicode.",
                 {field: ["lone surrogate: not valid Unicode"]})
    assert_still_serving(app)
