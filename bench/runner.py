"""Runner benchmark: bundling and describe, cold and warm, and the overhead of a warm run call.

Talks to the local adapters directly (no HTTP), so what it measures is the runner path itself:
    .venv/bin/python bench/runner.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from headwater.adapters.local.bundler import LocalBundler  # noqa: E402
from headwater.adapters.local.node_runner import NodeRunnerPool  # noqa: E402
from headwater.settings import Settings  # noqa: E402

SOURCE = """import {{ axios }} from "@pipedream/platform";
export default {{
  name: "Bench {tag}", version: "1.0.0", key: "bench-{tag}",
  props: {{ http: "$.interface.http", db: "$.service.db", n: {{ type: "integer", default: 1 }} }},
  async run(event) {{ this.$emit({{ n: this.n, event }}) }},
}};
"""
WITH_NPM = """import get from "lodash@4.17.21/get";
export default {{ name: "Npm {tag}", version: "1.0.0", async run(e) {{ this.$emit(get(e, "a.b")) }} }};
"""


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def timed(fn, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(data_dir=Path(data_dir), runner_processes=1)
        bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
        try:
            pool.call("ping", {})
            code = SOURCE.format(tag=uuid.uuid4().hex[:8])
            bundle, cold_bundle = timed(bundler.bundle, code)
            _, warm_bundle = timed(bundler.bundle, code)
            _, cold_describe = timed(pool.call, "describe", {"timeout_ms": 10_000}, bundle=bundle)
            warm = [timed(pool.call, "describe", {"timeout_ms": 10_000}, bundle=bundle)[1] for _ in range(200)]
            _, npm_cold = timed(bundler.bundle, WITH_NPM.format(tag=uuid.uuid4().hex[:8]))

            request = {"instance": "dc_bench", "env": {"PD_COMPONENT": "dc_bench"}, "props": {"n": 1}, "db": {},
                       "event": {"a": 1}, "http": None, "timeout_ms": 30_000, "memory_mb": 256}
            pool.call("run", request, bundle=bundle)
            pings = [timed(pool.call, "ping", {})[1] for _ in range(args.calls)]
            runs = []
            for _ in range(args.calls):
                result, elapsed = timed(pool.call, "run", request, bundle=bundle)
                runs.append((elapsed, result["duration_ms"] / 1000))
        finally:
            pool.close()
    round_trips = [r[0] for r in runs]
    overheads = [r[0] - r[1] for r in runs]
    print(json.dumps({
        "cold_bundle_ms (esbuild, platform module)": ms(cold_bundle),
        "cold_bundle_with_npm_install_ms": ms(npm_cold),
        "warm_bundle_ms (cached by code hash)": ms(warm_bundle),
        "cold_describe_ms (new worker)": ms(cold_describe),
        "warm_describe_p50_ms": ms(statistics.median(warm)),
        "ping_round_trip_p50_ms": ms(statistics.median(pings)),
        "warm_run_round_trip_p50_ms": ms(statistics.median(round_trips)),
        "warm_run_overhead_p50_ms (round trip minus the run's own time)": ms(statistics.median(overheads)),
        "warm_run_overhead_p99_ms": ms(sorted(overheads)[int(len(overheads) * 0.99) - 1]),
    }, indent=2))


if __name__ == "__main__":
    main()
