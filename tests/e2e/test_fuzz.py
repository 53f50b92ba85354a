"""The API fuzzed from its own /openapi.json: no input may give a 5xx, a dropped connection, a
status the document does not declare, or an answer outside its declared content type and schema
(error bodies included).

Schemathesis generates the cases (valid ones and schema-violating ones) for every operation the
live document has, new routes included, of a private live server; they are driven here with
Hypothesis, a bounded number per operation, so the run is deterministic and is part of `make test`
(about 30 s of CPU: 45 to 65 s on two cores at load 4 to 7, server start and first bundle
~20 s of it; HEADWATER_FUZZ_EXAMPLES=40 for a deeper run, about two minutes).
Path parameters are half the time real ids of resources made first (a component, an HTTP and a
timer source, a webhook with a delivery, an org, a workflow the HTTP source triggers, their runs),
so routes are reached past their 404s.

An answer to a request with `include`/`exclude` is checked against the document as it is (those
operations answer `<Resource>Fields`: any field may be left out); every other answer also against
the document with each resource's required fields (tests/openapi_conformance.py `unshaped`).
The SSE streams (`/sse`) answer 200 and then never end: each is read for STREAM_READ_S and left.
Nothing leaves loopback: URL inputs are rewritten to the server's own address and the server's
outbound HTTP goes through a proxy address where nothing listens.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import COMPONENTS, Server, client_for, new_user, running_server
from tests.openapi_conformance import fields_chosen, unshaped

EXAMPLES = int(os.environ.get("HEADWATER_FUZZ_EXAMPLES", "10"))  # per operation and mode (valid, invalid)
SLOW_EXAMPLES = max(2, EXAMPLES // 2)  # for operations that bundle or run component code
SLOW = {"POST /v1/components", "POST /v1/sources/", "PUT /v1/sources/{source_id}",
        "POST /v1/components/{key_or_id}/props/{prop}/options", "POST /v1/components/run", "POST /v1/workflows",
        "POST /v1/sources/{source_id}/trial"}
STREAMS = ("/sse",)  # 200, then open until the client leaves: read for STREAM_READ_S, then left
STREAM_EXAMPLES = max(2, EXAMPLES // 3)
STREAM_READ_S = 1.0
# Run last, in this order: they change or delete the resources the other operations are given.
DESTRUCTIVE = ("PUT", "DELETE")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# A plain (not customResponse) HTTP source answers only these: the `default` of that operation is
# for customResponse sources, so it must not hide anything here.
HTTP_INTERFACE = {200, 404, 413, 429}

CODE = """export default {
  name: "Fuzz target", key: "fuzz-target", version: "0.0.1", type: "source",
  props: {
    http: "$.interface.http",
    color: { type: "string", label: "Color", options: ["red", "green"], optional: true },
  },
  async run(event) { this.$emit({ method: event.method, body: event.body }); },
};
"""


@dataclass
class Target:
    server: Server
    api_key: str
    ids: dict[str, list[str]]


@dataclass
class Tally:
    examples: int = 0
    plain: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)  # 2xx answers by the schema checked: fields chosen or not
    seconds: Counter[str] = field(default_factory=Counter)  # by operation
    failures: list[str] = field(default_factory=list)


def _wait(what: str, probe: Callable[[], Any], deadline_s: float = 60) -> Any:
    """Polls `probe` until it returns something truthy (the server gives no event to wait on here)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = probe()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    data_dir = tmp_path_factory.mktemp("fuzz")
    dead_proxy = "http://127.0.0.1:9"  # discard port: nothing listens, so outbound HTTP fails at once
    with running_server(
        data_dir,
        HEADWATER_WEBHOOK_RETRY_SCHEDULE="3600",
        HEADWATER_HTTP_TIMEOUT_MS="5000",
        HTTP_PROXY=dead_proxy, HTTPS_PROXY=dead_proxy, ALL_PROXY=dead_proxy, NO_PROXY="127.0.0.1,localhost",
    ) as srv:
        user = new_user(srv, tier="paid")
        org = srv.cli("orgs", "create", "--name", "fuzzers", "--owner", user.id)
        with client_for(srv, user.api_key) as api:
            component = api.post("/components", json={"component_code": CODE}).json()["data"]
            http = api.post("/sources", json={"component_id": component["id"], "name": "fuzz-http"}).json()["data"]
            timer = api.post("/sources", json={"component_key": "headwater-schedule", "name": "fuzz-timer",
                                               "configured_props": {"timer": {"intervalSeconds": 3600}}}).json()
            webhook = api.post("/webhooks", params={"url": srv.base_url + "/healthz"}).json()["data"]
            account = api.post("/accounts", json={"app": "fuzz_app", "credentials": {"k": "v"}}).json()["data"]
            assert api.post("/subscriptions", params={"emitter_id": http["id"],
                                                      "listener_id": webhook["id"]}).status_code == 200
            steps = [{"name": "emit", "component_code": (COMPONENTS / "workflow" / "emit.mjs").read_text(),
                      "props": {"value": 1}}]
            workflow = api.post("/workflows", json={"name": "fuzz-flow", "trigger": http["id"],
                                                    "steps": steps}).json()["data"]
            endpoint = http["configured_props"]["http"]["endpoint_url"]
            assert httpx.post(endpoint, json={"n": 1}).status_code == 200
            event = _wait("an event", lambda: api.get(f"/sources/{http['id']}/event_summaries").json()["data"])[0]
            delivery = _wait("a delivery", lambda: api.get(f"/webhooks/{webhook['id']}/deliveries").json()["data"])[0]
            runs = [_wait("a run", lambda path=path: api.get(path).json()["data"])[0]["id"]
                    for path in (f"/sources/{http['id']}/runs", f"/workflows/{workflow['id']}/runs")]
        yield Target(srv, user.api_key, {
            "source_id": [http["id"], timer["data"]["id"]],
            "key_or_id": [component["id"], "headwater-schedule"],
            "key": ["headwater-http", "headwater-schedule"],
            "prop": ["color", "timer"],
            "org_id": [org["id"]],
            "webhook_id": [webhook["id"]],
            "delivery_id": [delivery["id"]],
            "event_id": [event["id"]],
            "workflow_id": [workflow["id"]],
            "account_id": [account["id"]],
            "channel": ["$errors"],
            "endpoint_id": [endpoint.rsplit("/", 1)[1]],
            "run_id": runs,
        })


def _schema(target: Target) -> Any:
    """The live document, with hooks that give real ids and keep every URL input on loopback."""
    config = schemathesis.Config.from_dict({"generation": {"with-security-parameters": False}})
    schema = schemathesis.openapi.from_url(target.server.base_url + "/openapi.json", config=config)
    loopback = target.server.base_url + "/fuzz"

    @schema.hook
    def flatmap_path_parameters(context: schemathesis.HookContext, path_parameters: dict[str, Any] | None) -> Any:
        if not path_parameters:
            return st.just(path_parameters)
        return st.fixed_dictionaries({
            name: st.one_of(st.just(value), st.sampled_from(target.ids[name])) if name in target.ids else st.just(value)
            for name, value in path_parameters.items()
        })

    @schema.hook
    def map_query(context: schemathesis.HookContext, query: dict[str, Any] | None) -> Any:
        if isinstance(query, dict) and "url" in query:
            query["url"] = loopback
        return query

    @schema.hook
    def map_body(context: schemathesis.HookContext, body: Any) -> Any:
        if isinstance(body, dict) and "component_url" in body:
            body["component_url"] = loopback + "/component.mjs"
        return body

    return schema


def _negatable(operation: Any) -> bool:
    """Whether any input of the operation can break its schema: a body, or a parameter that is more
    than any string (an optional string query parameter cannot be invalid)."""
    if list(operation.body):
        return True
    constraints = {"type", "minLength", "maxLength", "pattern", "enum", "const", "format"}
    for parameter in operation.iter_parameters():
        schema = parameter.definition.get("schema", {})
        if schema.get("type") != "string" or constraints.intersection(schema) - {"type"}:
            return True
    return False


def _order(label: str) -> tuple[int, str]:
    method = label.split(" ", 1)[0]
    return (DESTRUCTIVE.index(method) + 1 if method in DESTRUCTIVE else 0, label)


def _plain_cases(operation: Any, target: Target) -> list[Any]:
    """A GET asked plainly, for each combination of real ids in its path and nothing else (no query,
    so no `include`/`exclude`): answers with whole resources, whatever the fuzzing happened to pick.
    Empty when it needs more (a required query parameter) or has a path parameter no resource was made for."""
    names = [p.name for p in operation.iter_parameters() if p.location.value == "path"]
    needs = [p.name for p in operation.iter_parameters() if p.is_required and p.location.value == "query"]
    if operation.method.upper() != "GET" or needs or any(name not in target.ids for name in names):
        return []
    return [operation.Case(path_parameters=dict(zip(names, values, strict=True)), query={})
            for values in itertools.product(*(target.ids[name] for name in names))]


def _check(case: Any, label: str, target: Target, tally: Tally, full: tuple[Any, Any], stream: bool = False) -> int:
    """Calls the case and checks the answer: against the document, and for a request that chose no
    fields against `full` (the document without `include`/`exclude`: its schema, this operation)."""
    headers = {"Authorization": f"Bearer {target.api_key}"}
    try:
        response = case.call(base_url=target.server.base_url, headers=headers, timeout=STREAM_READ_S if stream else 60)
    except requests.RequestException as e:
        tally.failures.append(f"{label}: no answer ({type(e).__name__}: {e})\n{case.as_curl_command()}")
        return 0
    tally.statuses[response.status_code] += 1
    chosen = fields_chosen(case.query, case.body)
    if 200 <= response.status_code < 300:
        tally.answers["shaped" if chosen else "whole"] += 1
    if label.startswith(("GET /http/", "POST /http/", "PUT /http/", "PATCH /http/", "DELETE /http/")) and \
            response.status_code not in HTTP_INTERFACE:
        tally.failures.append(f"{label}: {response.status_code} from a plain HTTP source\n{case.as_curl_command()}")
    try:
        case.validate_response(response, checks=CHECKS)
        if not chosen:
            full_schema, full_operation = full
            full_schema.validate_response(full_operation, response)
    except (AssertionError, FailureGroup) as e:
        detail = "\n".join(str(x) for x in getattr(e, "exceptions", [e]))
        tally.failures.append(f"{label}: {detail[:1500]}\n{case.as_curl_command()}")
    return response.status_code


def _run(operation: Any, mode: GenerationMode, target: Target, tally: Tally, full: tuple[Any, Any]) -> None:
    """Fuzzes one operation; `full` is the document without `include`/`exclude` (its schema and
    this operation in it), against which an answer to a request that chose no fields is checked too."""
    label = operation.label
    stream = operation.path.endswith(STREAMS)
    examples = STREAM_EXAMPLES if stream else SLOW_EXAMPLES if label in SLOW else EXAMPLES

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def fuzz(case: Any) -> None:
        tally.examples += 1
        _check(case, f"{label} ({mode.value})", target, tally, full, stream)

    started = time.monotonic()
    with contextlib.suppress(Unsatisfiable):  # nothing in this operation could be made invalid after all
        fuzz()
    tally.seconds[label] += time.monotonic() - started


def test_no_input_gives_a_server_error_or_an_undocumented_status(target: Target) -> None:
    schema = _schema(target)
    full = schemathesis.openapi.from_dict(unshaped(schema.raw_schema))
    full_operations = {result.ok().label: result.ok() for result in full.get_all_operations()}
    operations = [result.ok() for result in schema.get_all_operations()]
    fuzzed = sorted(operations, key=lambda op: _order(op.label))
    assert len(fuzzed) >= 58, [op.label for op in operations]
    tally = Tally()
    plain_not_2xx = []
    for operation in fuzzed:
        for case in _plain_cases(operation, target):
            tally.plain += 1
            status = _check(case, f"{operation.label} (plain)", target, tally,
                            (full, full_operations[operation.label]), stream=operation.path.endswith(STREAMS))
            if not 200 <= status < 300:
                plain_not_2xx.append(f"{case.formatted_path} {status}")
    for operation in fuzzed:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and not _negatable(operation):
                continue
            _run(operation, mode, target, tally, (full, full_operations[operation.label]))
    print(f"\nfuzzed {len(fuzzed)} operations with {tally.examples} examples, {tally.plain} plain GETs; statuses "
          + ", ".join(f"{status}: {n}" for status, n in sorted(tally.statuses.items()))
          + f"; 2xx answers checked with fields chosen (include/exclude): {tally.answers['shaped']}, "
          f"without: {tally.answers['whole']}; slowest: "
          + ", ".join(f"{label} {s:.1f} s" for label, s in tally.seconds.most_common(6))
          + f"; plain GETs not 2xx: {plain_not_2xx}")
    assert not tally.failures, f"{len(tally.failures)} failures:\n\n" + "\n\n".join(tally.failures[:200])
    assert httpx.get(target.server.base_url + "/healthz").status_code == 200
