"""Publishing a directory of components to the global registry (`headwater registry publish`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from headwater.domain.errors import BadRequest, HeadwaterError
from headwater.domain.models import REGISTRY_NAMESPACE, Component
from headwater.domain.pagination import Page, PageRequest
from headwater.ports import Bundler, UnitOfWorkFactory
from headwater.services.components import Components
from headwater.services.publish_cache import PublishCache, Record

COMPONENT_SUFFIXES = {".mjs", ".js", ".cjs", ".ts", ".mts"}
NOT_A_COMPONENT = "not a component"  # the runner's describe error for a module with no component
HELPER_DIRS = {"common", "apps", "node_modules", "test", "tests", "__tests__"}
HELPER_STEMS = {"app", "common", "utils", "constants"}


@dataclass
class PublishResult:
    file: str
    status: str  # published | unchanged (published before, same content) | skipped (no key) | helper | failed
    key: str | None = None
    id: str | None = None
    reason: str | None = None


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
        """Each result as it is done: files are bundled and described in parallel, bounded by the
        cores (each is a Node bundler process and a runner call). With a `cache`, a file whose
        content hash is the one it was published with is `unchanged` and costs no bundling."""
        # The bundler runs in the runner's folder: a relative path would be read from there.
        root = root.resolve()
        with ThreadPoolExecutor(max_workers=publish_workers()) as pool:
            futures = [pool.submit(self._publish_cached, root, path.resolve(), cache) for path in files]
            try:
                for done, future in enumerate(as_completed(futures), 1):
                    result, fingerprint = future.result()
                    if cache is not None:
                        self._record(cache, result, fingerprint)
                        if done % 200 == 0:
                            cache.save()
                    yield result
            finally:
                if cache is not None:
                    cache.save()

    def _publish_cached(self, root: Path, path: Path, cache: PublishCache | None) -> tuple[PublishResult, str | None]:
        if cache is None:
            return self.publish_file(root, path), None
        rel = str(path.relative_to(root))
        fingerprint = cache.fingerprint(root, path)
        record = cache.get(rel, fingerprint)
        if record is not None and self._still_published(record):
            status = "unchanged" if record.status == "published" else record.status
            return PublishResult(rel, status, key=record.key, id=record.id, reason=record.reason), fingerprint
        return self.publish_file(root, path), fingerprint

    def _still_published(self, record: Record) -> bool:
        if record.status != "published":
            return record.status in ("skipped", "helper")
        try:
            return record.key is not None and self.components.get_registry(record.key).id == record.id
        except HeadwaterError:
            return False

    @staticmethod
    def _record(cache: PublishCache, result: PublishResult, fingerprint: str | None) -> None:
        if fingerprint is None:
            return
        if result.status == "failed":
            cache.forget(result.file)
            return
        status = "published" if result.status == "unchanged" else result.status
        cache.put(result.file, Record(fingerprint, status, result.key, result.id, result.reason))

    def publish_dir(self, root: Path) -> list[PublishResult]:
        return sorted(self.publish_files(root, candidate_files(root)), key=lambda r: r.file)

    def publish_file(self, root: Path, path: Path) -> PublishResult:
        rel = str(path.relative_to(root))
        try:
            code = self.bundler.source_of(str(path))
            bundle, definition = self.components.describe(code, REGISTRY_NAMESPACE)
        except HeadwaterError as e:
            if e.message.startswith(NOT_A_COMPONENT):
                return PublishResult(rel, "helper", reason=e.message)
            return PublishResult(rel, "failed", reason=e.message)
        if not definition.key:
            return PublishResult(rel, "skipped", reason="the component has no `key`")
        component = self.components.store(REGISTRY_NAMESPACE, None, code, None, bundle, definition)
        return PublishResult(rel, "published", key=component.key, id=component.id)


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
