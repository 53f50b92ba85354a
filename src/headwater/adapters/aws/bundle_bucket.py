"""The bundle bucket as the trusted functions use it, so that the runner Lambda needs no AWS
permission at all: they read a bundle's `{"packages"}` themselves and hand the runner, in the
invoke payload, presigned URLs for exactly the objects one request needs (a GET of the bundle a
run uses, the two PUTs of a bundle op), valid for the runner's timeout. Layout (docs/aws.md
"Bundles"): `bundles/<sha256 of the code>.cjs` and `bundles/<sha256>.json`, written last: the
`.json` holds `{"packages", "sha256"}`, `sha256` being the SHA-256 of the `.cjs` (the bundle's own
name, which the runner checks its content against before it loads it: docs/aws.md "Tenant isolation").
A `.json` without it (written before that check) counts as no bundle: the bundle is made again."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from headwater.ports import Bundle

HEX64 = re.compile(r"[0-9a-f]{64}")
URL_TTL_S = 300  # over the runner's 120 s timeout: a URL outlives the invocation it is for, little more


def bundle_key(digest: str, ext: str) -> str:
    return f"bundles/{digest}.{ext}"


class S3Bundles:
    def __init__(self, s3: Any, bucket: str, url_ttl_s: int = URL_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.s3, self.bucket, self.url_ttl_s, self.clock = s3, bucket, url_ttl_s, clock
        self._get_urls: dict[str, tuple[str, float]] = {}  # digest -> (URL, made at): reused for half its life
        self._guard = threading.Lock()

    def held(self, digest: str) -> Bundle | None:
        """The bundle of the code hashed `digest` as the bucket holds it whole (its .json is written
        after its .cjs): its npm versions and its content's SHA-256, without its code. None: then the
        runner makes it (again)."""
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=bundle_key(digest, "json"))["Body"].read()
            self.s3.head_object(Bucket=self.bucket, Key=bundle_key(digest, "cjs"))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise
        meta = json.loads(body)
        sha256 = meta.get("sha256") if isinstance(meta, dict) else None
        if not isinstance(sha256, str) or not HEX64.fullmatch(sha256):
            return None
        packages = {str(k): str(v) for k, v in (meta.get("packages") or {}).items()}
        return Bundle(hash=digest, code="", packages=packages, sha256=sha256)

    def get_url(self, digest: str) -> str:
        """A presigned GET of the bundle, for a runner container that has not got it in /tmp."""
        now = self.clock()
        with self._guard:
            cached = self._get_urls.get(digest)
            if cached is not None and now - cached[1] < self.url_ttl_s / 2:
                return cached[0]
        url = self._presign("get_object", bundle_key(digest, "cjs"))
        with self._guard:
            if len(self._get_urls) > 1024:
                self._get_urls.clear()
            self._get_urls[digest] = (url, now)
        return url

    def put_urls(self, digest: str) -> dict[str, str]:
        """Presigned PUTs of the two objects of one bundle, for the runner's bundle op."""
        return {ext: self._presign("put_object", bundle_key(digest, ext)) for ext in ("cjs", "json")}

    def _presign(self, method: str, key: str) -> str:
        return str(self.s3.generate_presigned_url(method, Params={"Bucket": self.bucket, "Key": key},
                                                  ExpiresIn=self.url_ttl_s))
