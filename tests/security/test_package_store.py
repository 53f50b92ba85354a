"""The shared package store (adapters/local/package_store.py) against hostile components: every
component's runner loads its npm packages from one store, so a component that could change a
store file would run its code in every other tenant's components, and a crafted `hw-package:` id
must not load anything outside it. Local only: the Lambda side's bundles carry their packages.

- the store is bound read-only into runner sandboxes: a component cannot write, replace, rename
  or remove a store file, nor add one (tried through `fs` in a real run, and below Node's
  permission model from a plain process in the runner's own sandbox with the same binds);
- an id that is not a well-formed name@version/subpath, or whose file leaves the store by a link,
  loads nothing (the component plants the target in its own /tmp);
- the store holds package bundles only: no service file, no npm store.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from headwater.adapters.local.package_store import PACKAGES, store_dir
from headwater.adapters.local.runner_launch import package_store_bind
from headwater.adapters.local.sandbox import RUNNER, find_sandbox
from headwater.settings import Settings
from tests.conftest import Server, client_for, new_user
from tests.e2e.test_sources_api import wait_events

VERSION = "1.0.0"
PACKAGE = {  # a small package of the usual shape, installed straight into the npm store (no registry)
    "package.json": {"name": "hwtest-shared", "version": VERSION, "main": "lib/index.js"},
    "lib/index.js": "exports.greet = (who) => 'hello ' + who\n",
}
USES_IT = f"""import {{ greet }} from "hwtest-shared@{VERSION}";
export default {{ name: "uses the shared package", version: "1", props: {{}},
  async run() {{ this.$emit({{ said: greet("store") }}) }} }}"""
STORE_FILE = f"hwtest-shared@{VERSION}/r_.cjs"


@pytest.fixture(scope="module")
def server(local_server: Server) -> Server:
    tree = local_server.data_dir / "npm-store" / f"hwtest-shared@{VERSION}"
    for rel, content in PACKAGE.items():
        path = tree / "node_modules" / "hwtest-shared" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content) if isinstance(content, dict) else str(content))
    (tree / ".complete").write_text("")
    return local_server


@pytest.fixture(scope="module")
def api(server: Server) -> Iterator[httpx.Client]:
    with client_for(server, new_user(server, tier="paid").api_key) as client:
        client.timeout = httpx.Timeout(120.0)
        yield client


def run_once(api: httpx.Client, code: str) -> dict:
    r = api.post("/sources", json={"component_code": code})
    assert r.status_code == 200, r.text
    source_id = r.json()["data"]["id"]
    assert api.post(f"/sources/{source_id}/run").status_code == 202
    event: dict = wait_events(api, source_id, 1, timeout=90)[0]["event"]
    return event


@pytest.fixture(scope="module")
def shared(api: httpx.Client, server: Server) -> Path:
    """A component that uses the package has run: its bundle is in the store."""
    assert run_once(api, USES_IT) == {"said": "hello store"}
    path = store_dir(server.data_dir) / STORE_FILE
    assert path.is_file()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_component_cannot_write_replace_or_remove_a_store_file(api: httpx.Client, shared: Path) -> None:
    before = digest(shared)
    target = f"{PACKAGES}/{STORE_FILE}"
    code = f"""import fs from "node:fs";
    const TARGET = {json.dumps(target)}, EVIL = "module.exports = {{ greet: () => 'owned' }}";
    const tries = {{
      write: () => fs.writeFileSync(TARGET, EVIL),
      append: () => fs.appendFileSync(TARGET, ";globalThis.owned = 1"),
      chmod: () => fs.chmodSync(TARGET, 0o666),
      unlink: () => fs.unlinkSync(TARGET),
      rename: () => fs.renameSync(TARGET, TARGET + ".old"),
      replace: () => {{ fs.writeFileSync("/tmp/evil.cjs", EVIL); fs.renameSync("/tmp/evil.cjs", TARGET) }},
      create: () => fs.writeFileSync({json.dumps(PACKAGES + "/evil@1.0.0.cjs")}, EVIL),
      mkdir: () => fs.mkdirSync({json.dumps(PACKAGES + "/evil@1.0.0")}),
    }};
    export default {{ name: "store writer", version: "1", props: {{}}, async run() {{
      const seen = {{}};
      for (const [what, act] of Object.entries(tries)) {{
        try {{ act(); seen[what] = "DONE" }} catch (e) {{ seen[what] = e.code || e.name }}
      }}
      this.$emit(seen);
    }} }}"""
    seen = run_once(api, code)
    assert "DONE" not in seen.values(), seen
    assert digest(shared) == before
    assert run_once(api, USES_IT) == {"said": "hello store"}  # others still load the package as it was


def test_the_runner_sandbox_binds_the_store_read_only(server: Server, shared: Path) -> None:
    """Below Node's permission model (not a boundary), the OS: a process in a runner sandbox with
    the runner's store bind (runner_launch.package_store_bind) cannot change the store."""
    settings = Settings(data_dir=server.data_dir)
    sandbox = find_sandbox(settings.runner_dir, settings.node)
    before = digest(shared)
    probe = ("const fs = require('fs'); const t = process.argv[1]; const out = {};"
             "for (const [k, f] of Object.entries({write: () => fs.writeFileSync(t, 'x'),"
             " unlink: () => fs.unlinkSync(t), create: () => fs.writeFileSync(t + '.new', 'x')})) {"
             " try { f(); out[k] = 'DONE' } catch (e) { out[k] = e.code } } console.log(JSON.stringify(out))")
    node = f"{RUNNER}/{settings.node.relative_to(settings.runner_dir)}"
    egress = server.data_dir / "tmp"
    egress.mkdir(exist_ok=True)
    command = sandbox.runner(settings.runner_dir, egress, 1 << 20, [node, "-e", probe, f"{PACKAGES}/{STORE_FILE}"],
                             {}, [package_store_bind(settings)])
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"write": "EROFS", "unlink": "EROFS", "create": "EROFS"}
    assert digest(shared) == before


@pytest.fixture(scope="module")
def planted_link(server: Server, shared: Path) -> str:
    """A link in the store to a file outside it (in a runner's own /tmp), as a bug or a careless
    operator might leave one: the id that names it must not load it."""
    link = store_dir(server.data_dir) / "hwtest-link@1.0.0" / "r_.cjs"
    link.parent.mkdir(exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to("/tmp/escaped.cjs")
    return "hw-package:hwtest-link@1.0.0"


def test_an_id_cannot_load_a_file_outside_the_store(api: httpx.Client, shared: Path, planted_link: str) -> None:
    ids = [
        planted_link,
        "hw-package:../../tmp/escaped.cjs",
        "hw-package:../tmp/escaped",
        "hw-package:/tmp/escaped.cjs",
        "hw-package:hwtest-shared@1.0.0/../../../tmp/escaped.cjs",
        "hw-package:hwtest-shared@1.0.0/%2e%2e/%2e%2e/tmp/escaped.cjs",
        "hw-package:hwtest-shared@latest",
        "hw-package:hwtest-shared@1.0.0\0/x",
        "hw-package:" + "/tmp/escaped.cjs".replace("/", "\\"),
    ]
    code = f"""import fs from "node:fs";
    export default {{ name: "store escaper", version: "1", props: {{}}, async run() {{
      fs.writeFileSync("/tmp/escaped.cjs", "module.exports = 'ESCAPED'");
      const load = require;  // the runner's require, called with ids the bundler never makes
      const seen = {{}};
      for (const id of {json.dumps(ids)}) {{
        try {{ seen[id] = load(id) === "ESCAPED" ? "ESCAPED" : "LOADED" }} catch (e) {{ seen[id] = e.code || e.name }}
      }}
      seen.own = load("hw-package:hwtest-shared@1.0.0").greet("id");
      this.$emit(seen);
    }} }}"""
    seen = run_once(api, code)
    assert seen.pop("own") == "hello id"  # a well-formed id of the store still loads
    assert set(seen.values()) == {"MODULE_NOT_FOUND"}, seen


def test_the_store_holds_package_bundles_only(api: httpx.Client, server: Server, shared: Path) -> None:
    code = f"""import fs from "node:fs";
    export default {{ name: "store lister", version: "1", props: {{}}, async run() {{
      this.$emit({{ files: fs.readdirSync({json.dumps(PACKAGES)}, {{ recursive: true }}) }});
    }} }}"""
    files = run_once(api, code)["files"]
    assert STORE_FILE in files
    service = {"headwater.db", "secret.key", "registry-publish.json", "bundles", "npm-store", "npm-cache"}
    assert not [f for f in files if f.split("/")[0] in service or f.split("/")[-1] in service], files
    assert not [f for f in files if "node_modules" in f or f.endswith(".json")], files
    data_files = {p.name for p in server.data_dir.iterdir()}
    assert not data_files & set(files), files
    for f in files:  # a folder per name@version, a bundle per import in it
        parts = f.split("/")
        assert "@" in parts[0][1:] and (len(parts) == 1 or (len(parts) == 2 and parts[1].endswith(".cjs"))), f
