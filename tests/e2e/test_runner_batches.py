"""Several events of one instance in one runner call: in order, each seeing the db the ones before
it wrote, each answer and result under its own index, one failing run failing only itself."""

from __future__ import annotations

from pathlib import Path

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.ports import Instance
from headwater.settings import Settings

COUNTER = """export default {
  name: "Counter", version: "1.0.0",
  props: { http: { type: "$.interface.http", customResponse: true }, db: "$.service.db" },
  async run(event) {
    if (event.fail) throw new Error(`no ${event.n}`);
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    this.http.respond({ status: 200, body: { n: event.n, count } });
    this.$emit({ n: event.n, count });
  },
};"""


def test_a_batch_runs_in_order_on_the_db_its_predecessors_left(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, runner_processes=1)
    bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
    answers: list[tuple[int, dict]] = []
    try:
        instance = Instance(id="dc_counter", props={}, account="a", db={"count": 10})
        events = [{"n": 0}, {"n": 1, "fail": True}, {"n": 2}, {"n": 3}]
        results = pool.run_many(bundler.bundle(COUNTER), instance, events, 10_000,
                                lambda index, response: answers.append((index, response)))
    finally:
        pool.close()
    assert [r.emits[0].event if r.emits else None for r in results] == [
        {"n": 0, "count": 11}, None, {"n": 2, "count": 12}, {"n": 3, "count": 13}]
    assert results[1].error is not None and "no 1" in results[1].error["message"]
    assert [r.db_writes for r in results] == [{"count": 11}, {}, {"count": 12}, {"count": 13}]
    assert [(i, r["body"]) for i, r in answers] == [
        (0, '{"n":0,"count":11}'), (2, '{"n":2,"count":12}'), (3, '{"n":3,"count":13}')]


STUBBORN = """export default {
  name: "Stubborn", version: "1.0.0",
  props: { db: "$.service.db" },
  async run(event) {
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    if (event.hang) while (true) {}
    if (event.leave) setInterval(() => {}, 1000);
    this.$emit({ n: event.n, count });
  },
};"""


def test_a_run_that_times_out_or_leaves_work_behind_ends_its_worker_and_the_rest_still_run(tmp_path: Path) -> None:
    """The worker runs a batch back to back; when one run has to end it (a timeout, a timer left
    running), the runs after it go to a fresh worker, on the db the ones before them left."""
    settings = Settings(data_dir=tmp_path, runner_processes=1)
    bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
    try:
        instance = Instance(id="dc_stubborn", props={}, account="a", db={})
        events = [{"n": 0}, {"n": 1, "hang": True}, {"n": 2}, {"n": 3, "leave": True}, {"n": 4}]
        # The timeout is each run's, a fresh worker's cold start included: 3 s, so that the runs that
        # do end are not timed out on a busy machine, and only the hanging one is.
        results = pool.run_many(bundler.bundle(STUBBORN), instance, events, 3000)
    finally:
        pool.close()
    assert [r.error["code"] if r.error else None for r in results] == [None, "TIMEOUT", None, None, None]
    assert [r.emits[0].event["n"] if r.emits else None for r in results] == [0, None, 2, 3, 4]
    # A timed-out run's writes reached the db it had been given (as they do for one run at a time).
    assert [r.emits[0].event["count"] for r in results if r.emits] == [1, 3, 4, 5]
    # Durations are the service's own measure (a fresh worker's start included): only bounds
    # a busy machine cannot break are asserted.
    assert results[1].duration_ms >= 2500
    assert all(r.duration_ms > 0 for r in results)
