"""The HTTP interface as data (domain/http_interface.py): a request as the event a run gets, and a
run's `respond()` as the answer sent, under one status rule."""

from __future__ import annotations

import json

import pytest

from headwater.domain.http_interface import FINAL_STATUSES, RESPOND_STATUSES, answer_of, http_event, wire_headers


def test_a_request_becomes_its_event() -> None:
    event = http_event("POST", "/a/b", [("x", "1")], [("Content-Type", "application/json"), ("X-A", "1"),
                                                       ("x-a", "2")], b'{"n": 1}')
    assert event == {"method": "POST", "path": "/a/b", "query": {"x": "1"},
                     "headers": {"content-type": "application/json", "x-a": "1, 2"},
                     "bodyRaw": '{"n": 1}', "body": {"n": 1}}


def test_a_body_that_is_not_strict_json_stays_the_raw_string() -> None:
    for raw in (b'{"n": NaN}', b'{"n": 1e999}', b"[" * 200 + b"]" * 200, b"{broken"):
        event = http_event("POST", "/", [], [("content-type", "application/json")], raw)
        assert event["body"] == raw.decode()


def test_form_fields_are_parsed() -> None:
    event = http_event("POST", "", [], [("content-type", "application/x-www-form-urlencoded")], b"a=1&b=")
    assert event["body"] == {"a": "1", "b": ""} and event["path"] == "/"


def test_one_status_rule_respond_takes_100_to_599_and_a_1xx_is_answered_502() -> None:
    assert 100 in RESPOND_STATUSES and 99 not in RESPOND_STATUSES and 600 not in RESPOND_STATUSES
    assert 100 not in FINAL_STATUSES and 200 in FINAL_STATUSES
    answer = answer_of({"status": 101})
    assert answer.status == 502 and "not a final response" in json.loads(answer.body)["error"]
    assert answer_of({"status": 201, "body": {"a": 1}}).body == b'{"a": 1}'


def test_headers_that_would_split_the_response_are_refused() -> None:
    assert answer_of({"status": 200, "headers": {"x": "a\r\nb"}}).status == 502
    assert answer_of({"status": 200, "headers": {"bad name": "a"}}).status == 502


def test_a_list_header_is_sent_once_per_value_and_framing_is_the_servers() -> None:
    answer = answer_of({"status": 200, "body": "hi", "headers": {"set-cookie": ["a=1", "b=2"],
                                                                   "content-length": "999", "x-é": "ok"}})
    assert answer.status == 502  # a header name must be a token
    answer = answer_of({"status": 200, "body": "hi", "headers": {"set-cookie": ["a=1", "b=2"],
                                                                   "content-length": "999", "x-v": "✓"}})
    sent = wire_headers(answer, "req_1")
    assert sent.count((b"set-cookie", b"a=1")) == 1 and (b"set-cookie", b"b=2") in sent
    assert (b"content-length", b"2") in sent and (b"content-length", b"999") not in sent
    assert (b"x-v", b"%E2%9C%93") in sent and (b"x-request-id", b"req_1") in sent


def test_a_binary_body_must_be_base64() -> None:
    assert answer_of({"status": 200, "body": "aGk=", "body_base64": True}).body == b"hi"
    assert answer_of({"status": 200, "body": "***", "body_base64": True}).status == 502


# The crafted responses of tests/components/respond/crafted_response.mjs that no HTTP server may send
# as they are: each is a 502 saying why (tests/e2e/test_bad_input.py sends two of them for real).
NOT_HTTP = "The source's response is not valid HTTP: "
REFUSED = {
    "crlf-name": ({"status": 200, "headers": {"x-a\r\nx-injected": "1"}, "body": "ok"},
                  'the header name "x-a\\r\\nx-injected" is not a token.'),
    "space-name": ({"status": 200, "headers": {"x a": "1"}, "body": "ok"}, 'the header name "x a" is not a token.'),
    "crlf-value": ({"status": 200, "headers": {"x-a": "1\r\nx-injected: 2"}, "body": "ok"},
                   "the value of header x-a has a control character (CR, LF, NUL)."),
    "nul-value": ({"status": 200, "headers": {"x-a": "1\u0000"}, "body": "ok"},
                  "the value of header x-a has a control character (CR, LF, NUL)."),
    "status-100": ({"status": 100, "body": "ok"}, "status 100 is not a final response (200-599)."),
    "status-101": ({"status": 101, "headers": {"upgrade": "websocket", "connection": "upgrade"}, "body": "ok"},
                   "status 101 is not a final response (200-599)."),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_response_that_cannot_be_sent_is_502_saying_why(case: str) -> None:
    response, why = REFUSED[case]
    answer = answer_of(response)
    assert answer.status == 502
    assert json.loads(answer.body) == {"error": NOT_HTTP + why}
    assert all(b"x-injected" not in name and b"upgrade" not in name for name, _ in wire_headers(answer, "req_1"))
