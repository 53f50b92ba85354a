"""Instances of one code share the runner's workers (layers/runner/src/slots.mjs), each with its own
module state: the bundle is evaluated again for each instance a worker hosts. The runner process is
started here directly (node src/stdio.mjs, its JSON lines), so that its bounds can be set small."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from headwater.settings import Settings

# Module-level state: `owner` is the first instance that ran in this module scope, `runs` how many
# runs it has seen, `loadedAs` the env it was evaluated with. Shared module state would show
# another instance's name or count.
COUNTER = """
let owner = null;
let runs = 0;
const loadedAs = process.env.PD_COMPONENT;
module.exports = {
  name: "Module State", version: "1.0.0",
  props: { who: { type: "string" } },
  async run(event) {
    if (owner === null) owner = this.who;
    runs += 1;
    if (event.throw) throw new Error(`thrown by ${this.who}`);
    if (event.oom) { const hold = []; for (;;) hold.push(new Array(1e5).fill(runs)); }
    this.$emit({ owner, runs, who: this.who, env: process.env.PD_COMPONENT, loadedAs });
  },
};
"""
MEMORY_MB = 64


class Runner:
    """One runner process; `call` sends a request and returns the future of its answer."""

    def __init__(self, **env: str) -> None:
        settings = Settings()
        self.proc = subprocess.Popen(
            [str(settings.node), str(settings.runner_dir / "src" / "stdio.mjs")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}, text=True)
        self.answers: dict[int, Future[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.next_id = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            answer = json.loads(line)
            if "partial" in answer:
                continue
            with self.lock:
                future = self.answers.pop(answer["id"])
            future.set_result(answer)

    def call(self, request: dict[str, Any]) -> Future[dict[str, Any]]:
        future: Future[dict[str, Any]] = Future()
        with self.lock:
            self.next_id += 1
            request = {**request, "id": self.next_id}
            self.answers[self.next_id] = future
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return future

    def runs(self, runs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Runs of instances of COUNTER sent at once: their results, in order."""
        futures = [self.call({"op": "run", "instance": who, "bundle": {"hash": "counter", "code": COUNTER},
                              "props": {"who": who}, "env": {"PD_COMPONENT": who}, "db": {}, "event": event,
                              "timeout_ms": 20_000, "memory_mb": MEMORY_MB}) for who, event in runs]
        answers = [f.result(60) for f in futures]
        assert all(a["ok"] for a in answers), answers
        return [a["result"] for a in answers]

    def run(self, who: str, **event: Any) -> dict[str, Any]:
        return self.runs([(who, event)])[0]

    def ping(self) -> dict[str, Any]:
        return self.call({"op": "ping"}).result(60)["result"]


@contextmanager
def runner(**env: str) -> Iterator[Runner]:
    r = Runner(**env)
    try:
        yield r
    finally:
        assert r.proc.stdin is not None
        r.proc.stdin.close()
        r.proc.wait(30)


def emitted(result: dict[str, Any]) -> dict[str, Any]:
    """The run's event; the env it ran with and was loaded with are its own instance's."""
    assert result["error"] is None, result["error"]
    [emit] = result["emits"]
    event = dict(emit["event"])
    assert event.pop("env") == event.pop("loadedAs") == event["who"], emit
    return event


def test_two_instances_on_one_worker_keep_their_own_module_state() -> None:
    with runner(HEADWATER_RUNNER_MAX_WORKERS="1") as r:
        assert [emitted(r.run("a"))["runs"] for _ in range(3)] == [1, 2, 3]
        assert emitted(r.run("b")) == {"owner": "b", "runs": 1, "who": "b"}
        # b's load left a's module scope where it was: a goes on from its own count
        assert emitted(r.run("a")) == {"owner": "a", "runs": 4, "who": "a"}
        stats = r.ping()
        assert (stats["workers"], stats["instances"]) == (1, 2), stats


def test_many_instances_on_few_workers_each_keep_their_own_state() -> None:
    """20 instances on at most 2 workers of 4 instances each: instances are dropped and loaded
    again (their count starts over), never one instance's state seen by another."""
    names = [f"i{n}" for n in range(20)]
    with runner(HEADWATER_RUNNER_MAX_WORKERS="2", HEADWATER_RUNNER_MAX_INSTANCES="4") as r:
        for round_ in (1, 2):
            for pair in range(0, len(names), 2):  # two in flight at a time, as the service's share allows
                two = names[pair:pair + 2]
                for who, result in zip(two, r.runs([(w, {}) for w in two]), strict=True):
                    event = emitted(result)
                    assert (event["owner"], event["who"]) == (who, who), event
                    assert event["runs"] == 1 if round_ == 1 else event["runs"] in (1, 2), event
        stats = r.ping()
        assert stats["workers"] <= 2 and stats["instances"] <= 8, stats
        # run back to back, instances stay loaded where they are: a's count goes on
        assert [emitted(r.run("a"))["runs"] for _ in range(3)] == [1, 2, 3]


def test_a_throw_or_an_out_of_memory_of_one_instance_leaves_the_next_run_of_another_whole() -> None:
    with runner(HEADWATER_RUNNER_MAX_WORKERS="1") as r:
        assert emitted(r.run("a"))["runs"] == 1
        thrown = r.run("b", throw=True)
        assert thrown["error"]["message"] == "thrown by b", thrown["error"]
        assert emitted(r.run("a")) == {"owner": "a", "runs": 2, "who": "a"}  # same worker, still warm
        assert emitted(r.run("b")) == {"owner": "b", "runs": 2, "who": "b"}
        died = r.run("b", oom=True)
        assert died["error"]["code"] == "OUT_OF_MEMORY", died["error"]
        # the worker is gone with both instances: each loads again, on a fresh one, from scratch
        assert emitted(r.run("a")) == {"owner": "a", "runs": 1, "who": "a"}
        assert emitted(r.run("b")) == {"owner": "b", "runs": 1, "who": "b"}
        assert r.ping()["workers"] == 1
