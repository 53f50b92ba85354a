"""Which queued work goes next: pure bookkeeping, no threads and no clock of its own.

A lane (a source, or a task alone) runs one batch at a time, in commit order, so a source's runs
never overlap and never reorder. Answers come first: while the service is saturated with requests,
work nobody waits on (runs whose request was answered, fan-out, deliveries) is parked, for at most
`yield_s` from when its lane got work; a lane holding a task somebody waits on (customResponse)
never yields. When the service has room, nothing waits: deliveries go out as their events commit.
The task queue calls these methods under its own lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from headwater.ports import Task

MAX_RUN_BATCH = 64
SATURATED_GROUP = 1.5  # requests committed together on average: they queue up for the writer
SATURATED_LAG_S = 0.002  # the event loop this late in running a callback: requests queue up for it
SATURATED_CPU = 0.7  # of a core, the interpreter's (one at a time): one client can keep it busy alone
_WEIGHT = 0.1  # of each new sample in a running average


class Lanes:
    def __init__(self, clock: Callable[[], float], yield_s: float = 0.0, quiet_s: float = 0.002,
                 max_batch: int = MAX_RUN_BATCH) -> None:
        self.clock = clock
        self.yield_s = yield_s
        self.quiet_s = quiet_s
        self.max_batch = max_batch
        self._queued: dict[str, deque[Task]] = {}
        self._since: dict[str, float] = {}  # when each lane got its oldest waiting work
        self._urgent: set[str] = set()  # ids of queued tasks somebody waits on
        self._ready: deque[str] = deque()
        self._parked: dict[str, None] = {}  # yielding lanes, an ordered set
        self._busy: set[str] = set()
        self._requests = 0  # requests waiting for their commit
        self._last_request = float("-inf")
        self._lag = 0.0  # running average of the event loop's lag
        self._group = 1.0  # running average of the requests in a group commit
        self._cpu = 0.0  # running average of the process's CPU, in cores

    # what the service is doing

    def request_started(self) -> None:
        self._requests += 1
        self._last_request = self.clock()

    def request_ended(self) -> None:
        self._requests -= 1
        self._last_request = self.clock()

    def note_commit(self, requests: int, lag_s: float) -> None:
        """A group commit of `requests`, heard of by their event loop `lag_s` after: the service's
        load, measured where it shows. With room, each request is committed alone and its loop
        answers at once; saturated, requests pile up for the writer or for the loop."""
        self._group += _WEIGHT * (requests - self._group)
        self._lag += _WEIGHT * (lag_s - self._lag)

    def note_cpu(self, cores: float) -> None:
        """The process's CPU over the last moment, in cores: a client that sends its next request
        the moment it has its answer keeps the interpreter busy alone, with no request waiting."""
        self._cpu += 3 * _WEIGHT * (cores - self._cpu)

    @property
    def saturated(self) -> bool:
        busy = self._requests > 0 or self.clock() - self._last_request < self.quiet_s
        return busy and (self._group >= SATURATED_GROUP or self._lag >= SATURATED_LAG_S
                         or self._cpu >= SATURATED_CPU)

    # work in and out

    def add(self, task: Task, urgent: bool = False) -> bool:
        """Queues a committed task on its lane; True when that lane became ready for a worker."""
        lane = lane_of(task)
        if lane not in self._queued:
            self._queued[lane] = deque()
            self._since[lane] = self.clock()
        self._queued[lane].append(task)
        if urgent:
            self._urgent.add(task.id)
            self._parked.pop(lane, None)  # its caller waits: no more yielding
        if lane in self._busy or lane in self._ready or lane in self._parked:
            return False
        self._ready.append(lane)
        return True

    def claim(self, lane: str) -> list[Task] | None:
        """The lane's next batch for a caller that runs it now (the event loop, a finishing run),
        when the lane is idle and ready; the lane is busy until `done`."""
        if lane not in self._ready or lane in self._busy:
            return None
        self._ready.remove(lane)
        return self._take(lane)

    def next(self) -> tuple[str, list[Task]] | None:
        """The next ready lane that does not yield, with its batch; yielding lanes are parked."""
        while self._ready:
            lane = self._ready.popleft()
            if self._yields(lane):
                self._parked[lane] = None
                continue
            return lane, self._take(lane)
        return None

    def give_back(self, lane: str, batch: list[Task]) -> None:
        """A claimed batch its caller could not run after all: first in its lane again, ready."""
        self._busy.discard(lane)
        self._queued.setdefault(lane, deque()).extendleft(reversed(batch))
        self._since.setdefault(lane, self.clock())
        self._ready.appendleft(lane)

    def done(self, lane: str, batch: list[Task]) -> bool:
        """The lane's batch is over; True when it has more work, ready again."""
        self._busy.discard(lane)
        for task in batch:
            self._urgent.discard(task.id)
        if self._queued.get(lane):
            self._ready.append(lane)
            return True
        self._queued.pop(lane, None)
        self._since.pop(lane, None)
        return False

    def unpark(self) -> int:
        """Parked lanes that need not yield any more go back to the ready ones; how many did."""
        free = [lane for lane in self._parked if not self._yields(lane)]
        for lane in free:
            del self._parked[lane]
            self._ready.append(lane)
        return len(free)

    @property
    def has_parked(self) -> bool:
        return bool(self._parked)

    @property
    def has_ready(self) -> bool:
        return bool(self._ready)

    def _take(self, lane: str) -> list[Task]:
        self._busy.add(lane)
        queued = self._queued[lane]
        batch = [queued.popleft()]
        while queued and queued[0].command.name == batch[0].command.name and len(batch) < self.max_batch:
            batch.append(queued.popleft())
        return batch

    def _yields(self, lane: str) -> bool:
        if self.yield_s <= 0 or not self.saturated:
            return False
        if self.clock() - self._since.get(lane, self.clock()) >= self.yield_s:
            return False
        return not any(task.id in self._urgent for task in self._queued.get(lane, ()))


def lane_of(task: Task) -> str:
    return task.command.lane or f"task:{task.id}"
