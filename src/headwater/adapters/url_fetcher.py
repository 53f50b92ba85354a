"""Fetching component code from a URL, within a size and time limit, never from a refused address.

The time limit (`HEADWATER_URL_FETCH_TIMEOUT_S`) bounds the whole exchange, from resolving the
host to the last byte of the body: the fetch is a coroutine under one deadline (adapters/outbound.py),
awaited by the request that asked for it holding no thread (the name is resolved on the threads
kept for that), so a server that drips its answer a byte at a time is cut off like one that says
nothing.

The host is resolved once, every address it resolves to is checked by the URL policy
(`domain.urls`), and the request goes to the checked address with the original Host header and
TLS server name: a DNS answer that changes between the check and the connection (rebinding) cannot
steer the fetch to a private address, and odd spellings of an address (`0177.0.0.1`) are refused
as a 422 rather than reaching the HTTP client.
"""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit, urlunsplit

import httpx

from headwater.adapters.outbound import read_body, resolve_off_loop
from headwater.domain.errors import Invalid
from headwater.domain.urls import Refused, allowed_addresses, check_http_url
from headwater.settings import Settings


def resolve(host: str) -> list[str]:
    """Every address `host` resolves to for TCP (the policy checks them all)."""
    return [str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)]


class HttpUrlFetcher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def _refuse(self, url: str, problem: str) -> Invalid:
        return Invalid(f"Could not fetch component_url {url}: {problem}.", {"component_url": [problem]})

    def _address(self, url: str, host: str) -> str:
        """The checked address to connect to."""
        try:
            return allowed_addresses(host, resolve, self.settings.allow_loopback_urls,
                                     self.settings.allow_private_urls)[0]
        except Refused as e:
            raise self._refuse(url, str(e)) from None

    async def fetch_text(self, url: str) -> str:
        problem = check_http_url(url)
        if problem:
            raise Invalid(f"component_url {problem}.", {"component_url": [problem]})
        timeout_s = self.settings.url_fetch_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                status, body = await self._fetch(url)
        except (TimeoutError, httpx.TimeoutException):
            raise self._refuse(url, f"no answer within {timeout_s:g} s") from None
        except httpx.HTTPError as e:
            raise self._refuse(url, f"the connection failed ({type(e).__name__})") from None
        if status != 200:
            raise self._refuse(url, f"the server answered {status}")
        if body is None:
            raise self._refuse(url, f"the code is over {self.settings.url_fetch_max_bytes} bytes")
        try:
            return body.decode()
        except UnicodeDecodeError:
            raise self._refuse(url, "the body is not UTF-8 text") from None

    async def _fetch(self, url: str) -> tuple[int, bytes | None]:
        """The host resolved and checked, then the GET to the checked address."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        address = await resolve_off_loop(self._address, url, host)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        netloc = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        target = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
        host_header = host if parts.port is None else f"{host}:{parts.port}"
        return await self._get(target, host_header, host)

    async def _get(self, target: str, host_header: str, host: str) -> tuple[int, bytes | None]:
        """The status and, for a 200, the body (None when over the size limit)."""
        async with httpx.AsyncClient(timeout=self.settings.url_fetch_timeout_s, follow_redirects=False,
                                     trust_env=False) as client, \
                client.stream("GET", target, headers={"host": host_header},
                              extensions={"sni_hostname": host}) as response:
            if response.status_code != 200:
                return response.status_code, b""
            return 200, await read_body(response, self.settings.url_fetch_max_bytes)
