"""EventsFunction: a source's event summaries, event deletion, redelivery and SSE."""

from headwater.api import events, replay, sse
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Events", [events.router, replay.router, sse.router])
