"""The Runner port over the runner Lambda (layers/runner/src/lambda.mjs): one runner request
per synchronous invocation, the payload being the request of docs/runner-protocol.md.

A bundle is sent by hash first, with a presigned GET of it in the bundle bucket (the runner
has no AWS permission: S3Bundles): a runner container keeps bundles under /tmp, fetches one it
has not got through that URL, and answers BUNDLE_MISSING when neither has it; a Bundle that
carries its code then goes again with it (one from LambdaBundler carries none: the error stands).
The request carries the run's own instance (its decrypted props), nothing of other sources.
Lambda cannot stream a synchronous answer, so a run's `respond` partials come back in the
response's `partials`, and are handed on when the run ends. The invoke payload is at most 6 MB:
a request that would be larger is refused here, not sent.

The runner function runs in Lambda's tenant isolation mode (template.yaml, docs/aws.md "Tenant
isolation"): every invocation names a tenant (`TenantId`), and an execution environment only ever
serves the tenant it was created for. A run's tenant is its account (`account:<namespace>`, or
`describe` for the operator's calls: runner_protocol.account_of, meta_account), the same string the
request carries as `account`, which lambda.mjs checks against the invocation's tenant. The bundle op
is a tenant of its own, BUNDLER_TENANT, under which no component code runs.

A bundle sent by hash also carries `sha256`, the SHA-256 of the bundle's content recorded when it
was made (S3Bundles.held): the runner loads a bundle from its /tmp or the bucket only if its content
hashes to that name, so that neither is a channel between tenants.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from headwater.adapters.aws.bundle_bucket import S3Bundles
from headwater.adapters.runner_protocol import DESCRIBE, RunnerRequests
from headwater.ports import Bundle, RunnerError

Invoke = Callable[[dict[str, Any], str], dict[str, Any]]
"""(request, tenant) -> the runner's response. `tenant` is the invocation's Lambda tenant id: an
execution environment (and in the emulator, a runner process) serves one tenant only. For ops that
run component code it is the request's `account`; for the bundle op, BUNDLER_TENANT."""

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
BUNDLER_TENANT = "bundler"
"""The bundle op's tenant: never an account's (those are `account:<namespace>` or `describe`), so
the environments that bundle (npm installs, esbuild) never run component code, and no account's
environment bundles."""


def boto3_invoke(client: Any, function_name: str) -> Invoke:
    def invoke(request: dict[str, Any], tenant: str) -> dict[str, Any]:
        response = client.invoke(FunctionName=function_name, InvocationType="RequestResponse", TenantId=tenant,
                                 Payload=json.dumps(request).encode())
        payload = json.loads(response["Payload"].read() or b"null")
        if response.get("FunctionError") or not isinstance(payload, dict):
            message = payload.get("errorMessage", "") if isinstance(payload, dict) else str(payload)
            return {"ok": False, "error": {"code": "RUNNER_CRASHED", "message": f"runner Lambda failed: {message}"}}
        return payload

    return invoke


class LambdaRunner(RunnerRequests):
    def __init__(self, invoke: Invoke, on_close: Callable[[], None] | None = None,
                 bundles: S3Bundles | None = None) -> None:
        self.invoke = invoke
        self.on_close = on_close
        self.bundles = bundles

    def call(self, op: str, request: dict[str, Any], bundle: Bundle | None = None,
             on_partial: Callable[[dict[str, Any]], None] | None = None, account: str = DESCRIBE,
             timeout_s: float | None = None, bill_to: str = "") -> dict[str, Any]:
        """One invocation (the function's own timeout bounds it: `timeout_s` is the pool's). Its
        time is measured here, by the caller (RunnerRequests), and billed to `bill_to` by the
        service; an environment is stopped between invocations, so no CPU is used beyond them."""
        # `account` is the invocation's tenant too: an execution environment serves one account only
        if account == BUNDLER_TENANT:
            raise RunnerError("TENANT_REFUSED", "component code never runs as the bundler's tenant")
        message: dict[str, Any] = {"op": op, **request, "account": account}
        if bundle is not None:
            message["bundle"] = {"hash": bundle.hash}
            if bundle.sha256:
                message["bundle"]["sha256"] = bundle.sha256
            if self.bundles is not None:
                message["bundle"]["url"] = self.bundles.get_url(bundle.hash)
        response = self.invoke(message, account)
        missing = (response.get("error") or {}).get("code") == "BUNDLE_MISSING"
        if bundle is not None and bundle.code and not response.get("ok") and missing:
            message["bundle"] = {"hash": bundle.hash, "code": bundle.code}
            if len(json.dumps(message).encode()) > MAX_PAYLOAD_BYTES:
                raise RunnerError("PAYLOAD_TOO_LARGE", "the request is over Lambda's 6 MB invoke payload")
            response = self.invoke(message, account)
        for partial in response.get("partials") or []:
            if on_partial is not None:
                on_partial(partial)
        if response.get("ok"):
            return dict(response["result"])
        error = response.get("error") or {}
        raise RunnerError(error.get("code", "RUNTIME_ERROR"), error.get("message", ""), error.get("stack"))

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()

