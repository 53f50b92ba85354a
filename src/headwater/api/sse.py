"""`GET /v1/sources/{id}/sse`: a source's events as server-sent events (DECISIONS: SSE).

Frames carry `id: <event id>`, `event: <channel>` ("emit" for the default channel) and the summary
item as `data`; a `: heartbeat` comment keeps idle connections open. `Last-Event-ID` replays the
retained events after that id, so a reconnecting reader misses nothing still retained.

A bounded stream (`HEADWATER_SSE_MAX_S` > 0, the AWS deployment: API Gateway buffers a Lambda's
answer whole) ends as soon as it has sent events, else after the bound with none; EventSource
clients reconnect with `Last-Event-ID`, so an event reaches them about a second after it is stored,
not at the bound.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from headwater.api.deps import PrincipalDep, ServicesDep
from headwater.api.routing import Router
from headwater.bootstrap import Services
from headwater.domain.events import EventId
from headwater.domain.models import Principal
from headwater.services.events import parse_event_id

router = Router(tags=["events"])
HEARTBEAT_S = 15.0


def frame(item: dict, channel: str) -> bytes:
    data = json.dumps(item, separators=(",", ":"))
    return f"id: {item['id']}\nevent: {channel or 'emit'}\ndata: {data}\n\n".encode()


def newer_frames(svc: Services, source_id: str, channel: str,
                 last: EventId | None) -> tuple[list[bytes], EventId | None]:
    """The frames of the events after `last`, and the last one's id. Made on a worker thread: the
    events are component output (up to 100 of 1 MB each), not to be encoded on the event loop."""
    items = svc.events.newer_than(source_id, channel, last)
    return [frame(item, channel) for item in items], EventId.parse(items[-1]["id"]) if items else last


async def stream(svc: Services, request: Request, source_id: str, channel: str,
                 last: EventId | None) -> AsyncIterator[bytes]:
    bus = svc.adapters.bus
    signal = bus.listen(source_id, channel)
    limit = svc.settings.sse_max_s
    ends = time.monotonic() + limit if limit > 0 else float("inf")
    # A bounded stream (one Lambda invocation) hears no other process's events: it looks each second.
    wait_s = 1.0 if limit > 0 else HEARTBEAT_S
    try:
        while time.monotonic() < ends:
            frames, last = await run_in_threadpool(newer_frames, svc, source_id, channel, last)
            for framed in frames:
                yield framed
            if frames and limit > 0:
                # Bounded means buffered (API Gateway hands the client a Lambda's answer whole): the
                # events reach the client only when the answer ends, so it ends once it has some;
                # the client's next request resumes from their last id (Last-Event-ID).
                return
            try:
                await asyncio.wait_for(signal.wait(), timeout=min(wait_s, max(0.05, ends - time.monotonic())))
                signal.clear()
            except TimeoutError:
                if await request.is_disconnected():
                    return
                if limit <= 0:
                    yield b": heartbeat\n\n"
    finally:
        bus.unlisten(source_id, channel, signal)


class EventStream(StreamingResponse):
    media_type = "text/event-stream"


STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-sent events, open until the client leaves: `id` the event id, `event` the "
                         "channel (`emit` for the default one), `data` the event summary as JSON.",
          "content": {"text/event-stream": {"schema": {"type": "string"}}}},
}


def sse_response(svc: Services, request: Request, caller: Principal, emitter_id: str, channel: str) -> EventStream:
    """The stream of a source's or a workflow's channel: after `Last-Event-ID`, else from now."""
    svc.events.check(caller, emitter_id)
    last = parse_event_id(request.headers.get("last-event-id"), "Last-Event-ID")
    if last is None:
        # A new reader starts from now, not from the retained history.
        newest = svc.events.summaries(caller, emitter_id, 1, False, channel)["data"]
        last = EventId.parse(newest[0]["id"]) if newest else EventId(0, 0)
    return EventStream(stream(svc, request, emitter_id, channel, last),
                       headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/sources/{source_id}/sse", response_class=EventStream, responses=STREAM_DOC)
def source_sse(
    source_id: str, request: Request, svc: ServicesDep, caller: PrincipalDep, event_name: str = Query("")
) -> EventStream:
    return sse_response(svc, request, caller, source_id, event_name)
