"""Load generators for the side-by-side rounds: autocannon (the pinned npm one, run with our Node 22)
and, where the npm peers are not installed (the CI smoke), the keep-alive asyncio client of
bench/ingest.py. Each round reports the load generator's own CPU next to the target's, and what
the rest of the machine used meanwhile, so a figure bounded by the client or by a neighbour shows.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from bench.ingest import load as asyncio_load
from bench.proc import machine_busy_s, tree_cpu_s

CANNON = Path(__file__).resolve().parent / "peers" / "cannon.cjs"


@dataclass
class Shot:
    """One load round against one URL. CPU figures are in cores (1.0 = one core busy all the round)."""

    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    failed: int  # non-2xx answers, errors and timeouts
    loadgen_cpu: float
    target_cpu: float  # the target's process tree (server and its children)
    other_cpu: float  # every other process of the machine

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class LoadGenerator(Protocol):
    name: str

    def run(self, url: str, body: bytes, connections: int, seconds: float, target_pid: int) -> Shot: ...

    def close(self) -> None: ...


class _Meter:
    """CPU seconds of the target, of the load generator and of the whole machine over a round."""

    def __init__(self, target_pid: int, loadgen: Any) -> None:
        self.target_pid, self.loadgen = target_pid, loadgen
        self.start = (tree_cpu_s(target_pid), loadgen(), machine_busy_s())

    def cores(self, span: float) -> tuple[float, float, float]:
        target = tree_cpu_s(self.target_pid) - self.start[0]
        own = self.loadgen() - self.start[1]
        other = machine_busy_s() - self.start[2] - target - own
        return round(own / span, 2), round(target / span, 2), round(max(0.0, other) / span, 2)


class Autocannon:
    """autocannon in one long-lived Node process (bench/peers/cannon.cjs), a round per request."""

    name = "autocannon"

    def __init__(self, node: Path, modules: Path) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.proc = subprocess.Popen([str(node), str(CANNON), str(modules)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr)
        self.version = json.loads((modules / "node_modules" / "autocannon" / "package.json").read_text())["version"]

    def run(self, url: str, body: bytes, connections: int, seconds: float, target_pid: int) -> Shot:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        meter = _Meter(target_pid, lambda: tree_cpu_s(self.proc.pid))
        opts = {"url": url, "body": body.decode(), "connections": connections, "duration": seconds}
        self.proc.stdin.write(json.dumps(opts).encode() + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self._stderr.seek(0)
            raise RuntimeError(f"autocannon exited: {self._stderr.read()[-2000:].decode()}")
        result = json.loads(line)
        if "error" in result:
            raise RuntimeError(f"autocannon: {result['error']}")
        span = result["duration_s"]
        loadgen, target, other = meter.cores(span)
        return Shot(requests=result["ok"], rps=round(result["ok"] / span, 1), p50_ms=round(result["p50_ms"] or 0.0, 3),
                    p99_ms=round(result["p99_ms"] or 0.0, 3),
                    failed=result["non2xx"] + result["errors"] + result["timeouts"],
                    loadgen_cpu=loadgen, target_cpu=target, other_cpu=other)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


class AsyncioClient:
    """bench/ingest.py's client, in this process: its CPU is this process's CPU over the round."""

    name = "asyncio (bench/ingest.py)"

    def run(self, url: str, body: bytes, connections: int, seconds: float, target_pid: int) -> Shot:
        meter, started = _Meter(target_pid, time.process_time), time.perf_counter()
        result = asyncio.run(asyncio_load(url, "POST", body, seconds, connections))
        span = time.perf_counter() - started
        loadgen, target, other = meter.cores(span)
        ok = sum(n for code, n in result["statuses"].items() if 200 <= code < 300)
        return Shot(requests=ok, rps=round(ok / span, 1), p50_ms=result["p50_ms"], p99_ms=result["p99_ms"],
                    failed=result["requests"] - ok, loadgen_cpu=loadgen, target_cpu=target, other_cpu=other)

    def close(self) -> None:
        pass
