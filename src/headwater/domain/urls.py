"""Which URLs the service may call on a user's behalf (component_url, later webhooks)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def check_http_url(url: str) -> str | None:
    """The problem with a URL as a sentence, or None: http(s) and a hostname are required."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL"
    if parts.scheme not in ("http", "https"):
        return "must use http or https"
    if not parts.hostname:
        return "must have a hostname"
    try:
        _ = parts.port
    except ValueError:
        return "has an invalid port"
    return None


def address_allowed(ip: str, allow_loopback: bool, allow_private: bool) -> bool:
    addr = ipaddress.ip_address(ip)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
    if addr.is_loopback:
        return allow_loopback
    if addr.is_private or addr.is_link_local or addr.is_reserved or addr.is_multicast or addr.is_unspecified:
        return allow_private
    return True
