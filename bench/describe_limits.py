"""Describe memory and time of the largest real bundles (what HEADWATER_DESCRIBE_MEMORY_MB and
HEADWATER_DESCRIBE_TIMEOUT_MS must allow). Reads the bundles a service made (its data dir, e.g.
after `headwater registry publish` of real app folders) and, for the largest, finds the smallest
worker heap limit at which a cold describe passes, and how long a cold describe takes:
    .venv/bin/python bench/describe_limits.py --data-dir DIR [--top 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from headwater.adapters.local.node_runner import NodeRunnerPool  # noqa: E402
from headwater.ports import Bundle  # noqa: E402
from headwater.settings import Settings  # noqa: E402

LADDER = [64, 96, 128, 192, 256, 384, 512, 768]


def describe(pool: NodeRunnerPool, bundle: Bundle, memory_mb: int) -> tuple[bool, float, str]:
    started = time.perf_counter()
    try:
        pool.call("describe", {"timeout_ms": 60_000, "memory_mb": memory_mb}, bundle=bundle)
        return True, time.perf_counter() - started, ""
    except Exception as e:  # noqa: BLE001 - a refusal at this limit is what is measured
        return False, time.perf_counter() - started, str(getattr(e, "code", "")) or str(e)[:80]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    files = sorted((args.data_dir / "bundles").glob("*.cjs"), key=lambda p: p.stat().st_size, reverse=True)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(data_dir=Path(scratch), runner_processes=1, runner_memory_mb=2048)
        pool = NodeRunnerPool(settings)
        try:
            for path in files[: args.top]:
                bundle = Bundle(hash=path.stem, code=path.read_text())
                needed, seconds = None, None
                for memory_mb in LADDER:
                    ok, took, _ = describe(pool, Bundle(hash=f"{path.stem}-{memory_mb}", code=bundle.code), memory_mb)
                    if ok:
                        needed, seconds = memory_mb, took
                        break
                rows.append({"bundle": path.name[:16], "bundle_mb": round(path.stat().st_size / 2**20, 2),
                             "min_memory_mb": needed, "cold_describe_s": round(seconds or 0, 2)})
                print(json.dumps(rows[-1]), flush=True)
        finally:
            pool.close()
    print(json.dumps({"largest": rows}, indent=1))


if __name__ == "__main__":
    main()
