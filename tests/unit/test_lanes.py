"""Which queued work goes next (adapters/local/lanes.py), on a fake clock: a lane's batches go one at
a time and in order; work nobody waits on yields only while the service is saturated, and for a
bounded time; work somebody waits on never yields."""

from __future__ import annotations

from headwater.adapters.local.lanes import SATURATED_LAG_S, Lanes
from headwater.domain.commands import DeliverWebhook, RunSource
from headwater.ports import Task


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run(task_id: str, source_id: str = "dc_a") -> Task:
    return Task(task_id, RunSource(source_id, {}, 1000, "http"))


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
