"""Cold-start import time of each Lambda handler module of template.yaml: a fresh Python process
per sample imports the module (which builds its services, clients and app at module level, as a
Lambda init does) and reports the wall time of the import; the median of `--samples` is printed.

    .venv/bin/python bench/aws_cold_start.py [--samples 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from headwater.emulated.template import Template

PROBE = """
import time, sys
t = time.perf_counter()
import importlib; importlib.import_module(sys.argv[1])
print(time.perf_counter() - t)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "HEADWATER_BACKEND": "aws", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "HEADWATER_AWS_ENDPOINT_URL": "http://127.0.0.1:9", "HEADWATER_DATA_DIR": tempfile.mkdtemp(),
           "POWERTOOLS_METRICS_DISABLED": "true"}
    results = {}
    for function in Template.read().functions().values():
        if not function.runtime.startswith("python"):
            continue
        module = function.handler.rpartition(".")[0]
        times = [float(subprocess.run([sys.executable, "-c", PROBE, module], env=env, capture_output=True, text=True,
                                      check=True).stdout.split()[-1]) for _ in range(args.samples)]
        results[module] = round(statistics.median(times) * 1000)
        print(f"{module:48s} {results[module]:6d} ms", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
