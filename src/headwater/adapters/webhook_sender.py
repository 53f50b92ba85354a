"""Sending webhook deliveries: one POST, 15 s, no redirects, to an address the URL policy allows.

The host is resolved once and the request goes to the address that was checked (with the
original Host header and TLS server name), so a DNS answer that changes between check and
connect (rebinding) cannot steer a delivery to a private address.
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit, urlunsplit

import httpx

from headwater.domain.routing import DELIVERY_TIMEOUT_S
from headwater.domain.urls import address_allowed
from headwater.ports import SendResult
from headwater.settings import Settings


class HttpWebhookSender:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = httpx.Client(timeout=DELIVERY_TIMEOUT_S, follow_redirects=False, trust_env=False)

    def _address(self, host: str, port: int) -> str:
        """The checked address to connect to; ValueError saying why when there is none."""
        try:
            infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        except socket.gaierror:
            raise ValueError(f"the host {host} does not resolve") from None
        addresses = [str(info[4][0]) for info in infos]
        allow = (self.settings.allow_loopback_urls, self.settings.allow_private_urls)
        refused = [a for a in addresses if not address_allowed(a, *allow)]
        if refused or not addresses:
            raise ValueError(f"refused by policy: {host} resolves to a private or reserved address ({refused[0]})")
        return addresses[0]

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> SendResult:
        return self.request("POST", url, body, headers)

    def request(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> SendResult:
        started = time.monotonic()

        def result(status: int | None, error: str | None = None, retry_after: str | None = None) -> SendResult:
            return SendResult(status, error, retry_after, int((time.monotonic() - started) * 1000))

        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            address = self._address(host, port)
        except ValueError as e:
            return result(None, str(e))
        netloc = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        target = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
        host_header = host if parts.port is None else f"{host}:{parts.port}"
        try:
            response = self.client.request(method, target, content=body or None,
                                           headers={**headers, "host": host_header}, extensions={"sni_hostname": host})
        except httpx.TimeoutException:
            return result(None, f"no answer within {DELIVERY_TIMEOUT_S:g} s")
        except httpx.HTTPError as e:
            return result(None, f"the connection failed: {type(e).__name__}: {e}"[:500])
        return result(response.status_code, None if response.is_success else f"the receiver answered "
                      f"{response.status_code}", response.headers.get("retry-after"))
