"""Cursor pagination: newest first, opaque cursors that stay valid while items are inserted.

Every listed item has a monotonically increasing integer `seq`; a cursor wraps one seq.
`after` walks to older items (smaller seq), `before` to newer ones.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Generic, TypeVar

from headwater.domain.errors import BadRequest

T = TypeVar("T")

DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MAX_SEQ = 2**63 - 1  # SQLite's INTEGER (int64); DynamoDB numbers hold more, so this bounds both stores
MAX_CURSOR_CHARS = 64  # encode_cursor(MAX_SEQ) is 34 characters


@dataclass(frozen=True)
class PageRequest:
    limit: int = DEFAULT_LIMIT
    after: int | None = None
    before: int | None = None


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    seqs: list[int]
    total_count: int

    def page_info(self) -> dict:
        return {
            "total_count": self.total_count,
            "count": len(self.items),
            "start_cursor": encode_cursor(self.seqs[0]) if self.seqs else None,
            "end_cursor": encode_cursor(self.seqs[-1]) if self.seqs else None,
        }


def encode_cursor(seq: int) -> str:
    raw = json.dumps({"s": seq}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, field: str) -> int:
    """The seq a cursor wraps. A cursor is client input: anything this service could not have issued
    (not base64 JSON, not {"s": n}, n negative or past SQLite's int64, nested or oversized) is a 400,
    never a value that reaches the store."""
    if len(cursor) <= MAX_CURSOR_CHARS:
        try:
            padded = cursor + "=" * (-len(cursor) % 4)
            decoded = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
            value = decoded["s"] if isinstance(decoded, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEQ:
                return value
        except (ValueError, KeyError, TypeError, RecursionError):
            pass
    raise BadRequest(f"`{field}` is not a cursor this service issued.", {field: ["invalid cursor"]})


def page_request(
    limit: int | str | None, after: str | None, before: str | None, default_limit: int = DEFAULT_LIMIT
) -> PageRequest:
    if limit is None or limit == "":
        n = default_limit
    else:
        try:
            n = int(limit)
        except (TypeError, ValueError):
            raise BadRequest("`limit` must be an integer.", {"limit": ["not an integer"]}) from None
    if not 1 <= n <= MAX_LIMIT:
        raise BadRequest(
            f"`limit` must be between 1 and {MAX_LIMIT}.", {"limit": [f"must be 1..{MAX_LIMIT}"]}
        )
    if after and before:
        raise BadRequest("Pass `after` or `before`, not both.", {"after": ["conflicts with before"]})
    return PageRequest(
        limit=n,
        after=decode_cursor(after, "after") if after else None,
        before=decode_cursor(before, "before") if before else None,
    )


def paginate(rows: list[tuple[int, T]], request: PageRequest) -> Page[T]:
    """Pages an in-memory list of (seq, item) pairs; the stores page in SQL with the same rules."""
    ordered = sorted(rows, key=lambda r: r[0], reverse=True)
    total = len(ordered)
    if request.after is not None:
        window = [r for r in ordered if r[0] < request.after][: request.limit]
    elif request.before is not None:
        window = [r for r in ordered if r[0] > request.before][-request.limit :]
    else:
        window = ordered[: request.limit]
    return Page(items=[r[1] for r in window], seqs=[r[0] for r in window], total_count=total)
