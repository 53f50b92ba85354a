"""`GET /v1/sources/{id}/sse`: a source's events as server-sent events (DECISIONS: SSE).

Frames carry `id: <event id>`, `event: <channel>` ("emit" for the default channel) and the summary
item as `data`; a `: heartbeat` comment keeps idle connections open. `Last-Event-ID` replays the
retained events after that id, so a reconnecting reader misses nothing still retained.

A bounded stream (`HEADWATER_SSE_MAX_S` > 0, the AWS deployment: API Gateway buffers a Lambda's
answer whole) ends as soon as it has sent events, else after the bound with none; EventSource
clients reconnect with `Last-Event-ID`, so an event reaches them about a second after it is stored,
not at the bound (docs/aws.md, Consistency with local). It looks for events each `BOUNDED_POLL_S`
and listens to nothing: on AWS its function's process commits no events, so a bounded stream
hears of none, and the emulated deployment (one process) must not hear of them either. Its answer
tells the client to reconnect after `RECONNECT_MS` (EventSource's default is about 3 s), and
carries its cursor as the last event id even when it has no events (an `id:` field alone
dispatches nothing): a client that has had no event yet resumes where this answer left off, not
"from now" again, which would skip what was stored while it reconnected.

A stream lasts no longer than its caller's right to it (issue 31): every `RECHECK_S` (2 s), and
before it sends any event it has read, it looks its API key up again and checks that the caller
may still see the emitter (off the event loop, like its reads). A key revoked, or a source or
workflow deleted or out of the caller's reach, ends the stream within about 2 s, and no event
committed after a revocation the check has seen is sent; the client's reconnect is then a 401
(or 404). A bounded stream checks the same way within its life.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from headwater.api.deps import PrincipalDep, ServicesDep, bearer_key
from headwater.api.routing import Router
from headwater.bootstrap import Services
from headwater.domain.errors import Forbidden, NotFound, Unauthorized
from headwater.domain.events import EventId
from headwater.domain.models import Principal
from headwater.services.events import parse_event_id

router = Router(tags=["events"])
HEARTBEAT_S = 15.0
# How often an open stream asks again whether its caller may read it (docs/security.md): a revoked
# key, or an emitter the caller can no longer see, ends the stream within this (plus one lookup).
RECHECK_S = 2.0
BOUNDED_POLL_S = 1.0
RECONNECT_MS = 250
ACCESS_ENDED = b": the stream's key or access ended\n\n"

Check = Callable[[], None]


def frame(item: dict, channel: str) -> bytes:
    data = json.dumps(item, separators=(",", ":"))
    return f"id: {item['id']}\nevent: {channel or 'emit'}\ndata: {data}\n\n".encode()


def access_check(svc: Services, key: str | None, emitter_id: str) -> Check:
    """Raises as the request would now be refused: the key is gone (401) or the caller may no longer
    see the emitter (404). A hash lookup of the key, its user's orgs, and the emitter's namespace."""
    def check() -> None:
        svc.events.check(svc.accounts.authenticate(key), emitter_id)
    return check


def read_allowed(svc: Services, emitter_id: str, channel: str, last: EventId | None, read: bool, check: Check,
                 check_due: bool) -> tuple[list[bytes], EventId | None] | None:
    """The frames of the events after `last` (when `read`) and the last one's id, or None when the
    caller may no longer have them. The access is checked after the read whenever there is something
    to send: if it still holds, every event read was committed before any revocation that the check
    did not see. Made on a worker thread: the events are component output (up to 100 of 1 MB
    each), not to be encoded on the event loop."""
    items = svc.events.newer_than(emitter_id, channel, last) if read else []
    if items or check_due:
        try:
            check()
        except (Unauthorized, NotFound, Forbidden):
            return None
    return [frame(item, channel) for item in items], EventId.parse(items[-1]["id"]) if items else last


def bounded_tail(last: EventId | None) -> bytes:
    """What a bounded answer carries besides its events: how soon to reconnect, and where from."""
    return f"retry: {RECONNECT_MS}\n".encode() + (f"id: {last}\n".encode() if last is not None else b"")


async def stream(svc: Services, request: Request, source_id: str, channel: str,
                 last: EventId | None, check: Check) -> AsyncIterator[bytes]:
    bus = svc.adapters.bus
    limit = svc.settings.sse_max_s
    signal = bus.listen(source_id, channel) if limit <= 0 else asyncio.Event()  # bounded: never set
    now = time.monotonic()
    ends = now + limit if limit > 0 else float("inf")
    poll_s = BOUNDED_POLL_S if limit > 0 else HEARTBEAT_S
    next_read, next_check, next_heartbeat = now, now + RECHECK_S, now + HEARTBEAT_S
    try:
        while now < ends:
            read, check_due = signal.is_set() or now >= next_read, now >= next_check
            if read or check_due:
                if read:
                    signal.clear()
                allowed = await run_in_threadpool(read_allowed, svc, source_id, channel, last, read, check, check_due)
                if allowed is None:
                    yield ACCESS_ENDED
                    return
                frames, last = allowed
                if read:
                    next_read = now + poll_s
                if frames or check_due:
                    next_check = now + RECHECK_S
                if frames and limit > 0:
                    # Bounded means buffered (API Gateway hands the client a Lambda's answer whole):
                    # the events reach the client only when the answer ends, so it ends once it has
                    # some; the client's next request resumes from their last id (Last-Event-ID).
                    yield b"".join([bounded_tail(None), *frames])
                    return
                for framed in frames:
                    yield framed
                if frames:
                    next_heartbeat = time.monotonic() + HEARTBEAT_S
            wake = min(next_read, next_check, ends, next_heartbeat if limit <= 0 else ends)
            try:
                await asyncio.wait_for(signal.wait(), timeout=max(0.05, wake - time.monotonic()))
            except TimeoutError:
                if await request.is_disconnected():
                    return
                if limit <= 0 and time.monotonic() >= next_heartbeat:
                    next_heartbeat = time.monotonic() + HEARTBEAT_S
                    yield b": heartbeat\n\n"
            now = time.monotonic()
        yield bounded_tail(last) + b"\n"  # the bound passed with no event (an unbounded stream never ends here)
    finally:
        if limit <= 0:
            bus.unlisten(source_id, channel, signal)


class EventStream(StreamingResponse):
    media_type = "text/event-stream"


STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-sent events, open until the client leaves or its access ends (the API key "
                         "revoked, the emitter deleted or out of reach: within about 2 s, nothing after it "
                         "sent): `id` the event id, `event` the channel (`emit` for the default one), `data` "
                         "the event summary as JSON.",
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
    check = access_check(svc, bearer_key(request), emitter_id)
    return EventStream(stream(svc, request, emitter_id, channel, last, check),
                       headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/sources/{source_id}/sse", response_class=EventStream, responses=STREAM_DOC)
def source_sse(
    source_id: str, request: Request, svc: ServicesDep, caller: PrincipalDep, event_name: str = Query("")
) -> EventStream:
    return sse_response(svc, request, caller, source_id, event_name)
