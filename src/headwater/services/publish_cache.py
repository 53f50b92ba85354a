"""What `registry publish` already did, by content hash: a file whose fingerprint is the one it
was published (or found a helper, or keyless, or failed for a lasting reason) with is not bundled,
described or stored again; its failure is reported again, as remembered.

A file's fingerprint covers everything its published form is made of: its text, every file its
relative imports reach (transitively; each import's every candidate file as esbuild resolves one,
`./x` -> `x`, `x.ts`, `x.js`, `x/index.js`..., so a file added in front of another changes it
too), each of those files' `package.json` files up to the published folder (the ranges its bare
imports install), and the runner's bundler and platform code (a new release publishes again).
The record is a file in the data dir, a shortcut only: a published record counts only while the
registry's latest component of that key is still the recorded one, so a data dir whose database
was replaced publishes again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Relative specifiers of import/export ... from, import "x", import("x"), require("x").
_IMPORT = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)(["'])(\.{1,2}/[^"'\n]*)\1""")
_EXTENSIONS = (".tsx", ".ts", ".jsx", ".js", ".css", ".json", ".mjs", ".cjs", ".mts", ".cts")
_TS_FOR_JS = {".js": (".ts", ".tsx"), ".mjs": (".mts",), ".cjs": (".cts",)}


def _candidates(base: Path) -> list[Path]:
    """Every file a relative import of `base` could resolve to, in esbuild's order (and more)."""
    out = [base, *(base.with_name(base.name + ext) for ext in _EXTENSIONS)]
    out += [base / f"index{ext}" for ext in _EXTENSIONS]
    out += [base.with_suffix(ts) for ts in _TS_FOR_JS.get(base.suffix, ())]
    return out


def _manifests(file: Path, root: Path) -> list[Path]:
    """The package.json files from a file's folder up to root (and root's own)."""
    found = []
    folder = file.parent
    while True:
        manifest = folder / "package.json"
        if manifest.is_file():
            found.append(manifest)
        if folder == root or root not in folder.parents:
            return found
        folder = folder.parent


@functools.cache
def publisher_version(runner_dir: Path) -> str:
    """The bundler's and the platform module's code: publishing with another release is new work."""
    digest = hashlib.sha256()
    for folder in (runner_dir / "src", runner_dir / "platform"):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file():
                digest.update(str(path.relative_to(runner_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def fingerprint(root: Path, entry: Path, salt: str) -> str:
    """The content hash of `entry` as published from `root` (see the module's docstring)."""
    digest = hashlib.sha256(salt.encode() + b"\0")
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        try:
            data = file.read_bytes()
        except OSError:
            digest.update(b"missing\0" + str(file).encode() + b"\0")
            continue
        digest.update(str(file.relative_to(root) if root in file.parents else file).encode() + b"\0" + data + b"\0")
        for manifest in _manifests(file, root):
            todo.append(manifest)
        if file.suffix == ".json":
            continue
        for match in _IMPORT.finditer(data.decode(errors="replace")):
            spec = match.group(2).split("?", 1)[0]
            existing = [c for c in _candidates((file.parent / spec).resolve()) if c.is_file()]
            digest.update(b"import\0" + spec.encode() + b"\0" + "\0".join(map(str, existing)).encode() + b"\0")
            todo.extend(existing)
    return digest.hexdigest()


@dataclass(frozen=True)
class Record:
    fingerprint: str
    status: str  # published | skipped | helper | failed (a lasting failure: its reason)
    key: str | None = None
    id: str | None = None
    reason: str | None = None


class PublishCache:
    """`<data dir>/registry-publish.json`: {root: {relative file: record}}."""

    def __init__(self, path: Path, root: Path, salt: str, ignore_records: bool = False,
                 retry_failed: bool = False) -> None:
        self.path = path
        self.root = str(root)
        self.salt = salt
        self.ignore_records = ignore_records
        self.kept = ("published", "skipped", "helper") if retry_failed else ("published", "skipped", "helper", "failed")
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            loaded = {}
        self._all: dict[str, dict[str, dict[str, str | None]]] = loaded if isinstance(loaded, dict) else {}
        self._mine = self._all.setdefault(self.root, {})
        self._changed = not path.exists()

    def fingerprint(self, root: Path, entry: Path) -> str:
        return fingerprint(root, entry, self.salt)

    def get(self, rel: str, fingerprint: str) -> Record | None:
        raw = None if self.ignore_records else self._mine.get(rel)
        if not isinstance(raw, dict) or raw.get("fingerprint") != fingerprint:
            return None
        status = raw.get("status")
        if status not in self.kept:
            return None
        text = {k: v if isinstance(v, str) else None for k, v in raw.items()}
        return Record(fingerprint, str(status), text.get("key"), text.get("id"), text.get("reason"))

    def put(self, rel: str, record: Record) -> None:
        value = dict(record.__dict__)
        if self._mine.get(rel) != value:
            self._mine[rel] = value
            self._changed = True

    def forget(self, rel: str) -> None:
        if self._mine.pop(rel, None) is not None:
            self._changed = True

    def save(self) -> None:
        """Written when a record changed since the last save (publishing saves after each chunk:
        unchanged files change nothing), in one piece: `json.dumps` is the C encoder, `json.dump`
        the pure-Python one, which made a save of the whole tree's records take seconds."""
        if not self._changed:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".registry-publish-", dir=self.path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(self._all))
        os.replace(tmp, self.path)
        self._changed = False
