"""The Bundler port over the runner Lambda's `bundle` op (layers/runner/src/lambda.mjs): the
runner bundles in its /tmp, so the Python functions need neither esbuild nor npm.

The runner has no AWS permission: a bundle the bucket already holds (by code hash) is answered
from there without asking it, and a bundle op carries presigned PUT URLs of that hash's two
objects (`S3Bundles.put_urls`), where the runner puts the bundle. The answer is the hash and the
npm versions and the SHA-256 of the bundle's content, never the code (payloads stay small): the
Bundle returned has empty `code`, which LambdaRunner never needs to send, since it hands the runner
a presigned GET of the bundle and the content's hash to check it against. A code's bundle is
remembered per container, so a warm function asks once per code.

The bundle op is invoked as a tenant of its own (BUNDLER_TENANT, docs/aws.md "Tenant isolation"):
the environments that bundle serve no account's runs, and no run's environment bundles.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from threading import Lock
from typing import Any

from headwater.adapters.aws.bundle_bucket import HEX64, S3Bundles
from headwater.adapters.aws.lambda_runner import BUNDLER_TENANT, Invoke
from headwater.domain.errors import Invalid, Unavailable
from headwater.ports import Bundle

_MEMORY_CACHE = 256
_USER_FAULTS = ("BUNDLE_FAILED", "TIMEOUT", "BAD_REQUEST")  # the code's fault: a 422


class LambdaBundler:
    def __init__(self, invoke: Invoke, source_of: Callable[[str], str] | None = None,
                 bundles: S3Bundles | None = None) -> None:
        self.invoke = invoke
        self._source_of = source_of
        self.bundles = bundles
        self._by_code: OrderedDict[str, Bundle] = OrderedDict()
        self._guard = Lock()

    def bundle(self, code: str, lock: Mapping[str, str] | None = None) -> Bundle:
        with self._guard:
            cached = self._by_code.get(code)
        if cached is not None:
            return cached
        digest = hashlib.sha256(code.encode()).hexdigest()  # lambda.mjs's hash of the code
        held = self.bundles.held(digest) if self.bundles is not None else None
        if held is not None:
            return self._remember(code, held)
        request: dict[str, Any] = {"op": "bundle", "code": code, "lock": dict(lock or {})}
        if self.bundles is not None:
            request["put"] = self.bundles.put_urls(digest)
        response = self.invoke(request, BUNDLER_TENANT)
        if not response.get("ok"):
            error = response.get("error") or {}
            message = str(error.get("message") or "The component could not be bundled.")
            if error.get("code") in _USER_FAULTS:
                raise Invalid(message)
            raise Unavailable(f"The bundler failed: {message}")
        result: dict[str, Any] = response["result"]
        packages = {str(k): str(v) for k, v in (result.get("packages") or {}).items()}
        if result.get("hash") != digest:
            raise Unavailable("The bundler answered for other code.")
        sha256 = result.get("sha256")
        if not isinstance(sha256, str) or not HEX64.fullmatch(sha256):
            raise Unavailable("The bundler did not say its bundle's content hash.")
        return self._remember(code, Bundle(hash=digest, code="", packages=packages, sha256=sha256))

    def _remember(self, code: str, bundle: Bundle) -> Bundle:
        with self._guard:
            self._by_code[code] = bundle
            while len(self._by_code) > _MEMORY_CACHE:
                self._by_code.popitem(last=False)
        return bundle

    def source_of(self, entry_file: str) -> str:
        """The operator's own files (registry publish, workflow files, from the CLI): read on the
        operator's machine by the local bundler, never by the runner Lambda."""
        if self._source_of is None:
            raise Unavailable("Reading component files is done by the headwater CLI on the operator's machine.")
        return self._source_of(entry_file)

    def sources_of(self, entry_files: Sequence[str]) -> list[tuple[str | None, str | None]]:
        out: list[tuple[str | None, str | None]] = []
        for entry_file in entry_files:
            try:
                out.append((self.source_of(entry_file), None))
            except Invalid as e:
                out.append((None, e.message))
        return out

    def discard(self, code: str) -> None:
        """Forgotten here only: the bucket keeps its objects (the trusted functions delete none yet)."""
        with self._guard:
            self._by_code.pop(code, None)

    def prune_store(self) -> bool:
        """Nothing to prune: the runner Lambda bundles in its own /tmp."""
        return True

    def bundle_many(self, codes: Sequence[str]) -> dict[str, str]:
        """One runner Lambda invocation per code (each bundle is put in the bucket by its own)."""
        failures: dict[str, str] = {}
        for code in codes:
            try:
                self.bundle(code)
            except Invalid as e:
                failures[code] = e.message
        return failures
