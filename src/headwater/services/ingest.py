"""HTTP interface of sources (DECISIONS): a request becomes a durable run task before it is answered.

Without customResponse the caller gets 200 as soon as the task is committed; with it, the answer
is what the run gives to `this.http.respond()`: 502 when the run ends without one, 504 when it
runs out of time.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote

from headwater.domain.commands import RunSource
from headwater.domain.errors import NotFound
from headwater.domain.models import Source
from headwater.domain.runs import RunResult
from headwater.ports import Responses, TaskQueue
from headwater.services.components import Components
from headwater.services.runs import Admission, Runs
from headwater.services.sources import Sources
from headwater.settings import Settings

_GRACE_S = 5.0
_ACCEPTED = b'{"success": true}'


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


class Ingest:
    def __init__(self, components: Components, sources: Sources, runs: Runs, queue: TaskQueue,
                 responses: Responses, settings: Settings) -> None:
        self.components = components
        self.sources = sources
        self.runs = runs
        self.queue = queue
        self.responses = responses
        self.settings = settings
        self._custom: dict[str, bool] = {}

    async def _source(self, endpoint_id: str) -> Source | None:
        """The endpoint's source from the cache, or from the store off the event loop."""
        hit, source = self.sources.endpoints.get(endpoint_id)
        if hit:
            return source
        return await asyncio.to_thread(self.sources.by_endpoint, endpoint_id)

    async def _custom_response(self, component_id: str) -> bool:
        """Components never change once saved, so what their http prop says is cached by id."""
        if component_id not in self._custom:
            component = await asyncio.to_thread(self.components.by_id, component_id)
            self._custom[component_id] = any(
                p["type"] == "$.interface.http" and p.get("customResponse")
                for p in component.definition.configurable_props
            )
        return self._custom[component_id]

    async def _admit(self, source: Source) -> Admission:
        if self.runs.cached_tier(source.user_id) == "paid":
            return Admission(True)  # the hot path of paid users touches no store
        return await asyncio.to_thread(self.runs.admit, source.user_id)

    async def receive(self, endpoint_id: str, event: dict[str, Any]) -> HttpAnswer:
        source = await self._source(endpoint_id)
        if source is None or not source.active:
            raise NotFound("No active source has this endpoint.")
        admission = await self._admit(source)
        if admission.refusal:
            await asyncio.to_thread(self.runs.refuse, source.id, event, admission.refusal)
            raise admission.refusal
        custom = await self._custom_response(source.component_id)
        timeout_ms = self.settings.http_timeout_ms
        command = RunSource(source.id, event, timeout_ms, "http",
                            reserved_by=source.user_id if admission.reserved_day else None,
                            reserved_day=admission.reserved_day)
        try:
            task_id = await self.queue.ingest(command, respond=custom)
        except BaseException:
            await asyncio.to_thread(self.runs.release, command)
            raise
        if not custom:
            return HttpAnswer(200, _ACCEPTED, {"content-type": "application/json"})
        answer = await self.responses.wait(task_id, timeout_ms / 1000 + _GRACE_S)
        if answer is None:
            return HttpAnswer.json(504, {"error": "The source did not respond in time."})
        kind, value = answer
        if kind == "respond" and value:
            return self._answer(value)
        if isinstance(value, RunResult) and value.error and value.error.get("code") == "TIMEOUT":
            return HttpAnswer.json(504, {"error": "The source did not respond in time."})
        if isinstance(value, RunResult) and value.error:
            return HttpAnswer.json(502, {"error": f"The source failed before responding: {value.error.get('message')}"})
        return HttpAnswer.json(502, {"error": "The source ended without calling this.http.respond()."})

    @staticmethod
    def _answer(response: dict[str, Any]) -> HttpAnswer:
        """The source's `this.http.respond()` as an HTTP answer, or a 502 saying why it cannot be one:
        a 1xx is not a final response; header names must be RFC 7230 tokens and values free of
        CR, LF, NUL and other controls (they would split or end the response). Values that latin-1
        cannot carry are sent with their non-ASCII characters percent-encoded as UTF-8."""
        try:
            status = int(response.get("status") or 200)
        except (TypeError, ValueError):
            return HttpAnswer.bad_gateway("the status is not a number.")
        if not 200 <= status <= 599:
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

