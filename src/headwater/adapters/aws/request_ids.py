"""The id of the API request that caused a message, carried through SQS (docs/aws.md, Tracing).

An HTTP function binds its API Gateway request id (`bound`) for the request's duration; every
message sent meanwhile (a commit's outbox hand-over, an ingested run) carries it as the message
attribute `request_id`, and a consumer binds it again while it handles that message, so the
messages its work sends carry it on: one id through the API's logs and traces and every
consumer's, however many queues apart."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

ATTRIBUTE = "request_id"

current: ContextVar[str | None] = ContextVar("headwater_request_id", default=None)


@contextmanager
def bound(request_id: str | None) -> Iterator[None]:
    token = current.set(request_id)
    try:
        yield
    finally:
        current.reset(token)


def attributes(request_id: str | None) -> dict[str, Any]:
    """A message's `MessageAttributes` (SendMessage and SendMessageBatch), none without an id."""
    if not request_id:
        return {}
    return {"MessageAttributes": {ATTRIBUTE: {"DataType": "String", "StringValue": request_id}}}


def of_message(message: Mapping[str, Any]) -> str | None:
    """The id a message carries: as ReceiveMessage answers it, or as a Lambda SQS record has it."""
    received = (message.get("MessageAttributes") or {}).get(ATTRIBUTE) or {}
    recorded = (message.get("messageAttributes") or {}).get(ATTRIBUTE) or {}
    value = received.get("StringValue") or recorded.get("stringValue")
    return str(value) if value else None
