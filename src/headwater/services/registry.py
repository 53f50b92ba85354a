"""Publishing a directory of components to the global registry (`headwater registry publish`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from headwater.domain.errors import HeadwaterError
from headwater.domain.models import REGISTRY_NAMESPACE
from headwater.ports import Bundler
from headwater.services.components import Components

COMPONENT_SUFFIXES = {".mjs", ".js", ".cjs", ".ts", ".mts"}
HELPER_DIRS = {"common", "apps", "node_modules", "test", "tests", "__tests__"}
HELPER_STEMS = {"app", "common", "utils", "constants"}


@dataclass
class PublishResult:
    file: str
    status: str  # published | skipped | failed
    key: str | None = None
    id: str | None = None
    reason: str | None = None


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
        return candidate_files(root)

    def publish_files(self, root: Path, files: list[Path]) -> Iterator[PublishResult]:
        """Each result as it is done: files are bundled and described in parallel, bounded by the
        cores (each is a Node bundler process and a runner call)."""
        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            futures = [pool.submit(self.publish_file, root, path) for path in files]
            for future in as_completed(futures):
                yield future.result()

    def publish_dir(self, root: Path) -> list[PublishResult]:
        return sorted(self.publish_files(root, candidate_files(root)), key=lambda r: r.file)

    def publish_file(self, root: Path, path: Path) -> PublishResult:
        rel = str(path.relative_to(root))
        try:
            code = self.bundler.source_of(str(path))
            bundle, definition = self.components.describe(code)
        except HeadwaterError as e:
            return PublishResult(rel, "failed", reason=e.message)
        if not definition.key:
            return PublishResult(rel, "skipped", reason="the component has no `key`")
        component = self.components.store(REGISTRY_NAMESPACE, None, code, None, bundle, definition)
        return PublishResult(rel, "published", key=component.key, id=component.id)
