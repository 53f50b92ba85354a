"""Every answer the suite gets from the API, checked against the server's own /openapi.json.

`client_for` (tests/conftest.py) hangs `Conformance.check` on each API client as a response hook,
so a route that answers a status its document does not declare, or a body its response schema
does not admit, fails the test that made the request. Schemathesis does the matching and the
schema validation (the same checks as the fuzz run, on the suite's real traffic).

An answer to a request with `include`/`exclude` is checked against the document as it is (its
resources are `<Resource>Fields`, no field required); any other answer against `unshaped(document)`,
where every resource has the fields its schema requires."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import schemathesis
from schemathesis.core.failures import FailureGroup
from schemathesis.core.transport import Response

# Undocumented aliases the router serves (DECISIONS: HTTP basics): checked as their documented form.
_WORKSPACES = re.compile(r"^/v1/workspaces/")


@dataclass
class Conformance:
    document: dict[str, Any]
    checked: int = 0
    _shaped: Any = field(init=False, repr=False)
    _schema: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._shaped = schemathesis.openapi.from_dict(self.document)
        self._schema = schemathesis.openapi.from_dict(unshaped(self.document))

    def problems(self, response: httpx.Response) -> list[str]:
        """What is wrong with this answer by the document; empty when it conforms (or is not an
        API answer: the HTTP interface and the streams are checked elsewhere)."""
        request = response.request
        path = _WORKSPACES.sub("/v1/orgs/", request.url.path)
        if not path.startswith("/v1/") or path.endswith("/sse"):
            return []
        schema = self._shaped if _chooses_fields(request) else self._schema
        operation = (schema.find_operation_by_path(request.method, path)
                     or schema.find_operation_by_path(request.method, _other_slash(path)))
        label = f"{request.method} {request.url.path} -> {response.status_code}"
        if operation is None:
            # A path or method the API does not have is answered 404/405, and only that.
            return [] if response.status_code in (404, 405) else [f"{label}: the document has no such operation"]
        if operation.responses.find_by_status_code(response.status_code) is None:
            return [f"{label}: status not documented for {operation.label}"]
        try:
            _ = request.content
        except httpx.RequestNotRead:
            return []  # a streamed request body: schemathesis' record of the exchange needs it whole
        self.checked += 1
        try:
            schema.validate_response(operation, Response.from_httpx(response, verify=True))
        except FailureGroup as group:
            return [f"{label}: {failure.title}: {failure.message}"[:2000] for failure in group.exceptions]
        except AssertionError as failure:
            return [f"{label}: {failure}"[:2000]]
        return []

    def check(self, response: httpx.Response) -> None:
        """httpx response hook: raises in the test that made a non-conforming request."""
        if response.request.url.path.endswith("/sse"):
            return  # a stream: reading it here would wait for its end
        response.read()
        if found := self.problems(response):
            raise AssertionError("The answer does not match /openapi.json:\n" + "\n".join(found))


def _chooses_fields(request: httpx.Request) -> bool:
    try:
        body = json.loads(request.content or b"null")
    except httpx.RequestNotRead:
        body = None  # a streamed body (a test's chunked upload): sent, never kept to be read here
    except (ValueError, RecursionError):
        body = None
    return fields_chosen(request.url.params, body)


def fields_chosen(query: Any, body: Any) -> bool:
    """`include`/`exclude` in the query, or in a JSON body (SPEC: Common parameters)."""
    fields = {"include", "exclude"}
    return bool(fields & set(query or ())) or (isinstance(body, dict) and bool(fields & set(body)))


FIELDS_OF = "x-fields-of"  # headwater.api.app: `SourceFields` is `Source` as include/exclude leave it


def unshaped(document: dict[str, Any]) -> dict[str, Any]:
    """The document as it holds for a request without `include`/`exclude`: each reference to a
    resource's `...Fields` schema made a reference to the resource itself, required fields and all."""
    schemas = document.get("components", {}).get("schemas", {})
    full = {f"#/components/schemas/{name}": f"#/components/schemas/{s[FIELDS_OF]}"
            for name, s in schemas.items() if FIELDS_OF in s}

    def swap(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: full.get(v, v) if k == "$ref" and isinstance(v, str) else swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    return swap(document)


def _other_slash(path: str) -> str:
    return path[:-1] if path.endswith("/") else path + "/"


def assert_every_route_routed(spec: dict[str, Any], request: Callable[[str, str], httpx.Response]) -> None:
    """The document names the component routes, and every operation it names is routed: asked with
    placeholder ids, none answers "No such route." (`request(method, path)`)."""
    assert {
        "/healthz",
        "/v1/users/me",
        "/v1/components",
        "/v1/components/{key_or_id}",
        "/v1/components/registry/{key}",
        "/v1/users/me/components",
        "/v1/orgs/{org_id}/components",
    } <= set(spec["paths"])
    for path, ops in spec["paths"].items():
        concrete = path.replace("{key_or_id}", "sc_x").replace("{key}", "x").replace("{org_id}", "o_x")
        for method in ops:
            r = request(method.upper(), concrete)
            assert r.status_code not in (404, 405) or r.json()["error"] != "No such route.", (method, path)
