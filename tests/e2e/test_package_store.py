"""Shared packages (docs/runner-protocol.md, "Shared packages") as components see them: the same
imports give the same values from the shared store as from a self-contained bundle (the Lambda
side's), through the real sandboxed bundler and a real runner process. Small packages of the
shapes interop depends on, written straight into the npm store (no registry asked):

- `hwtest-flagged`: CommonJS that sets `__esModule` and has no `default` (a default import from an
  ES module is its module.exports, as in Node);
- `hwtest-esm`: an ES module package only, with a default and a named export, importing a
  dependency of its own tree (inlined into its store bundle);
- `hwtest-dual`: `exports` with an `import` and a `require` file (two store entries, `?import`);
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.adapters.local.package_store import store_dir
from headwater.ports import Bundle, Instance
from headwater.settings import Settings
from tests.e2e.native_packages import write_store

V = "1.0.0"
TREES: dict[str, dict[str, dict[str, object]]] = {
    "hwtest-flagged": {"hwtest-flagged": {
        "package.json": {"name": "hwtest-flagged", "version": V, "main": "index.js"},
        "index.js": "Object.defineProperty(exports, '__esModule', { value: true })\n"
                    "exports.getAgent = () => 'agent/1'\n",
    }},
    "hwtest-esm": {
        "hwtest-esm": {
            "package.json": {"name": "hwtest-esm", "version": V, "type": "module", "exports": {".": "./index.js"},
                             "dependencies": {"hwtest-dep": V}},
            "index.js": "import { twice } from 'hwtest-dep'\n"
                        "export default function hello(who) { return 'hello ' + who }\n"
                        "export const named = twice(21)\n",
        },
        "hwtest-dep": {
            "package.json": {"name": "hwtest-dep", "version": V, "main": "index.js"},
            "index.js": "exports.twice = (n) => n * 2\n",
        },
    },
    "hwtest-dual": {"hwtest-dual": {
        "package.json": {"name": "hwtest-dual", "version": V,
                         "exports": {".": {"import": "./esm.mjs", "require": "./cjs.cjs"}, "./sub": "./sub.js"}},
        "esm.mjs": "export default 'esm default'\nexport const kind = 'esm'\n",
        "cjs.cjs": "module.exports = { kind: 'cjs' }\n",
        "sub.js": "module.exports = (x) => 'sub ' + x\n",
    }},
}

COMPONENT = f"""import flaggedDefault, {{ getAgent }} from "hwtest-flagged@{V}";
import * as flaggedNs from "hwtest-flagged@{V}";
import hello, {{ named }} from "hwtest-esm@{V}";
import * as esmNs from "hwtest-esm@{V}";
import dualDefault, {{ kind }} from "hwtest-dual@{V}";
import sub from "hwtest-dual@{V}/sub";
const required = require("hwtest-dual@{V}");
export default {{ name: "interop", version: "1", type: "action", props: {{}}, async run() {{
  const late = await import("hwtest-esm@{V}");
  return {{
    flaggedDefault: typeof flaggedDefault, agent: getAgent(), flaggedDefaultAgent: typeof flaggedDefault.getAgent,
    flaggedNsDefault: typeof flaggedNs.default,
    hello: hello("store"), named, esmNs: Object.keys(esmNs).sort(), late: late.default("late"),
    dualDefault, kind, required: required.kind, sub: sub("path"),
  }};
}} }}"""


def write_trees(store: Path) -> None:
    write_store(store, TREES, V)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, NodeRunnerPool]]:
    data_dir = tmp_path_factory.mktemp("pkgstore")
    write_trees(data_dir / "npm-store")
    settings = Settings(data_dir=data_dir, runner_processes=1)
    pool = NodeRunnerPool(settings)
    try:
        yield settings, pool
    finally:
        pool.close()


def returned(pool: NodeRunnerPool, bundle: Bundle) -> object:
    result = pool.run_many(bundle, Instance(id="dc_interop", props={}, account="a", db={}), [{}], 20_000)[0]
    assert result.error is None, result.error
    return result.return_value


def test_shared_imports_give_what_self_contained_ones_give(settings: tuple[Settings, NodeRunnerPool]) -> None:
    config, pool = settings
    shared = LocalBundler(config).bundle(COMPONENT)
    alone = LocalBundler(config, shared_packages=False).bundle(COMPONENT)

    assert "hw-package:" not in alone.code and "hello " in alone.code  # Lambda's kind: the packages inlined
    assert "hello " not in shared.code and "hw-package:hwtest-esm@1.0.0" in shared.code
    sidecar = json.loads((config.data_dir / "bundles" / f"{shared.hash}.json").read_text())
    assert sidecar["shared"] == {  # `?import` only where the import condition names another file
        "hw-package:hwtest-dual@1.0.0": "hwtest-dual@1.0.0/r_.cjs",
        "hw-package:hwtest-dual@1.0.0?import": "hwtest-dual@1.0.0/i_.cjs",
        "hw-package:hwtest-dual@1.0.0/sub": "hwtest-dual@1.0.0/r_sub.cjs",
        "hw-package:hwtest-esm@1.0.0": "hwtest-esm@1.0.0/r_.cjs",
        "hw-package:hwtest-flagged@1.0.0": "hwtest-flagged@1.0.0/r_.cjs",
    }
    assert all((store_dir(config.data_dir) / f).is_file() for f in sidecar["shared"].values())

    expected = {
        "flaggedDefault": "object", "agent": "agent/1", "flaggedDefaultAgent": "function", "flaggedNsDefault": "object",
        "hello": "hello store", "named": 42, "esmNs": ["default", "named"], "late": "hello late",
        "dualDefault": "esm default", "kind": "esm", "required": "cjs", "sub": "sub path",
    }
    assert returned(pool, alone) == expected
    assert returned(pool, shared) == expected


def test_a_store_file_is_written_once_and_shared_by_every_bundle(settings: tuple[Settings, NodeRunnerPool]) -> None:
    config, pool = settings
    bundler = LocalBundler(config)
    first = bundler.bundle(f'import {{ named }} from "hwtest-esm@{V}";\nexport default {{ name: "a", version: "1", '
                           'type: "action", props: {}, async run() { return named } }')
    store_file = store_dir(config.data_dir) / "hwtest-esm@1.0.0" / "r_.cjs"
    written = store_file.stat()
    second = bundler.bundle(f'import {{ named }} from "hwtest-esm@{V}";\nexport default {{ name: "b", version: "1", '
                            'type: "action", props: {}, async run() { return named + 1 } }')
    assert (store_file.stat().st_ino, store_file.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert returned(pool, first) == 42 and returned(pool, second) == 43


def test_a_bundle_whose_store_file_is_gone_is_made_again(settings: tuple[Settings, NodeRunnerPool]) -> None:
    """A store emptied by hand (or collected wrongly): the bundle on disk is made again, not run
    to fail with MODULE_NOT_FOUND."""
    config, pool = settings
    code = (f'import hello from "hwtest-esm@{V}";\nexport default {{ name: "c", version: "1", type: "action", '
            'props: {}, async run() { return hello("again") } }')
    LocalBundler(config).bundle(code)
    store_file = store_dir(config.data_dir) / "hwtest-esm@1.0.0" / "r_.cjs"
    store_file.unlink()
    again = LocalBundler(config).bundle(code)  # a new process's bundler: nothing in memory
    assert store_file.is_file()
    assert returned(pool, again) == "hello again"
