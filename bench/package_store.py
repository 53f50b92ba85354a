"""What the shared package store saves: N small components of our own that import one npm SDK,
published with `headwater registry publish` into a fresh data dir by each checkout given (e.g. main
and this branch), one after another in one run (the machine is shared: compare within a run):
    .venv/bin/python bench/package_store.py --checkout /work/main --checkout . [--count 20] [--sdk stripe@14.25.0]
or with `--folder DIR`, a folder of app folders instead (a slice of the public tree laid out in /tmp).

Prints one JSON object per checkout: bytes of component bundles (`bundles/*.cjs`), of the package
store (`packages/`), of the npm store, the publish's wall seconds and the CPU seconds of its whole
process tree (sampled from /proc every 50 ms, so the sandboxed bundlers and runners count too;
a process's last < 50 ms before it exits are missed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.proc import _stat, tree


def size(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file()) if path.exists() else 0


def lay_out(folder: Path, count: int, sdk: str) -> None:
    """An app folder of `count` actions, each importing the SDK (its version in package.json)."""
    name, version = sdk.rsplit("@", 1)
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": "hwbench-app", "version": "0.0.1",
                                                     "dependencies": {name: version}}))
    for i in range(count):
        action = folder / "actions" / f"action-{i}"
        action.mkdir(parents=True)
        (action / f"action-{i}.mjs").write_text(
            f'import sdk from "{name}";\n'
            f'export default {{ key: "hwbench-action-{i}", name: "Action {i}", version: "0.0.{i}", type: "action",\n'
            f'  props: {{ value: {{ type: "string", label: "Value {i}" }} }},\n'
            f'  async run() {{ return [typeof sdk, {i}, this.value] }} }}\n')


def publish(checkout: Path, folder: Path, data_dir: Path) -> dict:
    env = {**os.environ, "HEADWATER_DATA_DIR": str(data_dir)}
    started = time.monotonic()
    proc = subprocess.Popen([str(checkout / ".venv" / "bin" / "python"), "-m", "headwater.cli", "registry", "publish",
                             str(folder), "--data-dir", str(data_dir), "--json"], cwd=checkout, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    cpu: dict[int, float] = {}  # pid -> CPU seconds last seen
    while proc.poll() is None:
        for pid in tree(proc.pid):
            if (stat := _stat(pid)) is not None:
                cpu[pid] = max(cpu.get(pid, 0.0), stat[1])
        time.sleep(0.05)
    out, _ = proc.communicate()
    wall = time.monotonic() - started
    result = json.loads(out) if out.strip() else {}
    return {
        "checkout": str(checkout), "published": result.get("published"), "failed": result.get("failed"),
        "wall_s": round(wall, 1), "cpu_s": round(sum(cpu.values()), 1),
        "component_bundles_bytes": size(data_dir / "bundles", "*.cjs"),
        "package_store_bytes": size(data_dir / "packages"),
        "npm_store_bytes": size(data_dir / "npm-store"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkout", action="append", type=Path, required=True)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--sdk", default="stripe@14.25.0")
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-pkgstore-bench-") as tmp:
        folder = args.folder.resolve() if args.folder else Path(tmp) / "app"
        if args.folder is None:
            lay_out(folder, args.count, args.sdk)
        for i, checkout in enumerate(args.checkout):
            data_dir = Path(tmp) / f"data-{i}"
            print(json.dumps(publish(checkout.resolve(), folder, data_dir)), flush=True)


if __name__ == "__main__":
    main()
