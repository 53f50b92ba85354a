"""Fetching component code from a URL, within a size and time limit, never from a private address."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx

from headwater.domain.errors import Invalid
from headwater.domain.urls import address_allowed, check_http_url
from headwater.settings import Settings


class HttpUrlFetcher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def _refuse(self, url: str, problem: str) -> Invalid:
        return Invalid(f"Could not fetch component_url {url}: {problem}.", {"component_url": [problem]})

    def _check_address(self, url: str) -> None:
        host = urlsplit(url).hostname or ""
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except socket.gaierror:
            raise self._refuse(url, "the host name does not resolve") from None
        allow = (self.settings.allow_loopback_urls, self.settings.allow_private_urls)
        for info in infos:
            if not address_allowed(str(info[4][0]), *allow):
                raise self._refuse(url, "the host resolves to a private or reserved address")

    def fetch_text(self, url: str) -> str:
        problem = check_http_url(url)
        if problem:
            raise Invalid(f"component_url {problem}.", {"component_url": [problem]})
        self._check_address(url)
        limit = self.settings.url_fetch_max_bytes
        try:
            with httpx.Client(timeout=self.settings.url_fetch_timeout_s, follow_redirects=False) as client, \
                    client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise self._refuse(url, f"the server answered {response.status_code}")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise self._refuse(url, f"the code is over {limit} bytes")
        except httpx.TimeoutException:
            raise self._refuse(url, f"no answer within {self.settings.url_fetch_timeout_s:g} s") from None
        except httpx.HTTPError as e:
            raise self._refuse(url, f"the connection failed ({type(e).__name__})") from None
        try:
            return body.decode()
        except UnicodeDecodeError:
            raise self._refuse(url, "the body is not UTF-8 text") from None
