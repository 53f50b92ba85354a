"""Bundling component code with the runner's `src/bundle.mjs`, once per code hash.

Bundles live under `<data_dir>/bundles/<sha256>.cjs`, with the npm versions they were made with
in `<sha256>.json`; a code hash already bundled costs one file read (then a dict lookup), so the
Node bundler runs only for new code. npm packages live in one store shared by every bundle,
`<data_dir>/npm-store/<name>@<version>/` (installed once, never changed), downloads in one npm
cache. A `lock` (a component's recorded versions) makes a bundle made again install the same.
A bundle does not carry its npm packages' code: each import is bundled once into the shared package
store (adapters/local/package_store.py) and the bundle references it; the sidecar `.json` lists
what it references (`shared`), for `headwater registry gc`.

Users' code is only parsed here, never run, but what it imports is read into the bundle and
named to npm: so the bundler runs in a bubblewrap sandbox (adapters/local/sandbox.py) that sees the
runner code, the package store, the npm cache and a fresh output dir, and nothing else of the
machine, with no network of its own: npm reaches the configured registry (`npm config get
registry`, read once) through an egress proxy that allows that host and port and nothing else.
bundle.mjs refuses absolute and escaping imports, and imports that are not npm package names, with
a LOAD_ERROR naming the import (a 422 here), and ends npm's options with `--`. `source_of`
(registry publish, workflow files: the operator's own local files, from the CLI) reads next to the
entry file and stays outside the sandbox.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from headwater.adapters.local.egress import EgressProxy
from headwater.adapters.local.package_store import PACKAGES, store_dir
from headwater.adapters.local.sandbox import EGRESS, RUNNER, TMP, Bind, Sandbox, sandbox_for
from headwater.domain import ids
from headwater.domain.errors import Invalid, Unavailable
from headwater.ports import Bundle
from headwater.settings import Settings

_MEMORY_CACHE = 256
# Bundles held in memory, in bytes of code too: a registry publish goes through thousands, some of
# them megabytes (an app's SDK), each needed once; 256 of those held would be gigabytes.
_MEMORY_CACHE_BYTES = 64 * 1024 * 1024
_MESSAGE_MAX = 2000  # characters of a bundler failure a user is shown
# The settings npm reads from the environment (certificates, npm_config_*), proxies and the
# registry excepted (npm is given ours); nothing else of the service's environment reaches it.
_NPM_ENV = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "LANG")
_NPM_ENV_DROPPED = ("proxy", "registry")
_STORE, _NPM_CACHE, _OUT = "/npm-store", "/npm-cache", "/out"
DEFAULT_REGISTRY = "https://registry.npmjs.org/"


def npm_env() -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": TMP}
    for key, value in os.environ.items():
        npm_setting = key.lower().startswith("npm_config_") and not any(w in key.lower() for w in _NPM_ENV_DROPPED)
        if key.upper() in _NPM_ENV or npm_setting:
            env[key] = value
    return env


@functools.cache
def configured_registry(node: Path, runner_dir: Path) -> str:
    """The registry the operator's npm settings name (`npm config get registry`: ~/.npmrc,
    npm_config_registry...), or npm's default; an http(s) URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
    try:
        proc = subprocess.run([str(node), str(runner_dir / "node_modules" / "npm" / "bin" / "npm-cli.js"),
                               "config", "get", "registry"], capture_output=True, text=True, timeout=30,
                              env=env, cwd=runner_dir)
        registry = proc.stdout.strip().splitlines()[-1].strip() if proc.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired, IndexError):
        registry = ""
    return registry if registry_address(registry) else DEFAULT_REGISTRY


def registry_address(registry: str) -> tuple[str, int] | None:
    """The (host, port) an http(s) registry URL names, or None."""
    try:
        url = urlsplit(registry)
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return None
    return (url.hostname, port) if url.scheme in ("http", "https") and url.hostname else None


def _sweep_unfinished(tmp_root: Path, older_than_s: float = 3600) -> None:
    """Installs a killed bundler left half done (a finished tree is renamed out of `.tmp`)."""
    if not tmp_root.is_dir():
        return
    cutoff = time.time() - older_than_s
    for entry in tmp_root.iterdir():
        try:
            if entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue


def _write_sidecar(out: Path, answer: Mapping[str, Any]) -> None:
    sidecar: dict[str, Any] = {"packages": answer.get("packages") or {}}
    if isinstance(answer.get("shared"), dict):
        sidecar["shared"] = answer["shared"]
    out.with_suffix(".json").write_text(json.dumps(sidecar, sort_keys=True))


def _whole(out: Path, packages: Path) -> bool:
    """Whether a bundle on disk can run: it is there, and so is every store file it references (a
    store emptied by hand, or an old `gc` with a bad sidecar, makes it again instead of failing)."""
    if not out.exists():
        return False
    try:
        shared = json.loads(out.with_suffix(".json").read_text()).get("shared") or {}
    except (OSError, ValueError, AttributeError):
        return True  # a bundle made before the store: self-contained
    return not isinstance(shared, dict) or all((packages / str(f)).is_file() for f in shared.values())


def _read_packages(out: Path) -> dict[str, str]:
    try:
        packages = json.loads(out.with_suffix(".json").read_text()).get("packages")
    except (OSError, ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in packages.items()} if isinstance(packages, dict) else {}


class LocalBundler:
    """`shared_packages=False`: bundles that carry their packages' code, as the Lambda runner's do
    (the emulated runner function's, aws-emulated), kept apart under `bundles/self-contained/`."""

    def __init__(self, settings: Settings, sandbox: Sandbox | None = None, shared_packages: bool = True) -> None:
        self.settings = settings
        self.sandbox = sandbox if sandbox is not None else sandbox_for(settings)
        self.shared_packages = shared_packages
        self.dir = settings.data_dir / "bundles" / ("" if shared_packages else "self-contained")
        self.dir.mkdir(parents=True, exist_ok=True)
        _sweep_unfinished(settings.data_dir / "npm-store" / ".tmp")
        self._cache: OrderedDict[str, Bundle] = OrderedDict()
        self._cache_bytes = 0
        # component code -> its bundle's hash (insertion order: oldest first); bundles live in _cache only
        self._by_code: dict[str, str] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock_for(self, digest: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(digest, threading.Lock())

    def _remember(self, bundle: Bundle) -> Bundle:
        with self._guard:
            if bundle.hash not in self._cache:
                self._cache_bytes += len(bundle.code)
            self._cache[bundle.hash] = bundle
            self._cache.move_to_end(bundle.hash)
            over = lambda: len(self._cache) > _MEMORY_CACHE or self._cache_bytes > _MEMORY_CACHE_BYTES  # noqa: E731
            while len(self._cache) > 1 and over():
                _, evicted = self._cache.popitem(last=False)
                self._cache_bytes -= len(evicted.code)
        return bundle

    def bundle(self, code: str, lock: Mapping[str, str] | None = None) -> Bundle:
        known = self._by_code.get(code)  # a str caches its hash(): no SHA-256 of the code per run
        cached = self._cache.get(known) if known else None
        if cached:
            return cached
        digest = ids.code_hash(code)
        cached = self._cache.get(digest)
        if cached:
            self._remember_code(code, cached)
            return cached
        out = self.dir / f"{digest}.cjs"
        with self._lock_for(digest):
            if not _whole(out, store_dir(self.settings.data_dir)):
                self._bundle_into(code, dict(lock or {}), out)
            bundle = Bundle(hash=digest, code=out.read_text(), packages=_read_packages(out))
            return self._remember_code(code, self._remember(bundle))

    def _remember_code(self, code: str, bundle: Bundle) -> Bundle:
        with self._guard:
            self._by_code[code] = bundle.hash
            while len(self._by_code) > _MEMORY_CACHE:
                self._by_code.pop(next(iter(self._by_code)))
        return bundle

    def _bundle_into(self, code: str, lock: dict[str, str], out: Path) -> None:
        with self._bundler_run() as (out_dir, common, binds, inside):
            result = self._run({**common, "entry_code": code, "out": f"{inside}/bundle.cjs", "lock": lock}, binds)
            _write_sidecar(out, result)
            os.replace(out_dir / "bundle.cjs", out)

    def prune_store(self) -> bool:
        """Removes the npm store (registry publishing, once done): a bundle holds its packages, so
        the store serves only bundling, and a later bundle installs again what it needs (from the
        npm cache, which stays). Not while another bundler run (of any process) uses the store:
        False then, and the store stays."""
        store = self.settings.data_dir / "npm-store"
        doomed = self.settings.data_dir / "tmp" / f"npm-store-pruned-{secrets.token_hex(4)}"
        with _store_lock(self.settings.data_dir, fcntl.LOCK_EX | fcntl.LOCK_NB) as held:
            if not held:
                return False
            if not store.is_dir():
                return True
            doomed.parent.mkdir(parents=True, exist_ok=True)
            os.replace(store, doomed)  # at once, under the lock: no run finds half a store
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    @contextmanager
    def _bundler_run(self) -> Iterator[tuple[Path, dict[str, Any], list[Bind] | None, str]]:
        """What a bundler run is given: a fresh output dir (and its name as the bundler sees it),
        the request's store, npm cache and registry, and the sandbox's binds (None unsandboxed)."""
        with _store_lock(self.settings.data_dir, fcntl.LOCK_SH):
            yield from self._bundler_run_unlocked()

    def _bundler_run_unlocked(self) -> Iterator[tuple[Path, dict[str, Any], list[Bind] | None, str]]:
        store = self.settings.data_dir / "npm-store"
        npm_cache = self.settings.data_dir / "npm-cache"
        scratch = self.settings.data_dir / "tmp"
        packages = store_dir(self.settings.data_dir)
        for directory in (store, npm_cache, scratch, packages):
            directory.mkdir(parents=True, exist_ok=True)
        out_dir = Path(tempfile.mkdtemp(prefix="bundle-", dir=scratch))
        registry = configured_registry(self.settings.node, self.settings.runner_dir)
        egress: EgressProxy | None = None
        try:
            if self.sandbox is None:
                plain = {"store": str(store), "npm_cache": str(npm_cache), "registry": registry,
                         **({"package_store": str(packages)} if self.shared_packages else {})}
                yield out_dir, plain, None, str(out_dir)
                return
            # npm's one way out: an egress proxy that connects to the registry and nothing else
            address = registry_address(registry)
            egress = EgressProxy(False, False, only=[address] if address else [])
            binds = [Bind(store, _STORE, True), Bind(npm_cache, _NPM_CACHE, True), Bind(out_dir, _OUT, True),
                     Bind(packages, PACKAGES, True), Bind(egress.open(f"bundle-{secrets.token_hex(6)}"), EGRESS)]
            npmrc = Path.home() / ".npmrc"
            if npmrc.is_file():
                binds.append(Bind(npmrc, f"{TMP}/.npmrc"))
            common = {"store": _STORE, "npm_cache": _NPM_CACHE, "registry": registry, "egress": EGRESS,
                      **({"package_store": PACKAGES} if self.shared_packages else {})}
            yield out_dir, common, binds, _OUT
        finally:
            if egress is not None:
                egress.close()
            shutil.rmtree(out_dir, ignore_errors=True)

    def bundle_many(self, codes: Sequence[str]) -> dict[str, str]:
        """Bundles the codes not bundled yet in one bundler run (registry publishing: one process
        start, one esbuild, one npm proxy and one sandbox for many components), each as `bundle`
        would. Returns the failures, code -> message; the others' bundles are then on disk."""
        todo: dict[str, str] = {}  # digest -> code
        for code in codes:
            digest = ids.code_hash(code)
            if not _whole(self.dir / f"{digest}.cjs", store_dir(self.settings.data_dir)):
                todo.setdefault(digest, code)
        if not todo:
            return {}
        failures: dict[str, str] = {}
        with self._bundler_run() as (out_dir, common, binds, inside):
            items = [{"entry_code": code, "out": f"{inside}/{digest}.cjs"} for digest, code in todo.items()]
            result = self._run({**common, "batch": items}, binds, timeout=self.settings.bundle_timeout_s * len(items))
            answers = result.get("results")
            if not isinstance(answers, list) or len(answers) != len(items):
                raise Unavailable("The bundler failed: its answer does not match the request.")
            for (digest, code), answer in zip(todo.items(), answers, strict=True):
                if not isinstance(answer, dict) or not answer.get("ok"):
                    failures[code] = _message(answer.get("message") if isinstance(answer, dict) else None)
                    continue
                out = self.dir / f"{digest}.cjs"
                _write_sidecar(out, answer)
                os.replace(out_dir / f"{digest}.cjs", out)
        return failures

    def discard(self, code: str) -> None:
        """A helper module's bundle (registry publishing found it is not a component): removed from
        disk and memory, so the registry's bundles are only what may run."""
        digest = ids.code_hash(code)
        with self._lock_for(digest):
            for path in (self.dir / f"{digest}.cjs", self.dir / f"{digest}.json"):
                path.unlink(missing_ok=True)
            with self._guard:
                self._by_code.pop(code, None)
                evicted = self._cache.pop(digest, None)
                if evicted is not None:
                    self._cache_bytes -= len(evicted.code)

    def sources_of(self, entry_files: Sequence[str]) -> list[tuple[str | None, str | None]]:
        """`source_of` of many files in one Node run: (code, None) or (None, failure message) each."""
        if not entry_files:
            return []
        result = self._run({"entry_files": list(entry_files), "mode": "source"}, sandboxed=False,
                           timeout=self.settings.bundle_timeout_s * len(entry_files))
        answers = result.get("results")
        if not isinstance(answers, list) or len(answers) != len(entry_files):
            raise Unavailable("The bundler failed: its answer does not match the request.")
        return [(str(a["code"]), None) if isinstance(a, dict) and a.get("ok") else
                (None, _message(a.get("message") if isinstance(a, dict) else None)) for a in answers]

    def source_of(self, entry_file: str) -> str:
        result = self._run({"entry_file": entry_file, "mode": "source"}, sandboxed=False)
        return str(result["code"])

    def _command(self, binds: list[Bind] | None, sandboxed: bool) -> tuple[list[str], dict[str, str] | None]:
        runner_dir = self.settings.runner_dir
        if self.sandbox is None or not sandboxed:
            # the machine's npm settings as `npm` has them (registry, proxy, CA file)
            env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
            return [str(self.settings.node), str(runner_dir / "src" / "bundle.mjs")], env
        node = f"{RUNNER}/{self.settings.node.relative_to(runner_dir)}"
        return self.sandbox.bundler(runner_dir, binds or [], npm_env(), [node, f"{RUNNER}/src/bundle.mjs"]), None

    def _run(self, request: dict[str, Any], binds: list[Bind] | None = None, sandboxed: bool = True,
             timeout: float | None = None) -> dict[str, Any]:
        command, env = self._command(binds, sandboxed)
        timeout = timeout or self.settings.bundle_timeout_s
        try:
            proc = subprocess.run(
                command,
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=self.settings.runner_dir,
                env=env,
            )
        except subprocess.TimeoutExpired:
            raise Invalid(f"Bundling took longer than {timeout:g} s.") from None
        except OSError as e:
            raise Unavailable(f"The bundler could not start: {e}") from None
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        try:
            result: dict[str, Any] = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise Unavailable(f"The bundler failed: {proc.stderr.strip()[-500:] or 'no output'}") from None
        if not result.get("ok"):
            raise Invalid(_message(result.get("message")))
        return result


@contextmanager
def _store_lock(data_dir: Path, mode: int) -> Iterator[bool]:
    """`<data_dir>/npm-store.lock`, shared by bundler runs, exclusive to pruning (across processes:
    a service and the CLI may share a data dir). Yields whether it is held (LOCK_NB may fail)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "npm-store.lock", "a") as file:
        try:
            fcntl.flock(file, mode)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


def _message(message: object) -> str:
    """A bundler failure as a user is shown it: its message, cut short."""
    text = str(message or "The component could not be bundled.")
    return text if len(text) <= _MESSAGE_MAX else text[:_MESSAGE_MAX] + "..."
