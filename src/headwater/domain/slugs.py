"""Name slugs, made unique in a namespace by an incrementing suffix (SPEC: name)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

_NON_SLUG = re.compile(r"[^a-z0-9]+")


def slugify(name: str) -> str:
    slug = _NON_SLUG.sub("-", name.lower()).strip("-")
    return slug or "component"


def candidate_slugs(base: str) -> Iterator[str]:
    """`base`, then `base-1`, `base-2`, ...: a store claims each by conditional insert until one
    is free, so no namespace is ever scanned."""
    yield base
    for n in itertools.count(1):
        yield f"{base}-{n}"
