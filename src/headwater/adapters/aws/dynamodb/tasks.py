"""What the store keeps of background work: the outbox, and marks of tasks done out of band.

A command added to a unit of work is an outbox item in its transaction, so it exists exactly
when the change that made it committed. After the commit the store hands the commands to the
task queue, which deletes the items once SQS has them (`outbox_done`); an item still there a
while later was left by a crash between commit and send, and `pending` finds it to send again.
Outbox items are spread over 16 partitions (`pk = outbox#00..15`) so that busy writers do not
share one; their sort key starts with the creation time, so "older than" is a key condition.
An item holds a command without the event bodies it carries (a FanOut keeps its event ids): the
bodies are stored once, in the events table, and the message sent after the commit carries them
(the command as it was added); only a command recovered from the outbox reads them back by id.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from headwater.adapters.aws.dynamodb.codec import Item, body, key, load, n, real, s, text, text_body
from headwater.adapters.aws.dynamodb.tables import Query, Tables
from headwater.adapters.aws.dynamodb.writes import put
from headwater.domain.commands import Command, FanOut, RunSource, from_message, message_text, to_message
from headwater.ports import Task

if TYPE_CHECKING:
    from headwater.adapters.aws.dynamodb.uow import DynamoUnitOfWork

SHARDS = 16
DONE_TTL_S = 24 * 3600


def _shard_of(task_id: str) -> str:
    return f"outbox#{task_id.split('-')[1]}"


def _task_id(at_s: float) -> str:
    """A new outbox item's id: `at_s` in ms (what `pending` compares), a shard, a random part."""
    return f"{int(at_s * 1000):016d}-{secrets.randbelow(SHARDS):02d}-{secrets.token_hex(8)}"


def _item(task_id: str, command: Command, not_before: float) -> Item:
    """A run's item keeps its HTTP request's `body` out (`message_text`: `from_message` makes it
    again from `bodyRaw`), so the request's bytes count once in the item's write units."""
    stored = _stored(command)
    data = text_body(message_text(stored), "command") if isinstance(stored, RunSource) \
        else body(to_message(stored), "command")
    return {"pk": s(_shard_of(task_id)), "sk": s(task_id), "not_before": n(not_before), **data}


class DynamoOutbox:
    def __init__(self, uow: DynamoUnitOfWork, clock: Callable[[], float] = time.time) -> None:
        self.uow = uow
        self.clock = clock

    def add(self, command: Command, delay_s: float = 0.0) -> None:
        now = self.clock()
        not_before = now + delay_s if delay_s > 0 else 0.0
        task_id = _task_id(now)
        self.uow.write(put(self.uow.tables.resources, _item(task_id, command, not_before)))
        self.uow.add_task(Task(task_id, command, 0, not_before))


def _stored(command: Command) -> Command:
    """What the outbox keeps of a command: a FanOut by its event ids (the events table has them)."""
    if isinstance(command, FanOut) and command.events:
        return replace(command, events=())
    return command


class OutboxTable:
    def __init__(self, tables: Tables, clock: Callable[[], float] = time.time) -> None:
        self.tables = tables
        self.clock = clock

    def keep(self, command: Command, due_at: float) -> Task:
        """An item put on its own, outside any unit of work (one write unit): a task that is to
        run at `due_at` unless its item is deleted (`done`) before. Its id carries `due_at`, not
        the time it was put, so `pending` finds it only once it is due (plus its margin), and
        then it is sent to run at once."""
        task_id = _task_id(due_at)
        self.tables.client.put_item(TableName=self.tables.resources, Item=_item(task_id, command, 0.0))
        return Task(task_id, command)

    def done(self, task_ids: list[str]) -> None:
        self.tables.delete_keys(self.tables.resources, [(_shard_of(i), i) for i in task_ids])

    def pending(self, older_than_s: float) -> list[Task]:
        cutoff = f"{int((self.clock() - older_than_s) * 1000):016d}"
        tasks: list[Task] = []
        for shard in range(SHARDS):
            q = Query(self.tables.resources, "pk = :pk AND sk < :cutoff",
                      {":pk": s(f"outbox#{shard:02d}"), ":cutoff": s(cutoff)})
            for item in self.tables.iterate(q):
                tasks.append(Task(text(item, "sk"), from_message(load(item)), 0, real(item, "not_before")))
        return sorted(tasks, key=lambda t: t.id)


class DoneMarks:
    """Tasks finished without their queue message (a run done inline for its HTTP response): the
    message's later delivery finds the mark and is dropped unrun. Marks expire after a day."""

    def __init__(self, tables: Tables, clock: Callable[[], float] = time.time) -> None:
        self.tables = tables
        self.clock = clock

    def mark(self, task_ids: list[str]) -> None:
        expires_at = n(int(self.clock() + DONE_TTL_S))
        self.tables.write_batch(self.tables.resources, [
            {"PutRequest": {"Item": {**key(f"task#{i}", "#done"), "expires_at": expires_at}}} for i in task_ids
        ])

    def marked(self, task_ids: list[str]) -> set[str]:
        if not task_ids:
            return set()
        items = self.tables.get_many(self.tables.resources, [(f"task#{i}", "#done") for i in task_ids])
        return {text(item, "pk").removeprefix("task#") for item in items}

