"""Reading a request body from ASGI messages without holding more than a bound in memory."""

from __future__ import annotations

from starlette.types import Receive


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it is over `limit` bytes (the rest is not read)."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)
