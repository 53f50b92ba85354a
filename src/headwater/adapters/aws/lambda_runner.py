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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from headwater.adapters.aws.bundle_bucket import S3Bundles
from headwater.adapters.runner_protocol import DESCRIBE, RunnerRequests
from headwater.ports import Bundle, RunnerError

Invoke = Callable[[dict[str, Any], str], dict[str, Any]]
"""(request, account) -> the runner's response; `account` chooses nothing on AWS (one request
per invocation), the emulator runs each account's requests in its own sandboxed process."""

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


def boto3_invoke(client: Any, function_name: str) -> Invoke:
    def invoke(request: dict[str, Any], account: str) -> dict[str, Any]:
        response = client.invoke(FunctionName=function_name, InvocationType="RequestResponse",
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
        # `account`: the runner Lambda never lets one child process serve two accounts
        message: dict[str, Any] = {"op": op, **request, "account": account}
        if bundle is not None:
            message["bundle"] = {"hash": bundle.hash}
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

