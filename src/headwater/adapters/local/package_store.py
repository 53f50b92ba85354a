"""The shared package store: npm imports bundled once each (layers/runner/src/packages.mjs).

`<data_dir>/packages/<name>@<version>/<r|i>_<subpath>.cjs`, one file per import a component makes
(`axios`, `lodash/get`, `@scope/pkg/sub`), its own dependencies inlined; written by the bundler
(its sandbox binds the store read-write) and never rewritten, bound read-only into every runner
sandbox at PACKAGES, where the runner resolves a component bundle's `hw-package:` ids. It holds
package bundles and nothing else (no service file, no npm store). A component bundle's sidecar,
`<data_dir>/bundles/<sha256>.json`, lists the store files it references (`shared`: id -> file),
which is what `gc` keeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PACKAGES = "/packages"  # the store inside a runner or bundler sandbox


def store_dir(data_dir: Path) -> Path:
    return data_dir / "packages"


def referenced(bundles_dir: Path) -> set[str]:
    """The store files (relative paths) the component bundles' sidecars reference."""
    refs: set[str] = set()
    for sidecar in bundles_dir.glob("*.json") if bundles_dir.is_dir() else ():
        try:
            shared = json.loads(sidecar.read_text()).get("shared")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(shared, dict):
            refs.update(str(f) for f in shared.values())
    return refs


@dataclass(frozen=True)
class Collected:
    removed: int
    removed_bytes: int
    kept: int


def _files(store: Path) -> Iterable[Path]:
    for path in store.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


def gc(data_dir: Path, min_age_s: float = 3600.0, dry_run: bool = False) -> Collected:
    """Removes the store files no component bundle references. A file younger than `min_age_s` is
    kept: a bundler may have written it for a component bundle whose sidecar is not written yet."""
    store = store_dir(data_dir)
    if not store.is_dir():
        return Collected(0, 0, 0)
    keep = referenced(data_dir / "bundles")
    cutoff = time.time() - min_age_s
    removed = removed_bytes = kept = 0
    for path in list(_files(store)):
        rel = path.relative_to(store).as_posix()
        stat = path.stat()
        if rel in keep or stat.st_mtime > cutoff:
            kept += 1
            continue
        removed += 1
        removed_bytes += stat.st_size
        if not dry_run:
            path.unlink(missing_ok=True)
    if not dry_run:
        for directory in sorted((p for p in store.iterdir() if p.is_dir()), reverse=True):
            with contextlib.suppress(OSError):
                os.rmdir(directory)  # only when empty
    return Collected(removed, removed_bytes, kept)
