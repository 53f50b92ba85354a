"""What `headwater registry publish` leaves on disk (issue 36, item 2): no bundle of a helper
module (it is bundled to be described, then dropped: it never runs), and no npm store once done
(every bundle holds its packages); publishing new code afterwards installs again what it needs,
and `--keep-npm-store` keeps the store. A bundler run of another process holds the store: pruning
then leaves it."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import subprocess
from pathlib import Path

from headwater.adapters.local import bundler as local_bundler
from headwater.adapters.local.bundler import LocalBundler
from headwater.domain import ids
from headwater.settings import Settings
from tests.conftest import HEADWATER

COMPONENT = ('import uua from "universal-user-agent@^6.0.0";\n'
             'export default {{ key: "hwtest-prune-{n}", name: "Prune", version: "1.0.0", props: {{}},\n'
             '  run() {{ return uua.getUserAgent() }} }}\n')
HELPER = 'import uua from "universal-user-agent@^6.0.0";\nexport const agent = () => uua.getUserAgent()\n'


def publish(tree: Path, data_dir: Path, *options: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
    proc = subprocess.run([*HEADWATER, "registry", "publish", str(tree), "--data-dir", str(data_dir), "--json",
                           *options], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_no_helper_bundle_and_no_npm_store_is_left_and_new_code_installs_again(tmp_path: Path) -> None:
    tree, data_dir = tmp_path / "app", tmp_path / "data"
    (tree / "sources" / "one").mkdir(parents=True)
    (tree / "sources" / "one" / "one.mjs").write_text(COMPONENT.format(n=1))
    (tree / "sources" / "agent.mjs").write_text(HELPER)
    settings = dataclasses.replace(Settings(), data_dir=data_dir)
    helper_code = LocalBundler(settings).source_of(str(tree / "sources" / "agent.mjs"))

    first = publish(tree, data_dir)
    assert {r["file"]: r["status"] for r in first["results"]} == {
        "sources/one/one.mjs": "published", "sources/agent.mjs": "helper"}
    bundles = data_dir / "bundles"
    assert not (bundles / f"{ids.code_hash(helper_code)}.cjs").exists()
    assert not (bundles / f"{ids.code_hash(helper_code)}.json").exists()
    assert len(list(bundles.glob("*.cjs"))) == 1  # the component's only
    assert first["npm_store_pruned"] and not (data_dir / "npm-store").exists()

    again = publish(tree, data_dir)  # unchanged: nothing bundled, the helper remembered as one
    assert {r["status"] for r in again["results"]} == {"unchanged", "helper"}

    (tree / "sources" / "two").mkdir()
    (tree / "sources" / "two" / "two.mjs").write_text(COMPONENT.format(n=2))
    kept = publish(tree, data_dir, "--keep-npm-store")
    assert {r["file"]: r["status"] for r in kept["results"]}["sources/two/two.mjs"] == "published"
    assert not kept["npm_store_pruned"]
    assert [p.name for p in (data_dir / "npm-store").iterdir() if p.name.startswith("universal-user-agent@6.")]


def test_a_store_in_use_by_another_bundler_run_is_not_pruned(tmp_path: Path) -> None:
    settings = dataclasses.replace(Settings(), data_dir=tmp_path)
    tree = tmp_path / "npm-store" / "pkg@1.0.0" / "node_modules" / "pkg"
    tree.mkdir(parents=True)
    (tree / "index.js").write_text("module.exports = 1\n")
    bundler = LocalBundler(settings, sandbox=None)
    with local_bundler._store_lock(tmp_path, fcntl.LOCK_SH) as held:  # as a bundler run holds it
        assert held
        assert bundler.prune_store() is False
        assert (tree / "index.js").is_file()
    assert bundler.prune_store() is True
    assert not (tmp_path / "npm-store").exists()
    assert not [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("npm-store-pruned-")]
