"""Publishing a directory of components to the global registry (`headwater registry publish`)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from headwater.domain.errors import BadRequest, HeadwaterError, Unavailable
from headwater.domain.models import REGISTRY_NAMESPACE, Component
from headwater.domain.pagination import Page, PageRequest
from headwater.ports import Bundler, UnitOfWorkFactory
from headwater.services.components import Components
from headwater.services.publish_cache import PublishCache, Record
from headwater.settings import Settings

COMPONENT_SUFFIXES = {".mjs", ".js", ".cjs", ".ts", ".mts"}
NOT_A_COMPONENT = "not a component"  # the runner's describe error for a module with no component
HELPER_DIRS = {"common", "apps", "node_modules", "test", "tests", "__tests__"}
HELPER_STEMS = {"app", "common", "utils", "constants"}
CHUNK = 16  # files per bundler run while publishing
SHIPPED_MARKER = "registry.published"  # in the data dir: the fingerprint of the shipped registry last published

log = logging.getLogger("headwater")


@dataclass
class PublishResult:
    file: str
    status: str  # published | unchanged (published before, same content) | skipped (no key) | helper | failed
    key: str | None = None
    id: str | None = None
    reason: str | None = None
    # a failure that may pass another time (a runner or bundler unavailable, npm's registry not
    # reached): not remembered
    transient: bool = False
    remembered: bool = False  # a failure of a file unchanged since it failed: not tried again


# npm's registry not reached or failing: the package is not at fault (npm.mjs, npmFailure)
_NPM_UNREACHED = re.compile(r"\(npm error E(?:TIMEDOUT|CONNRESET|CONNREFUSED|AI_AGAIN|NOTFOUND|HOSTUNREACH|NETUNREACH"
                            r"|PIPE|5\d\d)\)|\(npm exited with status")
# The registry's runner process stopped at its memory cap (runner_process.py): what else it was
# describing at the time counts as much as this component, so it is tried again next time.
_RUNNER_OUT_OF_MEMORY = re.compile(r"^the account's runner ran out of memory")


def publish_workers() -> int:
    """One bundler (esbuild, maybe npm) per core the process may use: more only queue for CPU."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores)


def candidate_files(root: Path) -> list[Path]:
    """Component files under root: not in helper folders, not app files (`*.app.mjs`)."""
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or path.suffix not in COMPONENT_SUFFIXES:
            continue
        if any(part in HELPER_DIRS for part in rel.parts[:-1]) or ".app." in path.name:
            continue
        if path.name.endswith(".d.ts") or ".test." in path.name or path.stem in HELPER_STEMS:
            continue
        files.append(path)
    return files


class Registry:
    def __init__(self, components: Components, bundler: Bundler) -> None:
        self.components = components
        self.bundler = bundler

    def candidates(self, root: Path) -> list[Path]:
        return candidate_files(root.resolve())

    def publish_files(self, root: Path, files: list[Path],
                      cache: PublishCache | None = None) -> Iterator[PublishResult]:
        """Each result as it is done. Files go in chunks, one per core at a time: a chunk's
        sources are read by one Node run and bundled by one bundler run (a process start, an
        esbuild and a sandbox for many components), then each is described and stored. With a
        `cache`, a file whose content hash is the one it was published with is `unchanged` and
        costs no bundling."""
        # The bundler runs in the runner's folder: a relative path would be read from there.
        root = root.resolve()
        workers = publish_workers()
        size = max(1, min(CHUNK, -(-len(files) // workers)))
        chunks = [[p.resolve() for p in files[i:i + size]] for i in range(0, len(files), size)]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(self._publish_chunk, root, chunk, cache) for chunk in chunks]
            try:
                for future in as_completed(futures):
                    for result, fingerprint in future.result():
                        if cache is not None:
                            self._record(cache, result, fingerprint)
                        yield result
                    if cache is not None:
                        cache.save()
            finally:
                if cache is not None:
                    cache.save()

    def publish_dir(self, root: Path) -> list[PublishResult]:
        return sorted(self.publish_files(root, candidate_files(root)), key=lambda r: r.file)

    def _publish_chunk(self, root: Path, paths: list[Path],
                       cache: PublishCache | None) -> list[tuple[PublishResult, str | None]]:
        done: list[tuple[PublishResult, str | None]] = []
        todo: list[tuple[Path, str, str | None]] = []
        for path in paths:
            rel = str(path.relative_to(root))
            fingerprint = cache.fingerprint(root, path) if cache is not None else None
            record = cache.get(rel, fingerprint) if cache is not None and fingerprint is not None else None
            if record is not None and self._still_published(record):
                status = "unchanged" if record.status == "published" else record.status
                result = PublishResult(rel, status, key=record.key, id=record.id, reason=record.reason,
                                       remembered=record.status == "failed")
                done.append((result, fingerprint))
            else:
                todo.append((path, rel, fingerprint))
        try:
            sources = self.bundler.sources_of([str(path) for path, _, _ in todo])
            failures = self.bundler.bundle_many([code for code, _ in sources if code is not None])
        except HeadwaterError:  # the batch's bundler itself failed: each file on its own then
            return done + [(self.publish_file(root, path), fingerprint) for path, _, fingerprint in todo]
        for (_, rel, fingerprint), (code, error) in zip(todo, sources, strict=True):
            if code is None or code in failures:
                message = error if code is None else failures[code]
                transient = bool(message and _NPM_UNREACHED.search(message))
                done.append((self._failed(rel, message, transient), fingerprint))
            else:
                done.append((self._publish_code(rel, code), fingerprint))
        return done

    def _still_published(self, record: Record) -> bool:
        if record.status != "published":
            return record.status in ("skipped", "helper", "failed")
        try:
            return record.key is not None and self.components.get_registry(record.key).id == record.id
        except HeadwaterError:
            return False

    @staticmethod
    def _record(cache: PublishCache, result: PublishResult, fingerprint: str | None) -> None:
        if fingerprint is None:
            return
        if result.status == "failed" and result.transient:
            cache.forget(result.file)
            return
        status = "published" if result.status == "unchanged" else result.status
        cache.put(result.file, Record(fingerprint, status, result.key, result.id, result.reason))

    def publish_file(self, root: Path, path: Path) -> PublishResult:
        rel = str(path.relative_to(root))
        try:
            code = self.bundler.source_of(str(path))
        except HeadwaterError as e:
            return self._failed(rel, e.message, isinstance(e, Unavailable))
        return self._publish_code(rel, code)

    def _publish_code(self, rel: str, code: str) -> PublishResult:
        try:
            bundle, definition = self.components.describe(code, REGISTRY_NAMESPACE, "")  # the operator's: no quota
        except HeadwaterError as e:
            transient = isinstance(e, Unavailable) or bool(_RUNNER_OUT_OF_MEMORY.search(e.message))
            result = self._failed(rel, e.message, transient)
            if result.status == "helper":  # never run: its bundle was only needed to learn that
                self.bundler.discard(code)
            return result
        if not definition.key:
            return PublishResult(rel, "skipped", reason="the component has no `key`")
        component = self.components.store(REGISTRY_NAMESPACE, None, code, None, bundle, definition)
        return PublishResult(rel, "published", key=component.key, id=component.id)

    @staticmethod
    def _failed(rel: str, message: str | None, transient: bool = False) -> PublishResult:
        message = message or "The component could not be published."
        if message.startswith(NOT_A_COMPONENT):
            return PublishResult(rel, "helper", reason=message)
        return PublishResult(rel, "failed", reason=message, transient=transient)


def matches(component: Component, words: list[str], app: str | None, kind: str | None) -> int:
    """How well a published component answers a search: 0 is no match; the key counts most."""
    d = component.definition
    if kind and d.type != kind:
        return 0
    key = (d.key or "").lower()
    if app and not (key.startswith(f"{app.lower()}-") or any(p.get("app") == app for p in d.configurable_props)):
        return 0
    if not words:
        return 1
    fields = ((key, 3), (d.name.lower(), 2), ((d.description or "").lower(), 1))
    score = 0
    for word in words:
        hits = [weight for text, weight in fields if word in text]
        if not hits:
            return 0
        score += max(hits)
    return score



def registry_fingerprint(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def publish_shipped_registry(registry: Registry, settings: Settings) -> None:
    """Publishes `src/registry` when its files changed since the last start (first start included):
    `headwater serve` does, in either deployment."""
    root = settings.registry_dir
    if not root.is_dir():
        return
    marker = settings.data_dir / SHIPPED_MARKER
    fingerprint = registry_fingerprint(root)
    if marker.exists() and marker.read_text() == fingerprint:
        return
    results = registry.publish_dir(root)
    for r in results:
        log.info("registry %s: %s %s", r.status, r.file, r.key or r.reason or "")
    if all(r.status != "failed" for r in results):
        marker.write_text(fingerprint)

class RegistrySearch:
    """GET /components/registry and /components/search (DECISIONS Extensions): what is published,
    and the keys that answer a query, in the shape existing clients expect."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self.uow = uow

    def page(self, page: PageRequest) -> Page[Component]:
        with self.uow(readonly=True) as uow:
            return uow.components.registry(page)

    def search(self, query: str, app: str | None, kind: str | None, limit: int) -> dict[str, list[str]]:
        if kind not in (None, "", "source", "action"):
            raise BadRequest("`type` must be source or action.", {"type": ["must be source or action"]})
        words = [w for w in query.lower().split() if w]
        scored: list[tuple[int, int, Component]] = []
        after: int | None = None
        while True:
            with self.uow(readonly=True) as uow:
                batch = uow.components.registry(PageRequest(limit=100, after=after))
            for seq, component in zip(batch.seqs, batch.items, strict=True):
                score = matches(component, words, app or None, kind or None)
                if score:
                    scored.append((-score, -seq, component))
            if len(batch.items) < 100:
                break
            after = batch.seqs[-1]
        scored.sort(key=lambda t: (t[0], t[1]))
        found = [c for _, _, c in scored]
        return {
            "sources": [c.definition.key or "" for c in found if c.definition.type == "source"][:limit],
            "actions": [c.definition.key or "" for c in found if c.definition.type == "action"][:limit],
        }
