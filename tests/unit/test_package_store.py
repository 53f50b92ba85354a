"""`headwater registry gc`: the shared store's package bundles that no component bundle's sidecar
references any more go, the others (and young ones a publish may be about to reference) stay."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner

from headwater.adapters.local import package_store
from headwater.cli.admin import registry


def _store_file(data_dir: Path, rel: str, age_s: float) -> Path:
    path = package_store.store_dir(data_dir) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"/* hw-package {{}} */\nmodule.exports = {rel!r}\n")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def _component(data_dir: Path, digest: str, shared: dict[str, str] | None) -> None:
    bundles = data_dir / "bundles"
    bundles.mkdir(parents=True, exist_ok=True)
    (bundles / f"{digest}.cjs").write_text("module.exports = {}")
    sidecar: dict[str, object] = {"packages": {}}
    if shared is not None:
        sidecar["shared"] = shared
    (bundles / f"{digest}.json").write_text(json.dumps(sidecar))


def test_gc_removes_what_no_bundle_references_and_keeps_the_rest(tmp_path: Path) -> None:
    used = _store_file(tmp_path, "axios@1.6.0/i_.cjs", age_s=7200)
    scoped = _store_file(tmp_path, "@scope+pkg@2.0.0/r_sub%2Fpath.cjs", age_s=7200)
    dropped = _store_file(tmp_path, "axios@1.5.0/r_.cjs", age_s=7200)
    young = _store_file(tmp_path, "lodash@4.17.21/r_get.cjs", age_s=5)  # a publish may be writing its component's
    _component(tmp_path, "a" * 64, {"hw-package:axios@1.6.0?import": "axios@1.6.0/i_.cjs"})
    _component(tmp_path, "b" * 64, {"hw-package:@scope/pkg@2.0.0/sub/path": "@scope+pkg@2.0.0/r_sub%2Fpath.cjs"})
    _component(tmp_path, "c" * 64, None)  # a bundle made before the store (its packages inlined)

    size = dropped.stat().st_size
    done = package_store.gc(tmp_path)

    assert done == package_store.Collected(removed=1, removed_bytes=size, kept=3)
    assert used.exists() and scoped.exists() and young.exists()
    assert not dropped.exists() and not dropped.parent.exists()  # its empty folder goes too


def test_registry_gc_command_says_what_it_removed(tmp_path: Path) -> None:
    kept = _store_file(tmp_path, "uuid@9.0.1/r_.cjs", age_s=7200)
    dropped = _store_file(tmp_path, "uuid@8.3.2/r_.cjs", age_s=7200)
    _component(tmp_path, "d" * 64, {"hw-package:uuid@9.0.1": "uuid@9.0.1/r_.cjs"})

    dry = CliRunner().invoke(registry, ["gc", "--data-dir", str(tmp_path), "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["removed"] == 1 and dropped.exists()

    real = CliRunner().invoke(registry, ["gc", "--data-dir", str(tmp_path), "--json"])
    assert real.exit_code == 0, real.output
    assert json.loads(real.output)["removed"] == 1
    assert kept.exists() and not dropped.exists()
