"""Which URLs and network addresses the service (or component code) may reach on a user's behalf.

One policy serves `component_url` fetches, webhooks, `$.send.http` and the runners' egress proxy
(DECISIONS.md: "URLs that resolve to loopback, private, link-local, CGNAT or metadata addresses (in
any spelling) are refused unless the operator allows them"). Pure functions: resolving a name is
the caller's I/O, passed in as a function, so every caller checks exactly the addresses it will
then connect to (resolve once, connect to the checked address: no DNS rebinding window).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d (:: and ::1 aside)
# One inet_aton part: hex (0x...), octal (leading 0) or decimal.
_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


class Refused(ValueError):
    """A target the policy refuses; the message is the sentence shown to the user."""


class Unresolved(Refused):
    """A host name that does not resolve (nothing to connect to, rather than a refusal)."""


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


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address C's inet_aton (and so getaddrinfo, curl, many HTTP clients) reads in
    `host`: 1 to 4 dot-separated parts, each decimal, octal (0177) or hex (0x7f), the last one
    filling the remaining bytes (`2130706433`, `127.1`, `0x7f.1`)."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_PART.fullmatch(p) for p in parts):
        return None
    try:
        values = [int(p, 0) if not (len(p) > 1 and p[0] == "0" and p[1] not in "xX") else int(p, 8) for p in parts]
    except ValueError:  # "0x" alone
        return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for i, v in enumerate(head):
        number += v << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def literal_address(host: str) -> IPAddress | None:
    """The address a host string names literally, in any spelling (`[::1]`, `0177.0.0.1`), or
    None for a name that needs resolving."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return _inet_aton(text)


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries (6to4, NAT64, Teredo): reaching one of those
    reaches the IPv4 address through a relay, so it is judged like the IPv4 address too."""
    found: list[ipaddress.IPv4Address] = []
    if addr in _SIX_TO_FOUR and addr.sixtofour is not None:
        found.append(addr.sixtofour)
    if any(addr in net for net in _NAT64):
        found.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    if addr.teredo is not None:
        found.extend(addr.teredo)
    return found


def address_refusal(addr: IPAddress, allow_loopback: bool, allow_private: bool) -> str | None:
    """Why the policy refuses an address (a phrase such as "a private address"), or None."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return "an IPv4-mapped IPv6 address"
        if addr in _IPV4_COMPATIBLE and int(addr) > 1:
            return "an IPv4-compatible IPv6 address"
        for inner in _embedded_ipv4(addr):
            if address_refusal(inner, allow_loopback, allow_private):
                return f"an IPv6 address that embeds {inner}"
    if addr.is_loopback or addr.is_unspecified:
        return None if allow_loopback else "a loopback address" if addr.is_loopback else "the unspecified address"
    if addr.is_multicast or addr.is_reserved or addr.is_link_local or addr.is_private or not addr.is_global:
        # not is_global covers CGNAT 100.64.0.0/10, documentation and benchmark ranges
        return None if allow_private else "a private, link-local or reserved address"
    return None


def address_allowed(ip: str, allow_loopback: bool, allow_private: bool) -> bool:
    """Whether an address (as getaddrinfo gives it, or a literal host) may be connected to."""
    addr = literal_address(ip)
    if addr is None or unusual_spelling(ip):
        return False
    return address_refusal(addr, allow_loopback, allow_private) is None


def unusual_spelling(host: str) -> bool:
    """An IPv4 literal not in dotted-quad decimal (`0177.0.0.1`, `2130706433`, `0x7f.1`): only
    ever used to slip a private address past a filter, so refused whatever it names."""
    text = host.strip()
    addr = _inet_aton(text)
    return addr is not None and str(addr) != text


def allowed_addresses(host: str, resolve: Callable[[str], list[str]], allow_loopback: bool,
                      allow_private: bool) -> list[str]:
    """The addresses to connect to for `host`: the literal itself, or every address the name
    resolves to (resolved once, by `resolve`), all of them checked. Raises Refused saying why
    when any is refused (a name with one private answer among public ones is refused), or when
    the name does not resolve (OSError from `resolve`)."""
    if unusual_spelling(host):
        raise Refused(f"refused by policy: {host} is an unusual spelling of the address {_inet_aton(host.strip())}")
    literal = literal_address(host)
    if literal is not None:
        problem = address_refusal(literal, allow_loopback, allow_private)
        if problem:
            raise Refused(f"refused by policy: {literal} is {problem}")
        return [str(literal)]
    try:
        addresses = list(dict.fromkeys(resolve(host)))
    except OSError:
        raise Unresolved(f"the host {host} does not resolve") from None
    if not addresses:
        raise Unresolved(f"the host {host} does not resolve")
    for address in addresses:
        addr = literal_address(address)
        problem = "not an address" if addr is None else address_refusal(addr, allow_loopback, allow_private)
        if problem:
            raise Refused(f"refused by policy: {host} resolves to {address}, {problem}")
    return addresses
