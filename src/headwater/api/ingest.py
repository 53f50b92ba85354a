"""`{public_url}/http/{endpoint_id}[/sub/path]`: the HTTP interface of sources, any method."""

from __future__ import annotations

from fastapi import Request, Response

from headwater.api.deps import ServicesDep
from headwater.api.routing import Router
from headwater.domain.errors import PayloadTooLarge
from headwater.services.ingest import http_event

router = Router(tags=["http interface"])
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


async def _body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit:
        raise PayloadTooLarge(f"The body is over {limit} bytes.")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"The body is over {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


@router.api_route("/http/{endpoint_id}", methods=METHODS)
@router.api_route("/http/{endpoint_id}/{path:path}", methods=METHODS, include_in_schema=False)
async def receive(endpoint_id: str, request: Request, svc: ServicesDep, path: str = "") -> Response:
    body = await _body(request, svc.settings.http_max_body_bytes)
    event = http_event(
        request.method,
        "/" + path,
        list(request.query_params.multi_items()),
        [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]],
        body,
    )
    answer = await svc.ingest.receive(endpoint_id, event)
    return Response(content=answer.body, status_code=answer.status, headers=answer.headers)
