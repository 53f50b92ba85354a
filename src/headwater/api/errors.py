"""Every failure as `{"error": sentence, "details"?: {field: [problems]}}` (DECISIONS)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from headwater.domain.errors import HeadwaterError, QuotaExceeded, Unauthorized
from headwater.services.tenant_slots import TenantBusy

log = logging.getLogger("headwater.api")

_STATUS_SENTENCES = {
    404: "No such route.",
    405: "This route does not accept that method.",
}


class ErrorJSON(JSONResponse):
    """Rendered ASCII-only: an error sentence may quote client input, which must never make the
    error itself fail to encode."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


def error_response(status: int, message: str, details: dict | None = None, headers: dict | None = None) -> JSONResponse:
    body: dict = {"error": message}
    if details:
        body["details"] = details
    return ErrorJSON(body, status_code=status, headers=headers)


ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "One human sentence."},
        "details": {"type": "object", "description": "The fields at fault and their problems.",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    },
}
ERROR_REF = {"$ref": "#/components/schemas/Error"}

STATUS_MEANINGS = {
    400: "Malformed request: bad JSON, a missing, mistyped or unknown parameter, a bad cursor.",
    401: "Missing or invalid API key.",
    403: "An org the caller is not a member of.",
    404: "No such resource (or one the caller may not see).",
    409: "Conflict: a name that is taken, or a resource in the wrong state.",
    413: "The body is too large.",
    415: "The body is not `application/json`.",
    422: "Well-formed but invalid: code that does not load, props that fail validation.",
    429: "Quota or rate limit exceeded (see Retry-After).",
    502: "The source's own response could not be given.",
    503: "A dependency (the runner, the bundler) failed.",
    504: "The source did not respond in time.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error statuses, each with the error body schema."""
    return {status: {"description": STATUS_MEANINGS[status], "content": {"application/json": {"schema": ERROR_REF}}}
            for status in statuses}


def _field(loc: tuple) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


UNKNOWN_FIELD = "is not a field of this request"


def validation_response(errors: Sequence[Any]) -> JSONResponse:
    """400 naming every field at fault; unknown fields are named as such, since a misspelt field
    silently ignored would deploy something other than what the caller asked for."""
    details: dict[str, list[str]] = {}
    unknown: list[str] = []
    for err in errors:
        if err.get("type") == "json_invalid":
            return error_response(400, "The request body is not valid JSON.")
        field = _field(tuple(err.get("loc", ())))
        if err.get("type") == "extra_forbidden":
            unknown.append(field)
            details.setdefault(field, []).append(UNKNOWN_FIELD)
        else:
            details.setdefault(field, []).append(err.get("msg", "invalid"))
    if unknown and len(unknown) == len(details):
        return error_response(400, f"The request has unknown fields: {', '.join(unknown)}.", details)
    return error_response(400, f"The request has missing or mistyped parameters: {', '.join(details)}.", details)


def install(app: FastAPI) -> None:
    @app.exception_handler(HeadwaterError)
    async def headwater_error(request: Request, exc: HeadwaterError) -> JSONResponse:
        headers = {}
        if isinstance(exc, Unauthorized):
            headers["WWW-Authenticate"] = "Bearer"
        if isinstance(exc, QuotaExceeded | TenantBusy):
            headers["Retry-After"] = str(exc.retry_after)
        return error_response(exc.status, exc.message, exc.details, headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response(exc.errors())

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) and exc.status_code not in _STATUS_SENTENCES else None
        return error_response(exc.status_code, message or _STATUS_SENTENCES.get(exc.status_code, "Request failed."),
                              headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def server_fault(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "The server failed while handling the request.")
