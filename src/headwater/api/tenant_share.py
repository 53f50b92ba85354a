"""A share per tenant of the request threads: one caller's slow requests wait on its own share.

FastAPI runs sync routes (and the sync work async routes hand off: a prop's `options()`, a hook, a
describe, an OAuth refresh) on one thread pool every request shares. A caller whose calls are slow
(an `options()` waiting on a slow API, a refresh at a dripping token endpoint) could take every
thread of it. So an API key has at most `per_tenant` requests in flight in this process; more wait
their turn as coroutines, holding no thread, for at most `wait_s`, then get 429 with Retry-After.
The key identifies its user without a store read (one user's keys each have a share: keys are the
operator's to make). Server-sent event streams hold no thread between their reads and are not
counted; requests without a key are answered 401 at once and are not either.
"""

from __future__ import annotations

import hashlib

from starlette.types import ASGIApp, Receive, Scope, Send

from headwater.api.middleware import send_error
from headwater.services.tenant_slots import TenantBusy, TenantSlots


class TenantShare:
    def __init__(self, app: ASGIApp, per_tenant: int, wait_s: float = 30.0) -> None:
        self.app = app
        self.slots = TenantSlots(per_tenant, wait_s, "requests") if per_tenant > 0 else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tenant = self._tenant(scope) if self.slots is not None and scope["type"] == "http" else None
        if tenant is None or self.slots is None:
            await self.app(scope, receive, send)
            return
        turn = self.slots.hold(tenant)
        try:
            await turn.__aenter__()
        except TenantBusy as e:
            await send_error(send, 429, e.message, extra_headers=[(b"retry-after", str(e.retry_after).encode())])
            return
        try:
            await self.app(scope, receive, send)
        finally:
            await turn.__aexit__(None, None, None)

    @staticmethod
    def _tenant(scope: Scope) -> str | None:
        path: str = scope.get("path", "")
        if path.rstrip("/").endswith("/sse"):
            return None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, key = value.partition(b" ")
                if scheme.lower() == b"bearer" and key.strip():
                    return hashlib.sha256(key.strip()).hexdigest()
        return None
