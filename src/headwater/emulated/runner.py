"""The runner Lambda as the emulated deployment serves it: what lambda.mjs answers, from the
local sandboxed pieces. Run ops go to NodeRunnerPool (a process per account), the `bundle` op to
the sandboxed LocalBundler (its bundles dir standing for the container's /tmp), and each bundle
is put in the bundle bucket under lambda.mjs's keys, `bundles/<sha256>.cjs` and `.json`. A run
whose bundle the processes have not got is given it from the bucket before BUNDLE_MISSING."""

from __future__ import annotations

import json
from typing import Any

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.domain.errors import Invalid, Unavailable


def bundle_key(digest: str, ext: str) -> str:
    return f"bundles/{digest}.{ext}"


class EmulatedRunnerFunction:
    def __init__(self, pool: NodeRunnerPool, bundler: LocalBundler, s3: Any, bucket: str) -> None:
        self.pool, self.bundler, self.s3, self.bucket = pool, bundler, s3, bucket

    def invoke(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        if request.get("op") == "bundle":
            return self._bundle(request)
        response = self.pool.invoke(request, account)
        bundle = request.get("bundle") or {}
        missing = (response.get("error") or {}).get("code") == "BUNDLE_MISSING"
        if missing and isinstance(bundle.get("hash"), str) and not isinstance(bundle.get("code"), str):
            code = self._fetch(bundle["hash"])
            if code is not None:
                response = self.pool.invoke({**request, "bundle": {"hash": bundle["hash"], "code": code}}, account)
        return response

    def _bundle(self, request: dict[str, Any]) -> dict[str, Any]:
        code, lock = request.get("code"), request.get("lock")
        if not isinstance(code, str):
            return {"ok": False, "error": {"code": "BAD_REQUEST", "message": "the bundle op needs code"}}
        try:
            bundle = self.bundler.bundle(code, lock if isinstance(lock, dict) else None)
        except Invalid as e:
            return {"ok": False, "error": {"code": "BUNDLE_FAILED", "message": e.message}}
        except Unavailable as e:
            return {"ok": False, "error": {"code": "BUNDLER_FAILED", "message": e.message}}
        self.s3.put_object(Bucket=self.bucket, Key=bundle_key(bundle.hash, "cjs"), Body=bundle.code.encode(),
                           ContentType="application/javascript")
        self.s3.put_object(Bucket=self.bucket, Key=bundle_key(bundle.hash, "json"),
                           Body=json.dumps({"packages": bundle.packages}).encode(), ContentType="application/json")
        return {"ok": True, "result": {"hash": bundle.hash, "packages": bundle.packages}}

    def _fetch(self, digest: str) -> str | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=bundle_key(digest, "cjs"))["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        return str(body.decode())

    def close(self) -> None:
        self.pool.close()
