"""Crafted inputs, as an attacker would send them: each gets the exact 4xx (or 502 for a source's
own response) with the DECISIONS error body, never a 5xx or a dropped connection, and the server
answers /healthz on the same connection afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from headwater.domain.http_interface import MAX_JSON_DEPTH
from tests.api.test_bad_input import assert_error, cursor_of, deep
from tests.conftest import COMPONENTS, Server, client_for, new_user
from tests.e2e.test_runs import component, deploy, wait_until

V1_LIMIT = 1024 * 1024  # the default body limits (HEADWATER_MAX_BODY_BYTES, settings.py) of /v1
ENDPOINT_LIMIT = 512 * 1024  # and of the sources' endpoints (HEADWATER_HTTP_MAX_BODY_BYTES)
DEEP = 2000


@pytest.fixture(scope="module")
def srv(local_server: Server) -> Server:
    """The session's local service, at its default limits (its own user and sources for this module)."""
    return local_server


@pytest.fixture(scope="module")
def api(srv: Server) -> Iterator[httpx.Client]:
    with client_for(srv, new_user(srv, tier="paid").api_key) as client:
        yield client


@pytest.fixture(scope="module")
def plain(api: httpx.Client) -> tuple[str, str]:
    """An HTTP source that emits each request's event: (source id, endpoint URL)."""
    return deploy(api, component("this.$emit(event);"))


@pytest.fixture(scope="module")
def crafted(api: httpx.Client) -> str:
    """The endpoint URL of tests/components/respond/crafted_response.mjs."""
    code = (COMPONENTS / "respond" / "crafted_response.mjs").read_text()
    return deploy(api, code)[1]


def assert_still_serving(client: httpx.Client, srv: Server) -> None:
    """/healthz on the same client (so on the same kept-alive connection when it survived)."""
    assert client.get(srv.base_url + "/healthz").status_code == 200


def _paths(items: list[dict[str, Any]]) -> set[str]:
    return {item["event"]["path"] for item in items}


# 1. /v1 refusals


LISTS = ["/users/me/sources", "/users/me/components", "/components/registry", "/users/me/webhooks"]


# Every bad cursor on each list, nesting on each /v1 route with a body, each number JSON cannot
# carry and each place a lone surrogate can hide are tests/api/test_bad_input.py, in-process; here
# one of each, for real, on one kept-alive connection that must still serve after each refusal.


def test_v1_refuses_each_kind_of_crafted_input_and_the_connection_still_serves(
        srv: Server, api: httpx.Client, plain: tuple[str, str]) -> None:
    for path in LISTS:
        r = api.get(path, params={"after": cursor_of(2**63)})
        assert_error(r, 400, "`after` is not a cursor this service issued.", {"after": ["invalid cursor"]})
    assert_still_serving(api, srv)

    body = '{"name": ' + deep(DEEP) + "}"
    r = api.put(f"/sources/{plain[0]}", content=body, headers={"content-type": "application/json"})
    assert_error(r, 400, f"The request body nests deeper than {MAX_JSON_DEPTH} levels.",
                 {"body": [f"nested deeper than {MAX_JSON_DEPTH}"]})
    assert_still_serving(api, srv)

    body = '{"component_key": "headwater-http", "configured_props": {"n": NaN}}'
    r = api.post("/sources", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["details"] == {"body": ["NaN is not JSON"]}, r.text
    assert_still_serving(api, srv)

    field = "configured_props.x.1"
    body = '{"component_key": "headwater-http", "configured_props": {"x": ["ok", "\\udfff"]}}'
    r = api.post("/sources", content=body.encode(), headers={"content-type": "application/json"})
    assert_error(r, 400, f"`{field}` has a lone surrogate (\\ud800-\\udfff), which is not valid Unicode.",
                 {field: ["lone surrogate: not valid Unicode"]})
    assert_still_serving(api, srv)


# 2. deeply nested JSON


def test_json_nested_2000_deep_to_an_endpoint_is_taken_as_the_raw_string(
        srv: Server, api: httpx.Client, plain: tuple[str, str]) -> None:
    source_id, url = plain
    with httpx.Client(timeout=30) as client:
        r = client.post(url + "/deep", content=deep(DEEP), headers={"content-type": "application/json"})
        assert (r.status_code, r.json()) == (200, {"success": True})
        r = client.post(url + "/shallow", content=deep(MAX_JSON_DEPTH), headers={"content-type": "application/json"})
        assert (r.status_code, r.json()) == (200, {"success": True})
        assert_still_serving(client, srv)
    # The same depth through /v1: a manual run whose event nests MAX_JSON_DEPTH levels in all.
    manual = '{"path": "/manual", "body": ' + deep(MAX_JSON_DEPTH - 1) + "}"
    r = api.post(f"/sources/{source_id}/run", content=manual, headers={"content-type": "application/json"})
    assert r.status_code == 202, r.text
    items = wait_until(api, source_id, lambda items: {"/deep", "/shallow", "/manual"} <= _paths(items), "the events")
    events = {e["event"]["path"]: e["event"] for e in items}
    assert events["/deep"]["body"] == deep(DEEP) == events["/deep"]["bodyRaw"]
    assert isinstance(events["/shallow"]["body"], list)  # at the limit: still parsed
    assert isinstance(events["/manual"]["body"], list)
    assert api.get(f"/sources/{source_id}/event_summaries").status_code == 200  # truncated previews too


# 3. lone surrogates


def test_a_lone_surrogate_to_an_endpoint_becomes_the_replacement_character(
        srv: Server, api: httpx.Client, plain: tuple[str, str]) -> None:
    source_id, url = plain
    r = httpx.post(url + "/surrogate", content=b'{"v": "a\\ud800", "\\udc00": 1}',
                   headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (200, {"success": True})
    items = wait_until(api, source_id, lambda items: "/surrogate" in _paths(items), "the event")
    event = next(e["event"] for e in items if e["event"]["path"] == "/surrogate")
    assert event["body"] == {"v": "a\ufffd", "\ufffd": 1}
    assert_still_serving(api, srv)


# 4. a customResponse that is not valid HTTP


NOT_HTTP = "The source's response is not valid HTTP: "


# Each crafted response refused, with its reason, is tests/unit/test_http_interface.py; here the two
# that would change the wire (a header injected, a connection upgraded), sent from Node for real.
@pytest.mark.parametrize(("case", "why"), [
    ("crlf-name", 'the header name "x-a\\r\\nx-injected" is not a token.'),
    ("status-101", "status 101 is not a final response (200-599)."),
])
def test_a_response_that_cannot_be_sent_is_502_saying_why(srv: Server, crafted: str, case: str, why: str) -> None:
    with httpx.Client(timeout=30) as client:
        r = client.post(crafted, params={"case": case}, json={})
        assert_error(r, 502, NOT_HTTP + why)
        assert "x-injected" not in r.headers and "upgrade" not in r.headers
        assert_still_serving(client, srv)


def test_a_header_value_latin1_cannot_carry_is_percent_encoded(srv: Server, crafted: str) -> None:
    with httpx.Client(timeout=30) as client:
        r = client.post(crafted, params={"case": "unicode-header"}, json={})
        assert (r.status_code, r.text, r.headers["x-greeting"]) == (200, "ok", "%C3%A9%E2%9C%93")
        r = client.post(crafted, params={"case": "latin1-header"}, json={})
        assert (r.status_code, dict(r.headers.raw)[b"x-greeting"]) == (200, "café".encode("latin-1"))
        assert_still_serving(client, srv)


def test_framing_stays_the_servers_own(srv: Server, crafted: str) -> None:
    """A 204 ends at its headers; a source's content-length and transfer-encoding are not sent; a
    header given as a list is sent once per value; a lone surrogate in a text body is U+FFFD."""
    with httpx.Client(timeout=30) as client:
        r = client.post(crafted, params={"case": "status-204-body"}, json={})
        assert (r.status_code, r.content, r.headers.get("content-length")) == (204, b"", None)
        r = client.post(crafted, params={"case": "framing-headers"}, json={})
        assert (r.status_code, r.text, r.headers["content-length"]) == (200, "ok", "2")
        assert "transfer-encoding" not in r.headers
        r = client.post(crafted, params={"case": "cookies"}, json={})
        assert r.headers.get_list("set-cookie") == ["a=1", "b=2"]
        r = client.post(crafted, params={"case": "surrogate-body"}, json={})
        assert (r.status_code, r.text) == (200, "x\ufffdy")
        assert_still_serving(client, srv)


# 5. chunked bodies over the limit


def chunks(total: int) -> Iterator[bytes]:
    """A body with no Content-Length: sent chunked, its size known only once read."""
    yield b'{"name": "'
    for _ in range(total // 1024):
        yield b"x" * 1024
    yield b'"}'


def test_a_chunked_body_over_the_limit_to_an_endpoint_is_413(srv: Server, plain: tuple[str, str]) -> None:
    with httpx.Client(timeout=30) as client:
        r = client.post(plain[1], content=chunks(ENDPOINT_LIMIT + 4096), headers={"content-type": "application/json"})
        assert_error(r, 413, f"The body is over {ENDPOINT_LIMIT} bytes.")
        assert_still_serving(client, srv)


@pytest.mark.parametrize(("method", "path"), [("POST", "/sources"), ("PUT", "/sources/{sid}"),
                                              ("POST", "/sources/{sid}/run")])
def test_a_chunked_body_over_the_limit_on_v1_is_413(srv: Server, api: httpx.Client, plain: tuple[str, str],
                                                    method: str, path: str) -> None:
    r = api.request(method, path.format(sid=plain[0]), content=chunks(V1_LIMIT + 4096),
                    headers={"content-type": "application/json"})
    assert_error(r, 413, f"The body is over {V1_LIMIT} bytes.")
    assert_still_serving(api, srv)


def test_a_chunked_body_under_the_limit_on_v1_still_reaches_the_route(api: httpx.Client) -> None:
    r = api.post("/sources", content=chunks(1024), headers={"content-type": "application/json"})
    assert r.status_code == 400 and set(r.json()["details"]) == {"component_id"}, r.text  # the route's own check
