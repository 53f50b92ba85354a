"""The OAuth 2.0 client side (ports.OAuthClientPort) on httpx-oauth: the authorize URL with PKCE
(S256) and `state` (Headwater's parameters only Headwater's: domain/oauth.py), the code exchange,
refresh.

A refresh the provider refuses for good (a 4xx such as `invalid_grant`) raises OAuthGrantError;
one that could not be made or failed on the provider's side (network, timeout, 5xx, 429) is
retried a few times, then raises OAuthUnavailable. The token endpoint is a URL a user may set, so
the service's URL policy applies to it as to webhooks: its host is resolved once, checked, and
the request goes to the checked address (no DNS rebinding window). No message quotes a token.

A token request is bounded as a whole, its retries and their pauses included, by
`HEADWATER_OAUTH_TOKEN_TIMEOUT_S` (adapters/outbound.py): a token endpoint that drips its answer a
byte at a time is cut off like one that says nothing. The exchange of a connect's code is a
coroutine (the callback waits for it holding no thread); a refresh is waited for by the worker
thread of the run or hook that needs it. Each attempt's answer is read up to TOKEN_ANSWER_MAX_BYTES.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
from httpx_oauth.oauth2 import BaseOAuth2, OAuth2RequestError, OAuth2Token

from headwater.adapters.outbound import read_body, resolve_off_loop
from headwater.domain.oauth import HEADWATER_PARAMS, TokenSet, param_name, without_params
from headwater.domain.urls import Refused, allowed_addresses
from headwater.ports import OAuthEndpoints, OAuthGrantError, OAuthUnavailable
from headwater.settings import Settings

T = TypeVar("T")
TIMEOUT_S = 15.0  # each read of an attempt; the whole request is bounded by the setting
RETRY_DELAYS_S = (0.25, 1.0)  # then it is the caller's to try again later
TOKEN_ANSWER_MAX_BYTES = 256 * 1024
_TRANSIENT_STATUS = {408, 425, 429}


def code_challenge(verifier: str) -> str:
    """RFC 7636 S256."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class _Client(BaseOAuth2[dict[str, str]]):
    """httpx-oauth's client sending each request to an address checked beforehand."""

    def __init__(self, endpoints: OAuthEndpoints, target: str, host_header: str, sni: str) -> None:
        super().__init__(endpoints.client_id, endpoints.client_secret or "", endpoints.authorize_url, target,
                         refresh_token_endpoint=target, base_scopes=list(endpoints.scopes) or None)
        self.public = endpoints.client_secret is None
        self.host_header, self.sni = host_header, sni

    def get_httpx_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False, trust_env=False)

    def build_request(self, client: httpx.AsyncClient, method: str, url: str, *, auth_method: Any = None,
                      data: Any = None) -> tuple[httpx.Request, httpx.Auth | None]:
        if self.public:  # no secret: the client id alone, in the body (RFC 6749 2.3.1 / PKCE)
            auth_method, data = None, {**(data or {}), "client_id": self.client_id}
        request, auth = super().build_request(client, method, url, auth_method=auth_method, data=data)
        request.headers["host"] = self.host_header
        request.extensions["sni_hostname"] = self.sni
        return request, auth

    async def send_request(self, client: httpx.AsyncClient, request: httpx.Request, auth: httpx.Auth | None, *,
                           exc_class: type[OAuth2RequestError]) -> httpx.Response:
        """httpx-oauth's, with the answer read up to TOKEN_ANSWER_MAX_BYTES."""
        try:
            streamed = await client.send(request, auth=auth, stream=True)
            try:
                body = await read_body(streamed, TOKEN_ANSWER_MAX_BYTES)
            finally:
                await streamed.aclose()
        except httpx.HTTPError as e:
            raise exc_class(str(e)) from e
        if body is None:
            raise OAuthUnavailable(f"the token endpoint's answer is over {TOKEN_ANSWER_MAX_BYTES} bytes")
        response = httpx.Response(streamed.status_code, headers=streamed.headers, content=body, request=request)
        if not response.is_success:
            raise exc_class(f"the token endpoint answered {response.status_code}", response)
        return response


class HttpOAuthClient:
    def __init__(self, settings: Settings, resolve: Callable[[str], list[str]] | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.settings = settings
        self.resolve = resolve or _resolve
        self.sleep = sleep

    def authorization_url(self, endpoints: OAuthEndpoints, redirect_uri: str, state: str, verifier: str) -> str:
        """Headwater's parameters, each once, with Headwater's values: any a stored configuration
        still sets (saved before `client_problems` refused them) is dropped, as is a fragment."""
        ours = HEADWATER_PARAMS | ({"scope"} if endpoints.scopes else frozenset())
        parts = urlsplit(endpoints.authorize_url)
        endpoint = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        extras = {k: v for k, v in endpoints.extra_params.items() if param_name(k) not in ours}
        client = BaseOAuth2[dict[str, str]](endpoints.client_id, "", endpoint, endpoints.token_url,
                                            base_scopes=list(endpoints.scopes) or None)
        url = _run(client.get_authorization_url(redirect_uri, state, code_challenge=code_challenge(verifier),
                                                code_challenge_method="S256", extras_params=extras or None))
        own = without_params(parts.query, ours)  # the provider's own parameters (e.g. `audience`)
        return url if not own else f"{endpoint}?{own}&{url[len(endpoint) + 1:]}"

    async def exchange(self, endpoints: OAuthEndpoints, code: str, redirect_uri: str, verifier: str) -> TokenSet:
        return await self._call(endpoints, lambda c: c.get_access_token(code, redirect_uri, verifier))

    def refresh(self, endpoints: OAuthEndpoints, refresh_token: str) -> TokenSet:
        return _run(self._call(endpoints, lambda c: c.refresh_token(refresh_token)))

    async def _call(self, endpoints: OAuthEndpoints,
                    request: Callable[[_Client], Coroutine[Any, Any, OAuth2Token]]) -> TokenSet:
        """The request, retried while it fails for now, all within the token deadline."""
        deadline_s = self.settings.oauth_token_timeout_s
        try:
            async with asyncio.timeout(deadline_s) as deadline:
                for delay in (*RETRY_DELAYS_S, None):
                    try:
                        return _token_set(await request(await resolve_off_loop(self._client, endpoints)))
                    except OAuth2RequestError as e:
                        failure = _classify(e)
                    except OAuthUnavailable as e:
                        failure = e
                    if isinstance(failure, OAuthGrantError) or delay is None:
                        raise failure
                    await self.sleep(delay)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise OAuthUnavailable(f"the token endpoint did not answer within {deadline_s:g} s") from None
        raise AssertionError("unreachable")

    def _client(self, endpoints: OAuthEndpoints) -> _Client:
        parts = urlsplit(endpoints.token_url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            address = allowed_addresses(host, self.resolve, self.settings.allow_loopback_urls,
                                        self.settings.allow_private_urls)[0]
        except Refused as e:
            raise OAuthUnavailable(f"the token URL cannot be reached: {e}") from None
        netloc = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        target = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
        return _Client(endpoints, target, host if parts.port is None else f"{host}:{parts.port}", host)


def _classify(error: OAuth2RequestError) -> OAuthGrantError | OAuthUnavailable:
    response = error.response
    if response is None:  # no answer: the connection failed or timed out
        cause = error.__cause__
        return OAuthUnavailable(f"the token endpoint did not answer ({type(cause).__name__ if cause else 'error'})")
    status = response.status_code
    if status >= 500 or status in _TRANSIENT_STATUS:
        return OAuthUnavailable(f"the token endpoint answered {status}")
    if response.is_success:
        return OAuthUnavailable("the token endpoint answered something that is not JSON")
    try:
        body = response.json()
    except ValueError:
        body = {}
    code = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), str) else None
    description = body.get("error_description") if isinstance(body, dict) else None
    said = f"{code}: {description}" if code and isinstance(description, str) else (code or f"status {status}")
    return OAuthGrantError(f"the provider refused: {said[:300]}")


def _token_set(token: OAuth2Token) -> TokenSet:
    access = token.get("access_token")
    if not isinstance(access, str) or not access:
        raise OAuthUnavailable("the token endpoint's answer has no access_token")
    refresh = token.get("refresh_token")
    expires_at = token.get("expires_at")
    scope = token.get("scope")
    return TokenSet(access, refresh if isinstance(refresh, str) and refresh else None,
                    int(expires_at) if isinstance(expires_at, int | float) else None,
                    scope if isinstance(scope, str) else None, _uid(token))


def _uid(token: dict[str, Any]) -> str | None:
    """The account's id at the provider, where the answer says it: `user_id`, `uid`, or the
    `sub` of an id_token (read, not verified: it came straight from the token endpoint)."""
    for name in ("user_id", "uid", "sub"):
        if isinstance(token.get(name), str | int):
            return str(token[name])
    id_token = token.get("id_token")
    if isinstance(id_token, str) and id_token.count(".") == 2:
        payload = id_token.split(".")[1]
        try:
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except ValueError:
            return None
        sub = claims.get("sub") if isinstance(claims, dict) else None
        return str(sub) if isinstance(sub, str | int) else None
    return None


def _resolve(host: str) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)]


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """httpx-oauth is async; the services call it from worker threads (asyncio.run there), and a
    caller on an event loop has it run on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coroutine)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e
    thread = threading.Thread(target=target, name="oauth-call")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
