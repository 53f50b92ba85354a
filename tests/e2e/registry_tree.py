"""A generated registry tree of the public one's shape (issue 24): app folders, each with its
`package.json` (npm ranges), an app file and a `common/` helper shared by its components, every
component importing `@pipedream/platform` (axios) and its app's SDK package; the SDKs are local
packages written into the package store (no registry asked), some shared between apps.

`measure` publishes it with `headwater registry publish` and samples the whole process tree's
memory (the CLI, its runner and bundler processes) from /proc.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SDK_VERSION = "1.0.0"


def sdk_files(name: str, size_kb: int) -> dict[str, str]:
    """An SDK-like package: an entry requiring a few modules of generated code, ~size_kb in all."""
    modules = 8
    body = "".join(f"exports.call{i} = function call{i}(x) {{ return [{i}, x, {json.dumps('w' * 40)}] }}\n"
                   for i in range(max(1, size_kb * 1024 // modules // 90)))
    files = {"package.json": json.dumps({"name": name, "version": SDK_VERSION, "main": "index.js"}),
             "index.js": "".join(f"exports.m{i} = require('./lib/m{i}.js')\n" for i in range(modules))
             + "exports.hello = () => 'hello from " + name + "'\n"}
    files.update({f"lib/m{i}.js": body for i in range(modules)})
    return files


def write_sdks(store: Path, count: int, size_kb: int) -> list[str]:
    names = [f"hwtest-sdk-{i}" for i in range(count)]
    for name in names:
        tree = store / f"{name}@{SDK_VERSION}"
        for rel, text in sdk_files(name, size_kb).items():
            path = tree / "node_modules" / name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (tree / ".complete").write_text("")
    return names


def generate(root: Path, store: Path, apps: int, per_app: int, sdks: int = 5, sdk_kb: int = 200,
             prefix: str = "hwgen") -> int:
    """apps x per_app components under root (again the same files: a larger tree grows a smaller
    one); returns their number."""
    names = write_sdks(store, sdks, sdk_kb)
    for a in range(apps):
        app = f"app{a}"
        sdk = names[a % len(names)]
        folder = root / app
        (folder / "common").mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(json.dumps({"name": f"@hwgen/{app}", "version": "0.0.1",
                                                         "dependencies": {sdk: SDK_VERSION}}))
        (folder / f"{app}.app.mjs").write_text(
            f'import {{ axios }} from "@pipedream/platform";\nimport sdk from "{sdk}";\n'
            f'export default {{ type: "app", app: "{prefix}_{app}", propDefinitions: {{\n'
            '  item: { type: "string", label: "Item", description: "An item" } },\n'
            '  methods: { hello() { return sdk.hello() }, get(url) { return axios(this, { url }) } } };\n')
        (folder / "common" / "base.mjs").write_text(
            f'import app from "../{app}.app.mjs";\n'
            'export default { props: { app, db: "$.service.db" }, methods: { limit() { return 10 } } };\n')
        for c in range(per_app):
            kind = "sources" if c % 2 else "actions"
            folder_c = folder / kind / f"item-{c}"
            folder_c.mkdir(parents=True, exist_ok=True)
            (folder_c / f"item-{c}.mjs").write_text(
                'import base from "../../common/base.mjs";\nimport app from "../../' + app + '.app.mjs";\n'
                f'export default {{ ...base, key: "{prefix}-{app}-item-{c}", name: "Item {c}",\n'
                f'  version: "0.0.1", type: "{kind[:-1]}",\n'
                '  props: { ...base.props, item: { propDefinition: [app, "item"] } },\n'
                '  async run() { return this.app.hello() } };\n')
    return apps * per_app


@dataclass
class Measured:
    seconds: float
    peak_rss_bytes: int
    result: dict


def _tree_rss(pid: int) -> int:
    """RSS of a process and all its descendants, in bytes (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


def measure(command: list[str], env: dict[str, str], every_s: float = 0.2) -> Measured:
    start = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(every_s):
            peak = max(peak, _tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate(timeout=3600)
    done.set()
    sampler.join()
    return Measured(time.monotonic() - start, peak, json.loads(out) if out.strip() else {"returncode": proc.returncode})


def sdk_bytes(sdk_kb: int) -> int:
    """What one SDK package's code weighs (each component bundles its app's)."""
    return sum(len(text) for rel, text in sdk_files("hwtest-sdk-0", sdk_kb).items() if rel.endswith(".js"))


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0
