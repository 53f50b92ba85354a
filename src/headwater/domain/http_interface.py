"""The HTTP interface of sources as data (DECISIONS: HTTP interface), pure: a request becomes the
event a run gets (`http_event`), and what a run gives `this.http.respond()` becomes the answer sent
(`answer_of`), under one status rule (`RESPOND_STATUSES`, `FINAL_STATUSES`) that the runner's
supervisor (adapters/runner_protocol.py) and the answer both apply.
"""

from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote

RESPOND_STATUSES = range(100, 600)
"""What `respond()` may give (SPEC: an integer HTTP code from 100 to 599); anything else breaks the
runner protocol."""
FINAL_STATUSES = range(200, 600)
"""What can be answered: a 1xx is not a final response, so a run that responds with one is answered
502 saying so."""
NO_BODY = (204, 304)  # statuses that end at their headers: a body would be read as the next response
_FRAMING = ("content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "trailer", "te")

MAX_JSON_DEPTH = 128
"""Deeper JSON is not parsed. Parsers and the service's own walks over what it stores recurse per
level: pydantic serialises at most 255 levels (an API answer wraps a value in a few of its own), and
`dataclasses.asdict` of a run command takes two frames a level of Python's 1000. No real payload nests
anywhere near 128. A request body past it stays the raw string (see parse_body); /v1 refuses it."""

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 7230 field-name (used with fullmatch)
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # CR, LF, NUL and the other controls but HTAB


def json_too_deep(raw: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text nests arrays/objects deeper than `limit`, found without parsing it (a
    parser is what deep nesting breaks). Cheap for ordinary bodies: fewer brackets than the limit
    cannot be too deep."""
    if raw.count("[") + raw.count("{") <= limit:
        return False
    depth = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", raw)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            return True
    return False


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _scrub_surrogates(value: Any) -> Any:
    """Lone surrogates (`"\ud800"` escapes) replaced by U+FFFD, as invalid UTF-8 in a body is: text
    that cannot be encoded would break every later step that writes the event out."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    stack = [value]  # iterative: the nesting may be up to MAX_JSON_DEPTH deep
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            cleaned = {_LONE_SURROGATE.sub("\ufffd", k): _scrub_surrogates(v) if isinstance(v, str) else v
                       for k, v in node.items()}
            node.clear()
            node.update(cleaned)
            stack.extend(v for v in cleaned.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            node[:] = [_scrub_surrogates(v) if isinstance(v, str) else v for v in node]
            stack.extend(v for v in node if isinstance(v, dict | list))
    return value


def _latin1(value: str) -> str:
    """A header value latin-1 can carry: as is when it can, else with every non-ASCII character
    percent-encoded as UTF-8 (`é✓` -> `%C3%A9%E2%9C%93`), the form browsers use for URLs."""
    value = value.strip(" \t")
    try:
        value.encode("latin-1")
        return value
    except UnicodeEncodeError:
        return "".join(c if c < "\x80" else quote(c.encode("utf-8", "surrogatepass")) for c in value)


@dataclass
class HttpAnswer:
    """What the endpoint answers. A header given as a list is sent once per value (Set-Cookie)."""

    status: int
    body: bytes
    headers: dict[str, str | list[str]] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, value: Any) -> HttpAnswer:
        return cls(status, json.dumps(value).encode(), {"content-type": "application/json"})

    @classmethod
    def bad_gateway(cls, why: str) -> HttpAnswer:
        """The source's response cannot be sent as HTTP: the caller learns why, the connection stays."""
        return cls.json(502, {"error": f"The source's response is not valid HTTP: {why}"})


def parse_body(raw: str, content_type: str) -> Any:
    """`event.body`: form fields, parsed JSON, else the raw string (DECISIONS). JSON that is not
    strictly JSON (NaN, Infinity, numbers out of float range) or nests deeper than MAX_JSON_DEPTH is
    not parsed: the body is the raw string, like any other unparseable body, so a sender gets its
    usual 200 and the source still sees every byte in `bodyRaw`. Lone surrogates become U+FFFD."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return dict(parse_qsl(raw, keep_blank_values=True))
    if "json" in kind or (not kind and raw[:1] in "{["):
        if json_too_deep(raw):
            return raw
        try:
            parsed = json.loads(raw, parse_float=_finite, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return raw
        return _scrub_surrogates(parsed) if _SURROGATE_ESCAPE.search(raw) else parsed
    return raw


def body_left_out(event: Any) -> dict[str, Any] | None:
    """An HTTP request's event without its `body`, which `with_body` makes again from `bodyRaw` and
    the content type (what queues and records keep: the body was in there twice); None when the
    event is not in http_event's form."""
    if not body_derivable(event):
        return None
    return {name: value for name, value in event.items() if name != "body"}


def body_derivable(event: Any) -> bool:
    """Whether `event` has the form of http_event's, whose `body` follows from the rest."""
    return isinstance(event, dict) and "body" in event and isinstance(event.get("bodyRaw"), str) \
        and isinstance(event.get("headers"), dict)


def with_body(event: Any) -> Any:
    """`event` with the `body` that `body_left_out` left out put back (an event that has one, or is
    no request, is returned as it is)."""
    if isinstance(event, dict) and "body" not in event and isinstance(event.get("bodyRaw"), str) \
            and isinstance(event.get("headers"), dict):
        content_type = event["headers"].get("content-type", "")
        event["body"] = parse_body(event["bodyRaw"], content_type if isinstance(content_type, str) else "")
    return event


def http_event(method: str, path: str, query: list[tuple[str, str]], headers: list[tuple[str, str]],
               body: bytes) -> dict[str, Any]:
    """The event a request becomes (DECISIONS: HTTP interface). Nothing in it can fail to encode:
    headers are latin-1, the body is decoded with replacement and parsed by parse_body."""
    merged: dict[str, str] = {}
    for name, value in headers:
        name = name.lower()
        merged[name] = f"{merged[name]}, {value}" if name in merged else value
    raw = body.decode("utf-8", errors="replace")
    return {
        "method": method,
        "path": path or "/",
        "query": dict(query),
        "headers": merged,
        "bodyRaw": raw,
        "body": parse_body(raw, merged.get("content-type", "")),
    }


def answer_of(response: dict[str, Any]) -> HttpAnswer:
    """The source's `this.http.respond()` as an HTTP answer, or a 502 saying why it cannot be one:
    a 1xx is not a final response; header names must be RFC 7230 tokens and values free of
    CR, LF, NUL and other controls (they would split or end the response). Values that latin-1
    cannot carry are sent with their non-ASCII characters percent-encoded as UTF-8."""
    try:
        status = int(response.get("status") or 200)
    except (TypeError, ValueError):
        return HttpAnswer.bad_gateway("the status is not a number.")
    if status not in FINAL_STATUSES:
        return HttpAnswer.bad_gateway(f"status {status} is not a final response (200-599).")
    body = response.get("body")
    if body is None:
        data = b""
    elif response.get("body_base64"):
        try:
            data = base64.b64decode(str(body), validate=True)
        except ValueError:
            return HttpAnswer.bad_gateway("the binary body is not valid base64.")
    elif isinstance(body, str):
        data = _scrub_surrogates(body).encode()
    else:
        data = json.dumps(body).encode()
    headers: dict[str, str | list[str]] = {}
    given = response.get("headers")
    for name, value in (given.items() if isinstance(given, dict) else ()):
        name = str(name).lower()
        if not _TOKEN.fullmatch(name):
            return HttpAnswer.bad_gateway(f"the header name {json.dumps(name)} is not a token.")
        values = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        for v in values:
            if _BAD_VALUE.search(v):
                return HttpAnswer.bad_gateway(f"the value of header {name} has a control character (CR, LF, NUL).")
        safe = [_latin1(v) for v in values]
        headers[name] = safe if isinstance(value, list) else safe[0]
    return HttpAnswer(status, data, headers)



def wire_headers(answer: HttpAnswer, request_id: str) -> list[tuple[bytes, bytes]]:
    """The answer's headers as sent: framing and connection headers are the server's own (a source
    that sets them would desynchronise the connection); a list value is sent once per item."""
    headers = [(name.encode("latin-1"), item.encode("latin-1"))
               for name, value in answer.headers.items() if name not in _FRAMING
               for item in (value if isinstance(value, list) else [value])]
    if answer.status not in NO_BODY:
        headers.append((b"content-length", str(len(answer.body)).encode()))
    headers.append((b"x-request-id", request_id.encode()))
    return headers
