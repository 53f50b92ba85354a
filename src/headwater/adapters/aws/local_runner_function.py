"""The runner Lambda answered in this process, for the emulated deployment and for an AWS
deployment with no runner function: what lambda.mjs answers, from the local sandboxed pieces, with
no AWS access of its own (as the runner's role has none). Run ops go to NodeRunnerPool (a process
per account), the `bundle` op to the sandboxed LocalBundler (its bundles dir standing for the
container's /tmp). As lambda.mjs does, it reaches the bundle bucket only through the presigned URLs
of the request: a bundle op's two PUTs, and, for a run whose bundle the processes have not got, the
bundle's GET, before answering BUNDLE_MISSING; a bundle so fetched is run only if its content
hashes to the name (`sha256`) the request gives it.

It models the function's tenant isolation mode (docs/aws.md "Tenant isolation"): each invocation
names a tenant; a tenant's calls go to runner processes of its own (the pool's process per account,
the account being the tenant), never one serving two; a run whose request names another account than
the invocation's tenant is refused, as are the bundle op on any tenant but BUNDLER_TENANT and any
other op on that one, as lambda.mjs refuses them."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from typing import Any

from headwater.adapters.aws.bundle_bucket import HEX64
from headwater.adapters.aws.lambda_runner import BUNDLER_TENANT
from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.domain.errors import Invalid, Unavailable

_TIMEOUT_S = 30


class LocalRunnerFunction:
    def __init__(self, pool: NodeRunnerPool, bundler: LocalBundler) -> None:
        self.pool, self.bundler = pool, bundler

    def invoke(self, request: dict[str, Any], tenant: str) -> dict[str, Any]:
        refused = tenant_refusal(request, tenant)
        if refused is not None:
            return {"ok": False, "error": {"code": "TENANT_REFUSED", "message": refused}}
        if request.get("op") == "bundle":
            return self._bundle(request)
        bundle = request.get("bundle") or {}
        if bundle:  # the presigned URL stays here: component code gets the bundle, never a URL
            kept = ("hash", "code") if isinstance(bundle.get("code"), str) else ("hash",)
            request = {**request, "bundle": {k: bundle[k] for k in kept if k in bundle}}
        response = self.pool.invoke(request, tenant)
        missing = (response.get("error") or {}).get("code") == "BUNDLE_MISSING"
        if missing and isinstance(bundle.get("url"), str) and not isinstance(bundle.get("code"), str):
            sha256 = bundle.get("sha256")
            if not isinstance(sha256, str) or not HEX64.fullmatch(sha256):
                return response  # no name to check the bucket's copy against: the caller sends the code
            code = _get(bundle["url"])
            if code is not None and hashlib.sha256(code.encode()).hexdigest() != sha256:
                refused = corrupt(str(bundle["hash"]), sha256)
                return {"ok": False, "error": {"code": "BUNDLE_CORRUPT", "message": refused}}
            if code is not None:
                retry = {**request, "bundle": {"hash": bundle["hash"], "code": code}}
                response = self.pool.invoke(retry, tenant)
        return response

    def _bundle(self, request: dict[str, Any]) -> dict[str, Any]:
        code, lock, put = request.get("code"), request.get("lock"), request.get("put")
        if not isinstance(code, str):
            return {"ok": False, "error": {"code": "BAD_REQUEST", "message": "the bundle op needs code"}}
        try:
            bundle = self.bundler.bundle(code, lock if isinstance(lock, dict) else None)
        except Invalid as e:
            return {"ok": False, "error": {"code": "BUNDLE_FAILED", "message": e.message}}
        except Unavailable as e:
            return {"ok": False, "error": {"code": "BUNDLER_FAILED", "message": e.message}}
        sha256 = hashlib.sha256(bundle.code.encode()).hexdigest()
        if isinstance(put, dict):
            _put(str(put["cjs"]), bundle.code.encode(), "application/javascript")
            _put(str(put["json"]), json.dumps({"packages": bundle.packages, "sha256": sha256}).encode(),
                 "application/json")
        return {"ok": True, "result": {"hash": bundle.hash, "packages": bundle.packages, "sha256": sha256}}

    def close(self) -> None:
        self.pool.close()


def tenant_refusal(request: dict[str, Any], tenant: str) -> str | None:
    """Why the runner function refuses this request as this tenant's invocation, or None (lambda.mjs's
    `admit`): the bundle op is the bundler tenant's only, which runs nothing else; any other op runs
    as its own account's tenant only."""
    if request.get("op") == "bundle":
        return None if tenant == BUNDLER_TENANT else f"the bundle op runs as the tenant {BUNDLER_TENANT!r} only"
    if tenant == BUNDLER_TENANT:
        return "no component code runs as the bundler's tenant"
    if request.get("account") != tenant:
        return f"this invocation is tenant {tenant!r}'s: a request of account {request.get('account')!r} is refused"
    return None


def corrupt(digest: str, sha256: str) -> str:
    return (f"the bundle of code {digest} in the bundle bucket does not hash to its name {sha256}: "
            "it was changed after it was made, and is not run")


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:  # noqa: S310 - the caller's presigned URL
            return str(response.read().decode())
    except urllib.error.HTTPError as e:
        if e.code in (403, 404):
            return None
        raise


def _put(url: str, body: bytes, content_type: str) -> None:
    request = urllib.request.Request(url, data=body, method="PUT", headers={"Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S):  # noqa: S310 - the caller's presigned URL
        pass
