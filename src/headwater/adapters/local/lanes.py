"""Which queued work goes next: pure bookkeeping, no threads and no clock of its own.

A lane (a source, or a task alone) runs one batch at a time, in commit order, so a source's runs
never overlap and never reorder. Answers come first: while the service is saturated with requests,
work nobody waits on (runs whose request was answered, fan-out, deliveries) is parked, for at most
`yield_s` from when its lane got work; a lane holding a task somebody waits on (customResponse)
never yields. When the service has room, nothing waits: deliveries go out as their events commit.

No tenant holds the workers: a tenant (the namespace a task's command names; a task with none is
a tenant of its own lane) holds at most `tenant_share` workers at once, counted from `next` to
`release`; its further ready lanes are held back, as queued lanes holding no thread, while other
tenants' lanes go, and one goes again each time one of its workers is released. A batch whose
handler must wait on another caller's work is deferred: first in its lane again, the lane idle
for a moment (its worker released meanwhile), so nothing waits holding a thread.
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
                 max_batch: int = MAX_RUN_BATCH, tenant_share: int | None = None) -> None:
        """`tenant_share`: the workers one tenant may hold at once (None: as many as there are)."""
        self.clock = clock
        self.yield_s = yield_s
        self.quiet_s = quiet_s
        self.max_batch = max_batch
        self.tenant_share = tenant_share
        self._queued: dict[str, deque[Task]] = {}
        self._since: dict[str, float] = {}  # when each lane got its oldest waiting work
        self._urgent: set[str] = set()  # ids of queued tasks somebody waits on
        self._ready: deque[str] = deque()
        self._parked: dict[str, None] = {}  # yielding lanes, an ordered set
        self._busy: set[str] = set()
        self._holding: dict[str, int] = {}  # workers each tenant holds
        self._held_back: dict[str, dict[str, None]] = {}  # ready lanes of tenants at their share, ordered sets
        self._held_back_lanes: set[str] = set()
        self._deferred: dict[str, float] = {}  # lanes whose batch was deferred, until when
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
        if lane in self._busy or lane in self._ready or lane in self._parked or lane in self._held_back_lanes \
                or lane in self._deferred:
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
        """The next ready lane that does not yield and whose tenant is within its share, with its
        batch, for a worker (its tenant holds one more until `release`); yielding lanes are
        parked, those of a tenant at its share held back."""
        while self._ready:
            lane = self._ready.popleft()
            if self._yields(lane):
                self._parked[lane] = None
                continue
            tenant = tenant_of(self._queued[lane][0])
            if self.tenant_share is not None and self._holding.get(tenant, 0) >= self.tenant_share:
                self._held_back.setdefault(tenant, {})[lane] = None
                self._held_back_lanes.add(lane)
                continue
            self._holding[tenant] = self._holding.get(tenant, 0) + 1
            return lane, self._take(lane)
        return None

    def release(self, batch: list[Task]) -> bool:
        """The worker that took `batch` from `next` is free again (the batch done, deferred, or
        sent off to finish elsewhere); True when a lane of its tenant held back is ready again."""
        tenant = tenant_of(batch[0])
        held = self._holding.get(tenant, 0) - 1
        if held > 0:
            self._holding[tenant] = held
        else:
            self._holding.pop(tenant, None)
        waiting = self._held_back.get(tenant)
        if not waiting:
            return False
        lane = next(iter(waiting))
        del waiting[lane]
        if not waiting:
            del self._held_back[tenant]
        self._held_back_lanes.discard(lane)
        self._ready.appendleft(lane)  # it was ready before the lanes that came since
        return True

    def defer(self, lane: str, batch: list[Task], after_s: float) -> None:
        """A batch its handler could not run yet (it waits on another caller's work): first in its
        lane again, the lane idle for `after_s`; `unpark` makes it ready after that."""
        self._busy.discard(lane)
        self._queued.setdefault(lane, deque()).extendleft(reversed(batch))
        self._since.setdefault(lane, self.clock())
        self._deferred[lane] = self.clock() + after_s

    def next_wake(self) -> float | None:
        """Seconds until the soonest deferred lane may go again (None: no lane is deferred)."""
        if not self._deferred:
            return None
        return max(0.0, min(self._deferred.values()) - self.clock())

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
        """Parked lanes that need not yield any more, and deferred lanes whose time came, go back
        to the ready ones; how many did."""
        free = [lane for lane in self._parked if not self._yields(lane)]
        for lane in free:
            del self._parked[lane]
            self._ready.append(lane)
        now = self.clock()
        due = [lane for lane, until in self._deferred.items() if until <= now]
        for lane in due:
            del self._deferred[lane]
            self._ready.append(lane)
        return len(free) + len(due)

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


def tenant_of(task: Task) -> str:
    """The namespace the task's work is for; a task that names none is a tenant of its own lane."""
    return task.command.tenant or f"lane:{lane_of(task)}"
