"""Publishing a real folder tree at registry scale: components per minute, disk per component,
failures by cause. Give it a folder of app folders (e.g. a snapshot of the public components
repository's `components/` copied to a temp folder, never into this repository):
    .venv/bin/python bench/publish_folder.py FOLDER [--data-dir DIR] [--twice]

It starts a service on a fresh data dir (publishing goes into a running service, as an operator
would), runs `headwater registry publish FOLDER --json` against it, and prints one JSON object.
`--twice` publishes again with everything bundled already (the warm rate).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
HEADWATER = [sys.executable, "-m", "headwater.cli"]


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def publish(folder: Path, env: dict[str, str], data_dir: Path) -> tuple[dict, float]:
    started = time.monotonic()
    proc = subprocess.run([*HEADWATER, "registry", "publish", str(folder), "--data-dir", str(data_dir), "--json"],
                          env=env, capture_output=True, text=True)
    return json.loads(proc.stdout), time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--port", type=int, default=18799)
    parser.add_argument("--twice", action="store_true")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="hw-publish-bench-"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")},
           "HEADWATER_DATA_DIR": str(data_dir), "HEADWATER_PORT": str(args.port), "HEADWATER_HOST": "127.0.0.1",
           "HEADWATER_INGEST_RATE": "0"}
    server = subprocess.Popen([*HEADWATER, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{args.port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the service did not start")
            time.sleep(0.2)
        out, seconds = publish(args.folder, env, data_dir)
        published = out["published"]
        disk = {name: size(data_dir / name) for name in ("bundles", "npm-store", "npm-cache")}
        report = {
            "files": len(out["results"]), "published": published, "skipped": out["skipped"],
            "helpers": out["helpers"], "failed": out["failed"], "failure_causes": out["failure_causes"],
            "seconds": round(seconds, 1), "cores": len(os.sched_getaffinity(0)),
            "components_per_minute": round(published / seconds * 60, 1),
            "disk_mb": {k: round(v / 2**20, 1) for k, v in disk.items()},
            "disk_per_component_mb": round(sum(disk.values()) / max(1, published) / 2**20, 2),
        }
        if args.twice:
            again, warm = publish(args.folder, env, data_dir)
            report["warm_seconds"] = round(warm, 1)
            report["warm_components_per_minute"] = round(again["published"] / warm * 60, 1)
        print(json.dumps(report, indent=1))
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
