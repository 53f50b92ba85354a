"""`this.db` handed on between the runs of a batch by one rule (layers/runner/src/db.mjs), the
service's own (`merge_db`): a run sees its predecessors' writes, a key set to undefined is gone,
and it is the same whether the runs before it ran on this worker or on one since replaced."""

from __future__ import annotations

from pathlib import Path

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.domain.runs import merge_db
from headwater.ports import Instance
from headwater.settings import Settings

KEYS = """export default {
  name: "Keys", version: "1.0.0",
  props: { db: "$.service.db" },
  async run(event) {
    const seen = { a: this.db.get("a") ?? "absent", b: this.db.get("b") ?? "absent", c: this.db.get("c") ?? "absent" };
    for (const [k, v] of Object.entries(event.set || {})) this.db.set(k, v === "undefined" ? undefined : v);
    if (event.leave) setInterval(() => {}, 1000);
    this.$emit(seen);
  },
};"""


def test_each_run_sees_the_db_its_predecessors_left_on_a_warm_or_a_fresh_worker(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, runner_processes=1)
    bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
    start = {"a": 1, "b": 2}
    events = [
        {"set": {"a": "undefined", "c": 3}},  # warm: a deleted, c added
        {"set": {"b": "undefined"}, "leave": True},  # b deleted, then its worker is replaced
        {"set": {"a": 4}},  # on a fresh worker: sees neither a nor b, c still there
        {},
    ]
    try:
        instance = Instance(id="dc_keys", props={}, account="a", db=dict(start))
        results = pool.run_many(bundler.bundle(KEYS), instance, events, 10_000)
    finally:
        pool.close()
    assert [r.error for r in results] == [None] * 4
    assert [r.emits[0].event for r in results] == [
        {"a": 1, "b": 2, "c": "absent"},
        {"a": "absent", "b": 2, "c": 3},
        {"a": "absent", "b": "absent", "c": 3},
        {"a": 4, "b": "absent", "c": 3},
    ]
    assert [r.db_writes for r in results] == [{"a": None, "c": 3}, {"b": None}, {"a": 4}, {}]
    # What the runs saw is what the service stores after each of them.
    db = dict(start)
    for result, after in zip(results, [r.emits[0].event for r in results[1:]], strict=False):
        db = merge_db(db, result.db_writes)
        assert {k: db.get(k, "absent") for k in "abc"} == after
