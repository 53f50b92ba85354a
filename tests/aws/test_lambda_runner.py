"""The runner Lambda's client: a bundle goes by hash until the container says it has not got it,
partials (respond) are handed on at the end, and an over-size payload is refused unsent. The
e2e tests run it against the sandboxed runner in the emulated deployment; here its wire rules."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pytest

from headwater.adapters.aws.lambda_bundler import LambdaBundler
from headwater.adapters.aws.lambda_runner import BUNDLER_TENANT, LambdaRunner, boto3_invoke
from headwater.domain.errors import Unavailable
from headwater.ports import Bundle, Instance, RunnerError


class Container:
    """What lambda.mjs answers, as far as bundles and partials go."""

    def __init__(self) -> None:
        self.bundles: set[str] = set()
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        self.requests.append({**request})  # the client re-sends the same dict with the code added
        bundle = request["bundle"]
        if "code" in bundle:
            self.bundles.add(bundle["hash"])
        if bundle["hash"] not in self.bundles:
            return {"ok": False, "error": {"code": "BUNDLE_MISSING", "message": "send the code"}}
        return {"ok": True, "result": {"emits": [], "response": {"status": 201}},
                "partials": [{"partial": "respond", "response": {"status": 201}}]}


def test_a_bundle_is_sent_once_per_container_and_partials_arrive() -> None:
    container = Container()
    runner = LambdaRunner(container)
    bundle = Bundle("h1", "export default {}")
    responded: list[dict[str, Any]] = []
    for _ in range(2):
        runner.run(bundle, Instance("dc_1", {}, account="u_1"), {"n": 1}, 1000, responded.append)
    assert [("code" in r["bundle"]) for r in container.requests] == [False, True, False]
    assert responded == [{"status": 201}, {"status": 201}]


def test_a_request_over_the_invoke_payload_limit_is_refused_unsent() -> None:
    container = Container()
    with pytest.raises(RunnerError) as refused:
        LambdaRunner(container).describe(Bundle("big", "x" * (6 * 1024 * 1024)), 1000)
    assert refused.value.code == "PAYLOAD_TOO_LARGE"
    assert len(container.requests) == 1 and "code" not in container.requests[0]["bundle"]


class LambdaClient:
    """boto3's Lambda client as far as Invoke goes: every call's arguments, lambda.mjs's answers."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        request = json.loads(kwargs["Payload"])
        if request["op"] == "bundle":
            result = {"hash": hashlib.sha256(request["code"].encode()).hexdigest(), "packages": {}, "sha256": "a" * 64}
        else:
            result = {"emits": []}
        return {"Payload": io.BytesIO(json.dumps({"ok": True, "result": result}).encode())}


def test_every_invoke_names_its_tenant_the_runs_account_and_the_bundle_op_its_own() -> None:
    """Tenant isolation (docs/aws.md): a run goes to its account's tenant, which its request names
    as its `account` too; the bundle op to the tenant `bundler`; a bundle carries its content's hash."""
    client = LambdaClient()
    invoke = boto3_invoke(client, "stack-tenant-runner")
    bundle = LambdaBundler(invoke).bundle("export default {}")
    assert bundle.sha256 == "a" * 64
    LambdaRunner(invoke).run(bundle, Instance("dc_1", {}, account="u_1"), {"n": 1}, 1000)
    LambdaRunner(invoke).call("describe", {}, bundle)  # the operator's call (no account)
    tenants = [call["TenantId"] for call in client.calls]
    assert tenants == [BUNDLER_TENANT, "account:u_1", "describe"], tenants
    run = json.loads(client.calls[1]["Payload"])
    assert run["account"] == "account:u_1" and run["bundle"] == {"hash": bundle.hash, "sha256": "a" * 64}
    with pytest.raises(RunnerError) as refused:
        LambdaRunner(invoke).call("run", {}, bundle, account=BUNDLER_TENANT)
    assert refused.value.code == "TENANT_REFUSED" and len(client.calls) == 3


def test_a_bundle_answer_without_its_content_hash_is_not_taken() -> None:
    def invoke(request: dict[str, Any], tenant: str) -> dict[str, Any]:
        return {"ok": True, "result": {"hash": hashlib.sha256(request["code"].encode()).hexdigest(), "packages": {}}}

    with pytest.raises(Unavailable):
        LambdaBundler(invoke).bundle("export default {}")
