"""Publishing a tree again does only what changed (issue 24): by content hash per component
(its file, the files its relative imports reach, their package.json), an unchanged tree is all
`unchanged` (nothing bundled, described or stored: the same component ids), and a changed file
publishes again only the components that import it. A generated tree of two apps."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from tests.conftest import HEADWATER, Server

COMPONENTS = ("new-item", "updated-item", "deleted-item")


def generate(root: Path, prefix: str) -> None:
    for app in ("alpha", "beta"):
        folder = root / app
        (folder / "common").mkdir(parents=True)
        (folder / "package.json").write_text(json.dumps({"name": f"@hwtest/{app}", "version": "0.0.1"}))
        (folder / f"{app}.app.mjs").write_text(
            f'export default {{ type: "app", app: "{prefix}_{app}", methods: {{ hi() {{ return "hi" }} }} }}\n')
        (folder / "common" / "constants.mjs").write_text('export const LIMIT = 10;\n')
        for name in COMPONENTS:
            source = folder / "sources" / name
            source.mkdir(parents=True)
            (source / f"{name}.mjs").write_text(
                f'import app from "../../{app}.app.mjs";\n'
                'import { LIMIT } from "../../common/constants.mjs";\n'
                f'export default {{ key: "{prefix}-{app}-{name}", name: "{name} " + LIMIT, version: "0.0.1",\n'
                '  type: "source", props: { app }, async run() { this.$emit({ limit: LIMIT }) } };\n')


def publish(server: Server, root: Path) -> dict[str, dict]:
    proc = subprocess.run([*HEADWATER, "registry", "publish", str(root), "--data-dir", str(server.data_dir), "--json"],
                          capture_output=True, text=True, env=server.env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["file"]: r for r in json.loads(proc.stdout)["results"]}


def test_an_unchanged_tree_does_no_work_and_a_change_only_its_dependents(server: Server, tmp_path: Path) -> None:
    prefix = "hwtest" + uuid.uuid4().hex[:6]
    generate(tmp_path, prefix)
    first = publish(server, tmp_path)
    assert {r["status"] for r in first.values()} == {"published"} and len(first) == 6, first

    again = publish(server, tmp_path)
    assert {f: r["status"] for f, r in again.items()} == {f: "unchanged" for f in first}
    assert {f: r["id"] for f, r in again.items()} == {f: r["id"] for f, r in first.items()}

    (tmp_path / "beta" / "common" / "constants.mjs").write_text("export const LIMIT = 20;\n")
    (tmp_path / "alpha" / "sources" / "new-item" / "new-item.mjs").write_text(
        (tmp_path / "alpha" / "sources" / "new-item" / "new-item.mjs").read_text() + "// changed\n")
    changed = publish(server, tmp_path)
    republished = {f for f, r in changed.items() if r["status"] == "published"}
    assert republished == {f"beta/sources/{n}/{n}.mjs" for n in COMPONENTS} | {"alpha/sources/new-item/new-item.mjs"}
    assert all(changed[f]["status"] == "unchanged" and changed[f]["id"] == first[f]["id"]
               for f in first if f not in republished)
    assert all(changed[f]["id"] != first[f]["id"] for f in republished)
