"""Bundling component code with the runner's `src/bundle.mjs`, once per code hash.

Bundles live under `<data_dir>/bundles/<sha256>.cjs`; a code hash already bundled costs one
file read (then a dict lookup), so the Node bundler runs only for new code.

Users' code is only parsed here, never run, but what it imports is read into the bundle: so the
bundler runs in a bubblewrap sandbox (adapters/local/sandbox.py) that sees the runner code, the
component's own work dir (its npm packages), the npm cache and a fresh output dir, and nothing
else of the machine; and bundle.mjs refuses absolute and escaping imports with a LOAD_ERROR naming
the import (a 422 here). `source_of` (registry publish, workflow files: the operator's own local
files, from the CLI) reads next to the entry file and stays outside the sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from headwater.adapters.local.sandbox import RUNNER, TMP, Bind, Sandbox, sandbox_for
from headwater.domain import ids
from headwater.domain.errors import Invalid, Unavailable
from headwater.ports import Bundle
from headwater.settings import Settings

_MEMORY_CACHE = 256
# The settings npm reads from the environment (registry, proxy, certificates); nothing else of
# the service's environment reaches the bundler.
_NPM_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
            "LANG")
_WORK, _NPM_CACHE, _OUT = "/work", "/npm-cache", "/out"


def npm_env() -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": TMP}
    for key, value in os.environ.items():
        if key.upper() in _NPM_ENV or key.lower().startswith("npm_config_"):
            env[key] = value
    return env


class LocalBundler:
    def __init__(self, settings: Settings, sandbox: Sandbox | None = None) -> None:
        self.settings = settings
        self.sandbox = sandbox if sandbox is not None else sandbox_for(settings)
        self.dir = settings.data_dir / "bundles"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._cache: OrderedDict[str, Bundle] = OrderedDict()
        self._by_code: dict[str, Bundle] = {}  # component code -> its bundle (insertion order: oldest first)
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
        cached = self._by_code.get(code)  # a str caches its hash(): no SHA-256 of the code per run
        if cached:
            return cached
        digest = ids.code_hash(code)
        cached = self._cache.get(digest)
        if cached:
            self._remember_code(code, cached)
            return cached
        out = self.dir / f"{digest}.cjs"
        with self._lock_for(digest):
            if not out.exists():
                self._bundle_into(code, digest, out)
            return self._remember_code(code, self._remember(Bundle(hash=digest, code=out.read_text())))

    def _remember_code(self, code: str, bundle: Bundle) -> Bundle:
        with self._guard:
            self._by_code[code] = bundle
            while len(self._by_code) > _MEMORY_CACHE:
                self._by_code.pop(next(iter(self._by_code)))
        return bundle

    def _bundle_into(self, code: str, digest: str, out: Path) -> None:
        work_dir = self.settings.data_dir / "npm" / digest[:16]
        npm_cache = self.settings.data_dir / "npm-cache"
        scratch = self.settings.data_dir / "tmp"
        for directory in (work_dir, npm_cache, scratch):
            directory.mkdir(parents=True, exist_ok=True)
        out_dir = Path(tempfile.mkdtemp(prefix="bundle-", dir=scratch))
        try:
            if self.sandbox is None:
                self._run({"entry_code": code, "out": str(out_dir / "bundle.cjs"), "work_dir": str(work_dir),
                           "npm_cache": str(npm_cache)})
            else:
                binds = [Bind(work_dir, _WORK, True), Bind(npm_cache, _NPM_CACHE, True), Bind(out_dir, _OUT, True)]
                npmrc = Path.home() / ".npmrc"
                if npmrc.is_file():
                    binds.append(Bind(npmrc, f"{TMP}/.npmrc"))
                self._run({"entry_code": code, "out": f"{_OUT}/bundle.cjs", "work_dir": _WORK, "npm_cache": _NPM_CACHE},
                          binds)
            os.replace(out_dir / "bundle.cjs", out)
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)

    def source_of(self, entry_file: str) -> str:
        with tempfile.TemporaryDirectory() as work_dir:
            result = self._run({"entry_file": entry_file, "mode": "source", "work_dir": work_dir}, sandboxed=False)
        return str(result["code"])

    def _command(self, binds: list[Bind] | None, sandboxed: bool) -> tuple[list[str], dict[str, str] | None]:
        runner_dir = self.settings.runner_dir
        if self.sandbox is None or not sandboxed:
            # the machine's npm settings as `npm` has them (registry, proxy, CA file)
            env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
            return [str(self.settings.node), str(runner_dir / "src" / "bundle.mjs")], env
        node = f"{RUNNER}/{self.settings.node.relative_to(runner_dir)}"
        return self.sandbox.bundler(runner_dir, binds or [], npm_env(), [node, f"{RUNNER}/src/bundle.mjs"]), None

    def _run(self, request: dict[str, Any], binds: list[Bind] | None = None, sandboxed: bool = True) -> dict[str, Any]:
        command, env = self._command(binds, sandboxed)
        try:
            proc = subprocess.run(
                command,
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=self.settings.bundle_timeout_s,
                cwd=self.settings.runner_dir,
                env=env,
            )
        except subprocess.TimeoutExpired:
            raise Invalid(f"Bundling took longer than {self.settings.bundle_timeout_s} s.") from None
        except OSError as e:
            raise Unavailable(f"The bundler could not start: {e}") from None
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        try:
            result: dict[str, Any] = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise Unavailable(f"The bundler failed: {proc.stderr.strip()[-500:] or 'no output'}") from None
        if not result.get("ok"):
            raise Invalid(result.get("message") or "The component could not be bundled.")
        return result
