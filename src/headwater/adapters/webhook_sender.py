"""Sending webhook deliveries: one request, no redirects, to an address the URL policy allows, the
whole exchange within 15 s (DECISIONS; HEADWATER_DELIVERY_TIMEOUT_S), from connecting to the last
byte of the answer's headers.

The host is resolved once and the request goes to the address that was checked (with the
original Host header and TLS server name), so a DNS answer that changes between check and
connect (rebinding) cannot steer a delivery to a private address.

The exchange runs on the adapter's own event loop under one deadline (adapters/outbound.py): a
receiver that drips its answer a byte at a time is cut off at 15 s like one that says nothing. Its
status is the outcome: the caller has it as soon as the headers are in, and a body still arriving
is read (or dropped at the deadline) without it.
"""

from __future__ import annotations

import asyncio
import socket
import time
from urllib.parse import urlsplit, urlunsplit

import httpx

from headwater.adapters.outbound import OutboundLoop, read_body
from headwater.domain.urls import address_allowed
from headwater.ports import SendResult
from headwater.settings import Settings

_KEEP_BODY_BYTES = 64 * 1024  # an answer's body up to this is read, so its connection is reused


class HttpWebhookSender:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.outbound = OutboundLoop()
        self.deadline_s = settings.delivery_timeout_s
        self.client = httpx.AsyncClient(timeout=self.deadline_s, follow_redirects=False, trust_env=False)
        self._draining: set[asyncio.Task[None]] = set()  # answers' bodies still being read

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
        request = self.client.build_request(method, target, content=body or None,
                                            headers={**headers, "host": host_header}, extensions={"sni_hostname": host})
        try:
            response = self.outbound.run(self._exchange(request), self.deadline_s)
        except (TimeoutError, httpx.TimeoutException):
            return result(None, f"no answer within {self.deadline_s:g} s")
        except httpx.HTTPError as e:
            return result(None, f"the connection failed: {type(e).__name__}: {e}"[:500])
        return result(response.status_code, None if response.is_success else f"the receiver answered "
                      f"{response.status_code}", response.headers.get("retry-after"))

    async def _exchange(self, request: httpx.Request) -> httpx.Response:
        """The answer's status and headers by the deadline. Its body is read after the caller has
        the outcome, by the same deadline (a short one whole, so the connection serves the next
        delivery; a longer one, or one still arriving at the deadline, closes the connection)."""
        deadline = asyncio.get_running_loop().time() + self.deadline_s
        async with asyncio.timeout_at(deadline):
            response = await self.client.send(request, stream=True)
        draining = asyncio.get_running_loop().create_task(self._drain(response, deadline))
        self._draining.add(draining)
        draining.add_done_callback(self._draining.discard)
        return response

    @staticmethod
    async def _drain(response: httpx.Response, deadline: float) -> None:
        try:
            async with asyncio.timeout_at(deadline):
                await read_body(response, _KEEP_BODY_BYTES)
        except (TimeoutError, httpx.HTTPError):
            pass  # the outcome was the status; what follows it changes nothing
        finally:
            await response.aclose()
