"""EventsFunction: a source's event summaries, event deletion, redelivery and SSE; runs on record."""

from headwater.api import events, replay, runs, sse
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Events", [events.router, replay.router, sse.router, runs.router])
