"""The runner Lambda answered in this process, for the emulated deployment and for an AWS
deployment with no runner function: what lambda.mjs answers, from the local sandboxed pieces, with
no AWS access of its own (as the runner's role has none). Run ops go to NodeRunnerPool (a process
per account), the `bundle` op to the sandboxed LocalBundler (its bundles dir standing for the
container's /tmp). As lambda.mjs does, it reaches the bundle bucket only through the presigned URLs
of the request: a bundle op's two PUTs, and, for a run whose bundle the processes have not got, the
bundle's GET, before answering BUNDLE_MISSING."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.domain.errors import Invalid, Unavailable

_TIMEOUT_S = 30


class LocalRunnerFunction:
    def __init__(self, pool: NodeRunnerPool, bundler: LocalBundler) -> None:
        self.pool, self.bundler = pool, bundler

    def invoke(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        if request.get("op") == "bundle":
            return self._bundle(request)
        bundle = request.get("bundle") or {}
        if bundle:  # the presigned URL stays here: component code gets the bundle, never a URL
            request = {**request, "bundle": {k: v for k, v in bundle.items() if k != "url"}}
        response = self.pool.invoke(request, account)
        missing = (response.get("error") or {}).get("code") == "BUNDLE_MISSING"
        if missing and isinstance(bundle.get("url"), str) and not isinstance(bundle.get("code"), str):
            code = _get(bundle["url"])
            if code is not None:
                retry = {**request, "bundle": {"hash": bundle["hash"], "code": code}}
                response = self.pool.invoke(retry, account)
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
        if isinstance(put, dict):
            _put(str(put["cjs"]), bundle.code.encode(), "application/javascript")
            _put(str(put["json"]), json.dumps({"packages": bundle.packages}).encode(), "application/json")
        return {"ok": True, "result": {"hash": bundle.hash, "packages": bundle.packages}}

    def close(self) -> None:
        self.pool.close()


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
