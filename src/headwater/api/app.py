"""The FastAPI application: the same app serves locally (uvicorn) and on Lambda (Mangum)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from headwater import __version__
from headwater.api import (
    components,
    connected_accounts,
    console,
    docs,
    errors,
    events,
    health,
    metrics,
    oauth,
    props,
    registry,
    replay,
    runs,
    source_trials,
    sources,
    sse,
    state,
    subscriptions,
    trials,
    users,
    webhooks,
    workflow_deploys,
    workflows,
)
from headwater.api.endpoint_origin import EndpointOrigin
from headwater.api.ingest import IngestApp
from headwater.api.middleware import ContainFaults, RequestGuard
from headwater.api.tenant_share import TenantShare
from headwater.bootstrap import Services
from headwater.metrics import MetricsMiddleware

V1_ROUTERS = [
    users.router, registry.router, props.router, components.router, sources.router, events.router, replay.router,
    sse.router, subscriptions.router, webhooks.router, workflows.router, trials.router,
    workflow_deploys.router, connected_accounts.router, runs.router,
]
V1_ROUTERS.append(oauth.router)  # issue 22, part B
V1_ROUTERS.append(source_trials.router)  # issue 34, item 1
V1_ROUTERS.append(state.router)  # issue 34, item 2


def create_app(services: Services) -> ASGIApp:
    """The HTTP interface of sources in front of the FastAPI app that serves everything else, every
    answer counted for /metrics, any fault that escapes them all answered 500, not dropped, and
    every endpoint answer sandboxed out of the console's origin (api/endpoint_origin.py)."""
    ingest = IngestApp(services.ingest, services.settings.http_max_body_bytes, create_api(services))
    return AttachLoop(services, EndpointOrigin(ContainFaults(MetricsMiddleware(ingest))))


class AttachLoop:
    """At the server's start (its lifespan), the services learn of the event loop they serve on."""

    def __init__(self, services: Services, app: ASGIApp) -> None:
        self.services = services
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            self.services.attach(asyncio.get_running_loop())
        await self.app(scope, receive, send)


def create_api(services: Services, routers: list[APIRouter] | None = None, site: bool = True) -> FastAPI:
    """The whole API, or (on Lambda, one function per route group) only `routers` under /v1 and,
    with `site`, the service's own pages (/healthz, /metrics, /console, /docs)."""
    app = FastAPI(
        title="Headwater",
        version=__version__,
        description="Event sources: components that receive HTTP requests or run on timers and emit events.",
        redirect_slashes=False,
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    errors.install(app)
    if site:
        app.include_router(health.router)
        app.include_router(metrics.router)
        console.install(app)
        docs.install(app)
    for router in V1_ROUTERS if routers is None else routers:
        app.include_router(router, prefix="/v1")
    app.add_middleware(TenantShare, per_tenant=services.settings.tenant_requests,
                       wait_s=services.settings.tenant_request_wait_s)
    app.add_middleware(RequestGuard, max_body_bytes=services.settings.max_body_bytes)
    _finish_openapi(app)
    return app


def _finish_openapi(app: FastAPI) -> None:
    """What FastAPI cannot infer: the HTTP interface (served by IngestApp, outside FastAPI), the
    error statuses every /v1 route can answer, with the error body (DECISIONS: HTTP basics)."""
    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = default_openapi()
            _document_http_interface(schema)
            _document_errors(schema)
            _document_shaping(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _document_http_interface(schema: dict[str, Any]) -> None:
    operation = {
        "tags": ["http interface"],
        "summary": "Send a request to an HTTP source",
        "description": "Any method and sub-path, no auth. 200 `{\"success\": true}` once the event is durably "
        "queued. A source with `customResponse` answers with what its `this.http.respond()` gives (any status "
        "200-599 and its own headers: the `default` response), 502 when it cannot be sent as HTTP or the run "
        "ends without responding, 504 when the run runs out of time. 429 (with `Retry-After`) when the owner's ingest "
        "budget (requests a second to its sources) or a free user's daily quota is spent: nothing is queued.",
        "parameters": [{"name": "endpoint_id", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {
            "200": {"description": "Queued: `{\"success\": true}`.",
                    "content": {"application/json": {"schema": {"type": "object"}}}},
            **_error_responses(404, 413, 429, 502, 504),
            "default": {"description": "A customResponse source's own answer."},
        },
    }
    body = {"required": False, "content": {"application/json": {"schema": {}},
                                           "text/plain": {"schema": {"type": "string"}}}}
    schema["paths"]["/http/{endpoint_id}"] = {
        method: {**operation, "operationId": f"http_interface_{method}",
                 **({"requestBody": body} if method in ("post", "put", "patch") else {})}
        for method in ("get", "post", "put", "patch", "delete")
    }


def _document_errors(schema: dict[str, Any]) -> None:
    """Adds to each /v1 operation the errors it can answer (routes declare their own 409/422/503):
    400 where it takes input, 401 always, 403 where it takes an org, 404 where its path names a
    resource, 413/415 where it takes a body. FastAPI's 422 goes: validation errors are 400 here."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Error"] = errors.ERROR_SCHEMA
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            responses = op.setdefault("responses", {})
            if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                del responses["422"]
            params = op.get("parameters", [])
            for param in params:
                _drop_null(param)
            if not path.startswith("/v1/"):
                continue
            writes = method in ("post", "put", "patch")
            statuses = {401, 429}  # 429: the key's share of requests in flight (api/tenant_share.py)
            if writes or any(p["name"] not in _FREE_TEXT for p in params):
                statuses.add(400)
            if any(p["in"] == "path" for p in params):
                statuses.add(404)
            body_org = method == "post" and "org_id" in _body_fields(schema, op)  # PUT keeps the source's org
            if body_org or any(p["name"] == "org_id" for p in params):
                statuses.add(403)
            if writes:
                statuses |= {413, 415}
            for status, response in _error_responses(*sorted(statuses)).items():
                responses.setdefault(status, response)
            op["responses"] = dict(sorted(responses.items()))
            op["security"] = [{"bearer": []}]


_FREE_TEXT = {"include", "exclude"}  # parameters no value of which is malformed


def _error_responses(*statuses: int) -> dict[str, Any]:
    return {str(status): response for status, response in errors.error_responses(*statuses).items()}


SHAPED_SUFFIX = "Fields"
FIELDS_OF = "x-fields-of"


def _document_shaping(schema: dict[str, Any]) -> None:
    """`include`/`exclude` (SPEC: Common parameters) keep or drop any top-level field of each resource
    in `data`, so an operation that takes them cannot promise the resource's required fields: its
    answer is documented with `<Resource>Fields`, the resource's schema with none required (and no
    other field allowed). `x-fields-of` names the resource, whose required fields are all there in an
    answer to a request without `include`/`exclude` (tests/openapi_conformance.py checks both)."""
    schemas = schema.get("components", {}).get("schemas", {})
    replaced: set[str | None] = set()
    for operations in schema["paths"].values():
        for op in operations.values():
            if not _FREE_TEXT & {p["name"] for p in op.get("parameters", [])}:
                continue
            for status, response in op.get("responses", {}).items():
                media = response.get("content", {}).get("application/json", {})
                if status.startswith("2") and "schema" in media:
                    replaced.add(_ref_name(media["schema"]))
                    media["schema"] = _shaped_answer(schemas, media["schema"])
    referenced = json.dumps([schema["paths"], schemas])
    for name in replaced:  # wrappers no answer has any more (`Data_Source_`: now `Data_SourceFields_`)
        if name and f'"#/components/schemas/{name}"' not in referenced:
            schemas.pop(name, None)


def _shaped_answer(schemas: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """`{"data": R}` or `{"data": [R], ...}` (api/deps.py Shape) as the same with `RFields` for `R`."""
    name = _ref_name(answer)
    wrapper = schemas.get(name or "")
    data = (wrapper or {}).get("properties", {}).get("data", {})
    items = data.get("items", data) if data.get("type") == "array" else data
    resource = _ref_name(items)
    if name is None or wrapper is None or resource is None or resource not in schemas:
        return answer
    fields = resource + SHAPED_SUFFIX
    if fields not in schemas:
        full = schemas[resource]
        schemas[fields] = {
            **{k: v for k, v in full.items() if k != "required"},
            "title": fields,
            "description": (full.get("description", "") + "\n\n" if full.get("description") else "")
            + f"The fields of `{resource}` that `include`/`exclude` keep: any of them may be left out. "
            "Without `include`/`exclude`, every field it requires is there.",
            FIELDS_OF: resource,
        }
    shaped_name = name.replace(f"_{resource}_", f"_{fields}_", 1)
    if shaped_name not in schemas:
        ref = {"$ref": f"#/components/schemas/{fields}"}
        shaped_data = {**data, "items": ref} if data is not items else ref
        schemas[shaped_name] = {**wrapper, "title": wrapper.get("title", name).replace(resource, fields, 1),
                                "properties": {**wrapper["properties"], "data": shaped_data}}
    return {"$ref": f"#/components/schemas/{shaped_name}"}


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref", "")
    return ref.rsplit("/", 1)[1] if ref.startswith("#/components/schemas/") else None


def _drop_null(param: dict[str, Any]) -> None:
    """A query parameter is absent or a string: `anyOf [X, null]` (FastAPI's Optional) is just X."""
    options = param.get("schema", {}).get("anyOf")
    if param.get("in") == "query" and isinstance(options, list):
        rest = [o for o in options if o.get("type") != "null"]
        if len(rest) == 1:
            extra = {k: v for k, v in param["schema"].items() if k != "anyOf"}
            param["schema"] = {**rest[0], **extra}


def _body_fields(schema: dict[str, Any], op: dict[str, Any]) -> set[str]:
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    ref = body.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        body = schema["components"]["schemas"].get(ref.rsplit("/", 1)[1], {})
    return set(body.get("properties", {}))
