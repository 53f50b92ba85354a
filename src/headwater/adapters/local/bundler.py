"""Bundling component code with the runner's `src/bundle.mjs`, once per code hash.

Bundles live under `<data_dir>/bundles/<sha256>.cjs`; a code hash already bundled costs one
file read (then a dict lookup), so the Node bundler runs only for new code.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from collections import OrderedDict

from headwater.domain import ids
from headwater.domain.errors import Invalid, Unavailable
from headwater.ports import Bundle
from headwater.settings import Settings

_MEMORY_CACHE = 256


class LocalBundler:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.dir = settings.data_dir / "bundles"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._cache: OrderedDict[str, Bundle] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock_for(self, digest: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(digest, threading.Lock())

    def _remember(self, bundle: Bundle) -> Bundle:
        with self._guard:
            self._cache[bundle.hash] = bundle
            self._cache.move_to_end(bundle.hash)
            while len(self._cache) > _MEMORY_CACHE:
                self._cache.popitem(last=False)
        return bundle

    def bundle(self, code: str) -> Bundle:
        digest = ids.code_hash(code)
        cached = self._cache.get(digest)
        if cached:
            return cached
        out = self.dir / f"{digest}.cjs"
        with self._lock_for(digest):
            if not out.exists():
                work_dir = self.settings.data_dir / "npm" / digest[:16]
                self._run({
                    "entry_code": code,
                    "out": str(out),
                    "work_dir": str(work_dir),
                    "npm_cache": str(self.settings.data_dir / "npm-cache"),
                })
            return self._remember(Bundle(hash=digest, code=out.read_text()))

    def source_of(self, entry_file: str) -> str:
        with tempfile.TemporaryDirectory() as work_dir:
            result = self._run({"entry_file": entry_file, "mode": "source", "work_dir": work_dir})
        return result["code"]

    def _run(self, request: dict) -> dict:
        script = self.settings.runner_dir / "src" / "bundle.mjs"
        try:
            proc = subprocess.run(
                [str(self.settings.node), str(script)],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=self.settings.bundle_timeout_s,
                cwd=self.settings.runner_dir,
                # Trusted code only (esbuild, npm --ignore-scripts): it keeps the machine's npm
                # settings (registry, proxy, CA file) and so reaches the registry as `npm` does.
                env={k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")},
            )
        except subprocess.TimeoutExpired:
            raise Invalid(f"Bundling took longer than {self.settings.bundle_timeout_s} s.") from None
        except OSError as e:
            raise Unavailable(f"The bundler could not start: {e}") from None
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        try:
            result = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise Unavailable(f"The bundler failed: {proc.stderr.strip()[-500:] or 'no output'}") from None
        if not result.get("ok"):
            raise Invalid(result.get("message") or "The component could not be bundled.")
        return result
