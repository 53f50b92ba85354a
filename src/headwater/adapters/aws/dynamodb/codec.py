"""How Headwater's values become DynamoDB items: attribute values, bodies and sort keys.

Records are kept as one JSON `body` attribute rather than one attribute per field: JSON keeps
ints, floats and nested props exactly as the domain wrote them (DynamoDB numbers would come back
as Decimals and its maps lose the distinction between 1 and 1.0), and a body is one thing to
compress. Only what keys, conditions and counters need is a typed attribute of its own.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, NoReturn

from headwater.domain.errors import PayloadTooLarge
from headwater.domain.events import EventId

Item = dict[str, dict[str, Any]]  # a low-level DynamoDB item: name -> {"S": ...} / {"N": ...} / ...

ITEM_LIMIT = 400 * 1024  # DynamoDB's item size limit, names and values together
BODY_LIMIT = ITEM_LIMIT - 8 * 1024  # room left for the keys and small attributes beside the body
# A body larger than this is stored zlib-compressed when that makes it smaller: DynamoDB bills a
# write unit per KB of item, so a 1 KB event body (about 56% compressed) with its metadata goes
# from two units to one, in its put, its transaction's copy and its delete (docs/aws.md, Cost).
COMPRESS_ABOVE = 512

_MS_DIGITS, _SEQ_DIGITS = 16, 12
_MAX_MS, _MAX_SEQ = 10**_MS_DIGITS - 1, 10**_SEQ_DIGITS - 1


def s(value: str) -> dict[str, Any]:
    return {"S": value}


def n(value: int | float) -> dict[str, Any]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def text(item: Item, name: str) -> str:
    return str(item[name]["S"])


def number(item: Item, name: str, default: int = 0) -> int:
    value = item.get(name)
    return int(value["N"]) if value else default


def real(item: Item, name: str, default: float = 0.0) -> float:
    value = item.get(name)
    return float(value["N"]) if value else default


def key(pk: str, sk: str) -> Item:
    return {"pk": s(pk), "sk": s(sk)}


def body(value: Any, what: str = "item") -> Item:
    """`value` as JSON: plain text while small, zlib-compressed binary when large. Raises
    PayloadTooLarge when even compressed it cannot fit in one item."""
    return text_body(json.dumps(value, separators=(",", ":"), ensure_ascii=False), what)


def text_body(text: str, what: str = "item") -> Item:
    """`body` of JSON already encoded."""
    raw = text.encode()
    if len(raw) <= COMPRESS_ABOVE:
        return {"body": {"S": raw.decode()}}
    packed = zlib.compress(raw, 6)
    if len(packed) >= len(raw):
        return {"body": {"S": raw.decode()}} if len(raw) <= BODY_LIMIT else _too_large(what, raw, packed)
    if len(packed) > BODY_LIMIT:
        _too_large(what, raw, packed)
    return {"body_z": {"B": packed}}


def _too_large(what: str, raw: bytes, packed: bytes) -> NoReturn:
    raise PayloadTooLarge(
        f"The {what} is {len(raw)} bytes of JSON ({len(packed)} compressed); DynamoDB stores at most "
        f"{ITEM_LIMIT} bytes per item.",
        {what: ["too large to store"]},
    )


def load(item: Item) -> Any:
    return json.loads(load_text(item))


def load_text(item: Item) -> str:
    """The body's JSON text."""
    if "body_z" in item:
        return zlib.decompress(item["body_z"]["B"]).decode()
    return str(item["body"]["S"])


def size(item: Item) -> int:
    """About what DynamoDB counts against its limits: names plus values (numbers approximated by
    their text, which is never smaller)."""
    total = 0
    for name, value in item.items():
        total += len(name.encode())
        for kind, v in value.items():
            if kind == "S":
                total += len(v.encode())
            elif kind == "B" or kind == "N":
                total += len(v)
            else:
                total += len(json.dumps(v))
    return total


def seq_key(seq: int) -> str:
    """A list position as a sort key: zero-padded so that string order is number order."""
    return f"{seq:020d}"


def event_key(event_id: EventId) -> str:
    """`<ms 16 digits>-<seq 12 digits>`: string order is (ms, seq) order. Ids outside that range
    (only ever bounds typed by a caller, never stored ids) are clamped to it."""
    return f"{min(max(event_id.ms, 0), _MAX_MS):0{_MS_DIGITS}d}-{min(max(event_id.seq, 0), _MAX_SEQ):0{_SEQ_DIGITS}d}"


def storable(event_id: EventId) -> bool:
    return 0 <= event_id.ms <= _MAX_MS and 0 <= event_id.seq <= _MAX_SEQ


LOWEST_EVENT_KEY = event_key(EventId(0, 0))
HIGHEST_EVENT_KEY = event_key(EventId(_MAX_MS, _MAX_SEQ))


def events_pk(emitter_id: str, channel: str) -> str:
    """Emitter ids never contain `#`, so the channel is everything after the first one."""
    return f"{emitter_id}#{channel}"
