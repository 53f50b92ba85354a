"""Which queued work goes next (adapters/local/lanes.py), on a fake clock: a lane's batches go one at
a time and in order; work nobody waits on yields only while the service is saturated, and for a
bounded time; work somebody waits on never yields; a tenant holds at most its share of the workers,
its further lanes waiting while other tenants' go; a batch given back for later holds nothing."""

from __future__ import annotations

from headwater.adapters.local.lanes import SATURATED_LAG_S, Lanes
from headwater.domain.commands import DeliverWebhook, RunSource
from headwater.ports import Task


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run(task_id: str, source_id: str = "dc_a", namespace: str | None = None) -> Task:
    return Task(task_id, RunSource(source_id, {}, 1000, "http", namespace=namespace))


def delivery(task_id: str) -> Task:
    return Task(task_id, DeliverWebhook("del_" + task_id))


def ids(batch: list[Task]) -> list[str]:
    return [t.id for t in batch]


def saturate(lanes: Lanes) -> None:
    lanes.request_started()
    for _ in range(50):
        lanes.note_commit(8, 0.0)


def test_a_lanes_tasks_go_in_one_batch_and_the_lane_is_busy_until_done() -> None:
    lanes = Lanes(Clock())
    assert lanes.add(run("1"))
    assert not lanes.add(run("2"))  # already ready
    lane, batch = lanes.next() or ("", [])
    assert (lane, ids(batch)) == ("dc_a", ["1", "2"])
    assert not lanes.add(run("3"))  # busy: waits its turn
    assert lanes.next() is None
    assert lanes.done(lane, batch)
    assert ids((lanes.next() or ("", []))[1]) == ["3"]


def test_sources_are_separate_lanes_and_other_commands_one_lane_each() -> None:
    lanes = Lanes(Clock())
    for task in (run("1", "dc_a"), run("2", "dc_b"), delivery("3"), delivery("4")):
        lanes.add(task)
    taken = [lanes.next() for _ in range(4)]
    assert [ids(t[1]) for t in taken if t] == [["1"], ["2"], ["3"], ["4"]]


def test_a_batch_is_one_kind_of_command_and_bounded() -> None:
    lanes = Lanes(Clock(), max_batch=3)
    for i in range(5):
        lanes.add(run(str(i)))
    lane, batch = lanes.next() or ("", [])
    assert ids(batch) == ["0", "1", "2"]
    lanes.done(lane, batch)
    assert ids((lanes.next() or ("", []))[1]) == ["3", "4"]


def test_nothing_yields_while_the_service_has_room() -> None:
    clock = Clock()
    lanes = Lanes(clock, yield_s=10)
    lanes.request_started()  # requests come, but each is committed alone and answered at once
    for _ in range(50):
        lanes.note_commit(1, SATURATED_LAG_S / 10)
    lanes.add(delivery("1"))
    assert lanes.next() is not None


def test_a_busy_interpreter_is_saturation_too() -> None:
    """One client that sends its next request the moment it has its answer: no request ever waits
    for another, and yet the process has no room for its runs."""
    lanes = Lanes(Clock(), yield_s=10)
    lanes.request_started()
    for _ in range(50):
        lanes.note_commit(1, 0.0)
        lanes.note_cpu(0.97)
    assert lanes.saturated
    for _ in range(50):
        lanes.note_cpu(0.5)
    assert not lanes.saturated


def test_a_late_event_loop_is_saturation_too() -> None:
    lanes = Lanes(Clock(), yield_s=10)
    lanes.request_started()
    for _ in range(50):
        lanes.note_commit(1, SATURATED_LAG_S * 2)
    assert lanes.saturated


def test_background_work_yields_while_saturated_for_at_most_yield_s() -> None:
    clock = Clock()
    lanes = Lanes(clock, yield_s=10)
    saturate(lanes)
    lanes.add(delivery("1"))
    assert lanes.next() is None and lanes.has_parked
    clock.now += 5
    assert lanes.unpark() == 0
    clock.now += 5
    assert lanes.unpark() == 1
    assert lanes.next() is not None


def test_background_work_goes_once_requests_pause() -> None:
    clock = Clock()
    lanes = Lanes(clock, yield_s=10, quiet_s=0.002)
    saturate(lanes)
    lanes.add(delivery("1"))
    assert lanes.next() is None
    lanes.request_ended()
    clock.now += 0.003
    assert lanes.unpark() == 1


def test_a_run_somebody_waits_on_never_yields_and_takes_its_lane_along() -> None:
    clock = Clock()
    lanes = Lanes(clock, yield_s=10)
    saturate(lanes)
    lanes.add(run("1"))
    assert lanes.next() is None  # parked: nobody waits on it
    lanes.add(run("2"), urgent=True)
    lanes.unpark()
    assert ids((lanes.next() or ("", []))[1]) == ["1", "2"]  # in order, the waiting run with it


def test_a_claimed_batch_given_back_goes_first_again() -> None:
    lanes = Lanes(Clock())
    lanes.add(run("1"), urgent=True)
    batch = lanes.claim("dc_a")
    assert batch is not None and ids(batch) == ["1"]
    lanes.add(run("2"))
    assert lanes.claim("dc_a") is None  # busy
    lanes.give_back("dc_a", batch)
    assert ids((lanes.next() or ("", []))[1]) == ["1", "2"]


def test_a_lane_without_more_work_is_forgotten() -> None:
    lanes = Lanes(Clock())
    lanes.add(run("1"))
    lane, batch = lanes.next() or ("", [])
    assert not lanes.done(lane, batch)
    assert lanes.next() is None and not lanes.has_ready


def taken(lanes: Lanes) -> tuple[str, list[Task]]:
    found = lanes.next()
    assert found is not None
    return found


def test_a_tenant_holds_at_most_its_share_of_the_workers_and_other_tenants_go_first() -> None:
    lanes = Lanes(Clock(), tenant_share=2)
    for i in range(4):
        lanes.add(run(f"a{i}", f"dc_a{i}", "user_a"))
    lanes.add(run("b0", "dc_b0", "user_b"))
    first, second = taken(lanes), taken(lanes)
    assert [first[0], second[0]] == ["dc_a0", "dc_a1"]
    assert taken(lanes)[0] == "dc_b0"  # A's third lane waits: B's goes first
    assert lanes.next() is None
    assert lanes.add(run("b1", "dc_b1", "user_b"))
    assert taken(lanes)[0] == "dc_b1"
    assert lanes.release(first[1])  # one of A's workers is free: A's next lane is ready again
    assert taken(lanes)[0] == "dc_a2"
    assert lanes.next() is None


def test_a_worker_kept_after_its_batch_is_still_counted_until_released() -> None:
    """A batch that finished while its worker goes on with the lane's next one (or one sent off to
    the runner, its worker free): the tenant's count follows the workers, not the lanes."""
    lanes = Lanes(Clock(), tenant_share=1)
    lanes.add(run("1", "dc_a0", "user_a"))
    lanes.add(run("2", "dc_a1", "user_a"))
    lane, batch = taken(lanes)
    lanes.done(lane, batch)
    assert lanes.next() is None  # the worker has not said it is free yet
    assert lanes.release(batch)
    assert taken(lanes)[0] == "dc_a1"


def test_a_lane_held_back_for_its_tenant_keeps_its_order_and_takes_new_work_along() -> None:
    lanes = Lanes(Clock(), tenant_share=1)
    lanes.add(run("1", "dc_a0", "user_a"))
    lanes.add(run("2", "dc_a1", "user_a"))
    _, batch = taken(lanes)
    assert lanes.next() is None
    assert not lanes.add(run("3", "dc_a1", "user_a"))  # its lane is queued already
    assert lanes.claim("dc_a1") is None
    lanes.release(batch)
    assert ids(taken(lanes)[1]) == ["2", "3"]


def test_a_task_without_a_tenant_is_a_tenant_of_its_own_lane() -> None:
    """Commands queued by an older version carry no namespace: each lane is then its own tenant."""
    lanes = Lanes(Clock(), tenant_share=1)
    for i in range(3):
        lanes.add(run(str(i), f"dc_{i}"))
    lanes.add(delivery("d"))
    assert [taken(lanes)[0] for _ in range(4)] == ["dc_0", "dc_1", "dc_2", "task:d"]


def test_a_deferred_batch_waits_first_in_its_lane_holding_nothing_then_goes_again() -> None:
    clock = Clock()
    lanes = Lanes(clock, tenant_share=1)
    lanes.add(run("1", "dc_a0", "user_a"))
    lanes.add(run("2", "dc_a1", "user_a"))
    lane, batch = taken(lanes)
    lanes.defer(lane, batch, 1.0)
    lanes.release(batch)
    assert not lanes.add(run("3", "dc_a0", "user_a"))  # behind the deferred batch
    assert lanes.claim("dc_a0") is None
    assert lanes.next_wake() == 1.0
    other, other_batch = taken(lanes)  # the tenant's worker went to its other lane meanwhile
    assert other == "dc_a1"
    clock.now += 0.5
    assert lanes.unpark() == 0 and lanes.next_wake() == 0.5
    clock.now += 0.5
    assert lanes.unpark() == 1 and lanes.next_wake() is None
    assert lanes.next() is None  # ready, but its tenant's one worker is busy
    lanes.done(other, other_batch)
    lanes.release(other_batch)
    lane, batch = taken(lanes)
    assert (lane, ids(batch)) == ("dc_a0", ["1", "3"])
