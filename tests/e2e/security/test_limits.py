"""Threat 3: memory and work past a run's limits (nested workers, Buffers, leftovers)."""

from __future__ import annotations

from tests.conftest import Server
from tests.e2e.security.conftest import Account, assert_healthy


def test_a_nested_worker_with_its_own_heap_is_refused(guarded: Server) -> None:
    source = Account(guarded).deploy("worker_heap.mjs")
    source.send({})
    error = source.first_error()
    assert error["code"] == "RUNTIME_ERROR", error
    assert "worker threads are not available" in error["message"]
    assert source.events() == []
    assert_healthy(guarded)


def test_buffers_past_the_cap_end_out_of_memory(guarded: Server) -> None:
    """24 x 64 MB of Buffers (outside V8's heap) in a runner capped at 512 MB (the kernel's cgroup
    limit): the run ends OUT_OF_MEMORY and nothing was held past the cap."""
    source = Account(guarded).deploy("buffers.mjs")
    source.send({})
    error = source.first_error()
    assert error["code"] == "OUT_OF_MEMORY", error
    assert source.events() == []  # the loop never finished holding 1.5 GB
    assert_healthy(guarded)


def test_work_left_running_after_the_run_is_stopped(guarded: Server) -> None:
    source = Account(guarded).deploy("lingering_interval.mjs")
    assert source.run({}) == {"started": True}
    report = source.run({"report": True})  # waits 200 ms inside: 10 ticks had the interval lived
    assert report == {"report": True, "ticks": 0, "stored": None}, report
    assert all("tick" not in event for event in source.events())
    assert source.events("$errors") == []
    assert_healthy(guarded)
