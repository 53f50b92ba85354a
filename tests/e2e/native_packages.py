"""Small npm packages of the shapes native code takes in real ones, written straight into a
bundler's package store as installed trees (`<store>/<name>@<version>/node_modules/...`, as
npm.mjs leaves them), so no registry is asked for them (an exact version needs no `npm view`).

- `hwtest-listed`: lists `bindings` as a dependency and never requires it (salesforce-webhooks).
- `hwtest-optional`: requires its optional native dependency `hwtest-cpu` (which loads its addon
  through `bindings`, like cpu-features) inside a try/catch, and its own `.node` file inside
  another (ssh2); it runs without both.
- `hwtest-real`: loads its addon unconditionally through `node-gyp-build`.
- `hwtest-ono`: requires `./isomorphic.node`, which is the file `isomorphic.node.js` (no addon:
  Node's resolution adds `.js`), as `@jsdevtools/ono` does.
- `hwtest-precinct`: lists Node's builtin modules with `process.binding('natives')` when it loads,
  as `precinct` does.
- `hwtest-mjs-base`: a package whose `.mjs` file (a component to extend) a component imports by
  its path and extends, as registry actions do with `@pipedream/helper_functions/actions/...mjs`.
- `hwtest-tla`: an ES module with top-level await (ky-universal's shape), which a CommonJS bundle
  cannot hold.
"""

from __future__ import annotations

import json
from pathlib import Path

VERSION = "1.0.0"

BINDINGS = {"package.json": {"name": "bindings", "version": "1.5.0", "main": "bindings.js"},
            "bindings.js": "module.exports = function bindings(name) {\n"
                           "  return require(require('path').join(__dirname, name))\n}\n"}
GYP_BUILD = {"package.json": {"name": "node-gyp-build", "version": "4.8.4", "main": "index.js"},
             "index.js": "module.exports = function load(dir) { return require(dir + '/build/Release/addon.node') }\n"}

TREES: dict[str, dict[str, dict[str, object]]] = {
    "hwtest-listed": {
        "hwtest-listed": {
            "package.json": {"name": "hwtest-listed", "version": VERSION, "main": "index.js",
                             "dependencies": {"bindings": "^1.5.0"}},
            "index.js": "exports.hello = (who) => 'hello ' + who\n",
        },
        "bindings": BINDINGS,
    },
    "hwtest-optional": {
        "hwtest-optional": {
            "package.json": {"name": "hwtest-optional", "version": VERSION, "main": "lib/index.js",
                             "optionalDependencies": {"hwtest-cpu": "1.0.0", "nan": "^2.0.0"}},
            "binding.gyp": "{}\n",
            "lib/index.js": (
                "let cpu = null\n"
                "try { cpu = require('hwtest-cpu')() } catch {}\n"
                "let crypto = null\n"
                "try { crypto = require('./crypto/build/Release/sshcrypto.node') } catch {}\n"
                "exports.features = () => ({ cpu: cpu === null ? 'without' : 'with',\n"
                "  crypto: crypto === null ? 'js' : 'native' })\n"
            ),
        },
        "hwtest-cpu": {
            "package.json": {"name": "hwtest-cpu", "version": VERSION, "main": "index.js", "gypfile": True,
                             "dependencies": {"bindings": "^1.5.0"}},
            "binding.gyp": "{}\n",
            "index.js": "const binding = require('bindings')('cpufeatures')\n"
                        "module.exports = () => binding.features()\n",
        },
        "bindings": BINDINGS,
    },
    "hwtest-real": {
        "hwtest-real": {
            "package.json": {"name": "hwtest-real", "version": VERSION, "main": "index.js",
                             "dependencies": {"node-gyp-build": "^4.8.0"}},
            "binding.gyp": "{}\n",
            "index.js": "module.exports = require('node-gyp-build')(__dirname)\n",
        },
        "node-gyp-build": GYP_BUILD,
    },
    "hwtest-ono": {
        "hwtest-ono": {
            "package.json": {"name": "hwtest-ono", "version": VERSION, "main": "cjs/index.js"},
            "cjs/index.js": "const { addInspectMethod } = require('./isomorphic.node')\n"
                            "exports.ono = (message) => addInspectMethod({ message })\n",
            "cjs/isomorphic.node.js": "exports.addInspectMethod = (e) => ({ ...e, inspected: true })\n",
        },
    },
    "hwtest-precinct": {
        "hwtest-precinct": {
            "package.json": {"name": "hwtest-precinct", "version": VERSION, "main": "index.js"},
            "index.js": "const natives = process.binding('natives')\n"
                        "exports.core = (names) => names.filter((n) => Boolean(natives[n]))\n",
        },
    },
    "hwtest-mjs-base": {
        "hwtest-mjs-base": {
            "package.json": {"name": "hwtest-mjs-base", "version": VERSION, "main": "index.js"},
            "index.js": "module.exports = {}\n",
            "actions/base.mjs": "export default { name: 'base',\n"
                                "  props: { url: { type: 'string', label: 'URL', optional: true } } }\n",
        },
    },
    "hwtest-tla": {
        "hwtest-tla": {
            "package.json": {"name": "hwtest-tla", "version": VERSION, "type": "module",
                             "exports": {".": "./index.js"}},
            "index.js": "import { sep } from 'node:path'\n"
                        "const { answer } = await import('./answer.js')\n"
                        "export default { answer, sep }\n"
                        "export const loaded = await Promise.resolve('after an await')\n",
            # a legal comment: esbuild moves it to the bundle's end, after its `export {...}`
            "answer.js": "/*! hwtest-tla | MIT License */\nexport const answer = 42\n",
        },
    },
}


def write_store(store: Path, trees: dict[str, dict[str, dict[str, object]]] = TREES, version: str = VERSION) -> None:
    """The trees, complete, in the store (again harmlessly when they are there)."""
    for top, packages in trees.items():
        tree = store / f"{top}@{version}"
        for name, files in packages.items():
            for rel, content in files.items():
                path = tree / "node_modules" / name / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(content) if isinstance(content, dict) else str(content))
        (tree / ".complete").write_text("")
