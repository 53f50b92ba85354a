"""Identifiers and API keys: a SPEC prefix plus random URL-safe characters (DECISIONS.md)."""

from __future__ import annotations

import hashlib
import secrets

PREFIXES = {
    "source": "dc_",
    "component": "sc_",
    "workflow": "p_",
    "webhook": "wh_",
    "subscription": "sub_",
    "org": "o_",
    "user": "u_",
    "deployment": "d_",
    "endpoint": "en_",
    "request": "req_",
    "connected_account": "apn_",
    "snapshot": "ss_",
}

API_KEY_PREFIX = "hw_"


def new_id(kind: str) -> str:
    """24 random URL-safe characters (144 bits) behind the kind's prefix."""
    return PREFIXES[kind] + secrets.token_urlsafe(18)


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    """Keys carry 256 random bits, so a plain SHA-256 is a sound one-way store."""
    return hashlib.sha256(key.encode()).hexdigest()


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def has_prefix(value: str, kind: str) -> bool:
    return value.startswith(PREFIXES[kind])
