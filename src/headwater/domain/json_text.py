"""The compact JSON text that events, run records and task rows are stored and measured in."""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
# The C encoder JSONEncoder.encode makes anew on every call, made once: that setup was most of the
# cost of encoding a small value, and a hot source encodes several per run. No check for cycles:
# what is encoded here came from JSON or is built of it.
_C_COMPACT = (None if c_make_encoder is None
              else c_make_encoder(None, str, encode_basestring, None, ":", ",", False, False, True))


def compact_json(value: Any) -> str:
    """JSON without spaces, non-ASCII kept as is; what JSON cannot hold becomes its `str`."""
    if _C_COMPACT is None:
        return _COMPACT.encode(value)
    return "".join(_C_COMPACT(value, 0))
