"""Cold-start import time of each Lambda handler module of template.yaml: a fresh Python process
per sample imports the module (which builds its services, clients and app at module level, as a
Lambda init does) and reports the time of the import; the median of `--samples` is printed.
The Node runner's init is a fresh `node` importing `lambda.mjs` (its child starts at the first
call, not at init), process start included. `--cpu` (what bench/aws_cost.py prices): CPU time
instead of wall time, which on a loaded machine says more about the machine than the code (an
import is CPU work: 0.9 s of wall time at load 2-3 became 5-7 s at load 8-10).

    .venv/bin/python bench/aws_cold_start.py [--samples 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from headwater.emulated.template import Template, load

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import time, sys
t, c = time.perf_counter(), time.process_time()
import importlib; importlib.import_module(sys.argv[1])
print(time.perf_counter() - t, time.process_time() - c)
"""
RUNNER = ROOT / "layers" / "runner" / "src" / "lambda.mjs"


def _env() -> dict[str, str]:
    return {**os.environ, "HEADWATER_BACKEND": "aws", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
            "HEADWATER_AWS_ENDPOINT_URL": "http://127.0.0.1:9", "HEADWATER_DATA_DIR": tempfile.mkdtemp(),
            "POWERTOOLS_METRICS_DISABLED": "true"}


def _lambda_python() -> str:
    spec = importlib.util.spec_from_file_location("package_aws", ROOT / "scripts" / "package_aws.py")
    assert spec and spec.loader
    package_aws = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package_aws)
    python = package_aws.lambda_python()
    if python is None:
        raise SystemExit("--built needs a Python 3.12 (Lambda's runtime) on PATH or in pyenv")
    return str(python)


def _built(function: Any, built: Path) -> tuple[list[str], dict[str, str]]:
    """The interpreter and environment of a Lambda cold start of `function` from the build `built`."""
    defaults = {name: str(p.get("Default", name)) for name, p in load(ROOT / "template.yaml")["Parameters"].items()}
    variables = {name: value if isinstance(value, str) else defaults.get(value.get("Ref"), name.lower())
                 for name, value in function.environment.items()}
    return [_lambda_python(), "-S"], {**variables, **_env(), "PYTHONDONTWRITEBYTECODE": "1",
                                       "PYTHONPATH": f"{built / function.name}:{built / 'PythonDepsLayer' / 'python'}"}


def import_ms(module: str, samples: int = 5, cpu: bool = False,
              run: tuple[list[str], dict[str, str]] | None = None) -> float:
    """The median time a fresh interpreter takes to import a handler module, in ms (wall, or CPU);
    `run`: the interpreter (with its options) and environment, else this one and _env()."""
    python, env = run or ([sys.executable], _env())
    times = [float(subprocess.run([*python, "-c", PROBE, module], env=env, capture_output=True, text=True,
                                  check=True).stdout.split()[-1 if cpu else -2]) for _ in range(samples)]
    return statistics.median(times) * 1000


def runner_init_ms(samples: int = 5, cpu: bool = False) -> float:
    """The median time from starting `node` to `lambda.mjs` imported, in ms (wall, or CPU)."""
    code = f"await import({json.dumps(RUNNER.as_uri())})"
    times = []
    for _ in range(samples):
        started, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["node", "--input-type=module", "-e", code], env=_env(), capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime if cpu
                     else time.perf_counter() - started)
    return statistics.median(times) * 1000


def init_ms(functions: list[str], samples: int = 5, cpu: bool = False, built: Path | None = None) -> dict[str, float]:
    """Each named function's init time, in ms (its handler module's import; the runner's node start;
    `built`: see --built)."""
    found = Template.read().functions()
    out = {}
    for name in functions:
        function = found[name]
        if function.runtime.startswith("python"):
            out[name] = import_ms(function.handler.rpartition(".")[0], samples, cpu,
                                  _built(function, built) if built else None)
        elif function.runtime.startswith("nodejs"):
            out[name] = runner_init_ms(samples, cpu)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--cpu", action="store_true", help="CPU time instead of wall time")
    parser.add_argument("--built", type=Path, help="a sam build directory: import from its artifacts, as Lambda")
    args = parser.parse_args()
    results = {}
    for name, function in Template.read().functions().items():
        ms = init_ms([name], args.samples, args.cpu, args.built and args.built.resolve()).get(name)
        if ms is None:
            continue
        results[name] = round(ms)
        print(f"{name:32s} {function.handler:48s} {results[name]:6d} ms", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
