"""How fast customResponse could be if it were answered from the event loop: a sketch, not the service.

A raw ASGI app under uvicorn commits each request to SQLite on the event loop, sends the run to the
Node runner (`layers/runner/src/stdio.mjs`, unsandboxed, the bench ECHO component) over a pipe that
the loop itself reads, and answers at `respond()`. No lane, no worker thread, no state read and no
commit of the run's outcome: what it leaves out is what the service adds. Measured next to Node-RED
with autocannon (`make bench`'s peers), interleaved rounds, medians:

    .venv/bin/python bench/loop_ceiling.py [--rounds 3] [--duration 4]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.ingest import ECHO  # noqa: E402
from bench.targets import (  # noqa: E402
    BODY,
    INSTALLED_PEERS,
    NODE,
    autocannon,
    spawn,
    start_node_red,
    stop_process,
    wait_ready,
)


class LoopApp:
    """The sketch: one runner process, its answers matched to requests by id on the loop."""

    def __init__(self, workdir: Path) -> None:
        from headwater.adapters.local.bundler import LocalBundler
        from headwater.settings import Settings

        self.settings = Settings(data_dir=workdir)
        self.bundle = LocalBundler(self.settings).bundle(ECHO)
        self.db = sqlite3.connect(workdir / "tasks.db", isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT)")
        self.workdir = workdir
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.proc: asyncio.subprocess.Process | None = None
        self.sent_code = False

    async def start(self) -> None:
        from headwater.adapters.local.node_runner import runner_command

        command = runner_command(self.settings, str(self.settings.runner_dir), str(self.workdir))
        self.proc = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.PIPE, cwd=self.workdir,
                                                         limit=1 << 24)
        asyncio.get_running_loop().create_task(self.read())

    async def read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            future = self.pending.get(message.get("id"))
            if future is None:
                continue
            if message.get("partial") == "respond" and not future.done():
                future.set_result(message["response"])
            elif "partial" not in message:
                self.pending.pop(message["id"], None)
                if not future.done():
                    future.set_result({"status": 502, "body": ""})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                await self.start()
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        event = {"method": scope["method"], "path": "/", "query": {}, "bodyRaw": body.decode(),
                 "headers": {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
                 "body": json.loads(body)}
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("INSERT INTO tasks (payload) VALUES (?)", (json.dumps(event),))
        self.db.execute("COMMIT")
        request_id = next(self.ids)
        future = self.pending[request_id] = asyncio.get_running_loop().create_future()
        code = {} if self.sent_code else {"code": self.bundle.code}
        self.sent_code = True
        request = {"id": request_id, "op": "run", "instance": "dc_sketch", "env": {}, "props": {}, "db": {},
                   "event": event, "http": {"endpoint": "-", "customResponse": True}, "timeout_ms": 5000,
                   "memory_mb": 256, "bundle": {"hash": self.bundle.hash, **code}}
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        response = await future
        out = str(response.get("body", "")).encode()
        await send({"type": "http.response.start", "status": int(response.get("status") or 200),
                    "headers": [(b"content-length", str(len(out)).encode())]})
        await send({"type": "http.response.body", "body": out})


def serve(port: int) -> None:
    import uvicorn

    with tempfile.TemporaryDirectory() as workdir:
        uvicorn.run(LoopApp(Path(workdir)), host="127.0.0.1", port=port, log_level="warning", access_log=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the sketch's own process
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    from tests.conftest import free_port

    with tempfile.TemporaryDirectory() as tmp:
        workdir, port = Path(tmp), free_port()
        env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"}
        sketch = spawn([sys.executable, __file__, "--serve", str(port)], workdir / "sketch.log", env=env)
        url = f"http://127.0.0.1:{port}/echo"
        try:
            wait_ready(url, sketch, workdir / "sketch.log", 30)
            red = start_node_red(NODE, INSTALLED_PEERS, workdir)
        except BaseException:
            stop_process(sketch)
            raise
        cannon = autocannon()
        rps: dict[tuple[int, str], list[float]] = {}
        try:
            for _ in range(args.rounds):
                for conns in (1, 10):
                    for name, target, pid in (("sketch", url, sketch.pid), ("node-red", red.urls["echo"], red.pid)):
                        shot = cannon.run(target, BODY, conns, args.duration, pid)
                        rps.setdefault((conns, name), []).append(shot.rps)
        finally:
            cannon.close()
            red.stop()
            stop_process(sketch)
    print("| c | loop sketch req/s | Node-RED req/s | sketch ÷ Node-RED |\n|---:|---:|---:|---:|")
    for conns in (1, 10):
        mine, theirs = statistics.median(rps[(conns, "sketch")]), statistics.median(rps[(conns, "node-red")])
        print(f"| {conns} | {mine:,.0f} | {theirs:,.0f} | {mine / theirs:.2f} |")


if __name__ == "__main__":
    main()
