"""The Scheduler port on AWS: EventBridge Scheduler schedules, and an SQS chain where they fall short.

Cron timers and whole-minute intervals become schedules in one schedule group whose target is
the timer function (`target_arn`; the task queue when there is none): each firing hands it a
TimerTick message whose `due_at` EventBridge fills in with
`<aws.scheduler.scheduled-time>`. A cron that ORs day-of-month and day-of-week needs two
schedules (`domain.aws_cron`), named `<source>-dom` and `<source>-dow`; the others are named
after the source.

EventBridge cannot fire more often than once a minute nor on a grid that is not whole minutes,
so those intervals run as a chain: each tick, when handled (`ticked`), queues the next with an
SQS `DelaySeconds`. A chain is identified by a random token kept in a DynamoDB item (pk =
source id, sk = "schedule") and carried by its ticks: replacing or removing the schedule
changes or deletes the token, and the old chain's ticks come back stale and stop there. The
item also keeps the `due_at` of the chain's newest tick, so a tick delivered or handled twice
(SQS and retries are at-least-once) does not start a second chain.

A chain whose tick is lost (dead-lettered after its retries, or dropped) would stop silently,
so the item is also in the sparse index gsi1 under `timer-chain#<shard>`, sorted by that
`due_at`: `repair`, run by the scheduled sweep (docs/aws.md, Sweep), finds the chains whose
newest tick is overdue by more than a margin and queues a new one. It advances `due_at` by a
conditional write first, so two sweeps (or a sweep and the late tick) never both extend a chain:
the late tick then comes as a repeat, runs and stops there.
"""

from __future__ import annotations

import json
import math
import secrets
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from headwater.domain.aws_cron import aws_schedules
from headwater.domain.commands import TimerTick, to_message
from headwater.domain.timers import Timer

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"  # EventBridge substitutes the firing's time (ISO 8601)
SUFFIXES = ("", "dom", "dow")  # every name a source's schedules can have
MAX_SQS_DELAY = 900  # seconds; a tick due later arrives early and the queue re-queues it until due_at
RETRY_POLICY = {"MaximumEventAgeInSeconds": 900, "MaximumRetryAttempts": 5}  # a tick is no use much later
CHAIN_SK = "schedule"
CHAIN_INDEX = "gsi1"
CHAIN_SHARDS = 8  # the index's partitions of chains (each a partition key of gsi1)


def schedule_name(source_id: str, suffix: str) -> str:
    return f"{source_id}-{suffix}" if suffix else source_id


class EventBridgeScheduler:
    """Clients are boto3's low-level `scheduler`, `sqs` and `dynamodb` clients, built by the
    composition root; `clock` is there so tests need no sleeps."""

    def __init__(
        self,
        scheduler_client: Any,
        sqs_client: Any,
        dynamodb_client: Any,
        *,
        group_name: str,
        queue_arn: str,
        queue_url: str,
        target_arn: str | None = None,
        role_arn: str,
        dead_letter_arn: str | None,
        table_name: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.scheduler = scheduler_client
        self.sqs = sqs_client
        self.dynamodb = dynamodb_client
        self.group_name = group_name
        self.queue_arn = queue_arn
        self.queue_url = queue_url
        self.target_arn = target_arn or queue_arn
        self.role_arn = role_arn
        self.dead_letter_arn = dead_letter_arn
        self.table_name = table_name
        self.clock = clock

    # the Scheduler port

    def set(self, source_id: str, timer: Timer) -> None:
        """Deletes whatever the source had, then creates its schedules, or starts a new chain
        (whose token makes the old chain's ticks stale)."""
        self._delete_schedules(source_id)
        schedules = aws_schedules(timer)
        if schedules is None:
            self._start_chain(source_id, timer)
            return
        self._delete_chain(source_id)
        now = self.clock()
        for schedule in schedules:
            request: dict[str, Any] = {
                "Name": schedule_name(source_id, schedule.suffix),
                "GroupName": self.group_name,
                "ScheduleExpression": schedule.expression,
                "ScheduleExpressionTimezone": schedule.timezone,
                "FlexibleTimeWindow": {"Mode": "OFF"},
                "Target": self._target(source_id),
            }
            if timer.cron is None:
                # A rate() schedule without StartDate fires at once; locally the first tick is
                # one interval after set, and re-saving a source must not fire it.
                request["StartDate"] = datetime.fromtimestamp(now + timer.interval_seconds, UTC)
            self.scheduler.create_schedule(**request)

    def remove(self, source_id: str) -> None:
        self._delete_schedules(source_id)
        self._delete_chain(source_id)

    def ticked(self, tick: TimerTick, timer: Timer) -> bool:
        """EventBridge ticks (no token) are always current. A chain tick is stale unless its token
        is the source's current one; a current one queues its successor, once per link."""
        if tick.token is None:
            return True
        item = self.dynamodb.get_item(
            TableName=self.table_name, Key=self._chain_key(tick.source_id), ConsistentRead=True
        ).get("Item")
        if item is None or item["token"]["S"] != tick.token:
            return False
        newest = float(item["due_at"]["N"])
        if tick.due_at < newest:
            return True  # a repeat of a link that already queued its successor: run it, do not fork
        now = self.clock()
        due_at = timer.next_after(tick.due_at, now)
        # Send first, then record: a crash in between re-sends on retry (the surplus tick is a
        # repeat when it comes); recording first would lose the chain on such a crash.
        self._send(TimerTick(tick.source_id, due_at, tick.token), due_at - now)
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=self._chain_key(tick.source_id),
                UpdateExpression="SET due_at = :next, gsi1sk = :next_sk",
                ConditionExpression="#token = :token AND due_at = :newest",
                ExpressionAttributeNames={"#token": "token"},
                ExpressionAttributeValues={
                    ":next": {"N": repr(due_at)},
                    ":next_sk": {"S": _due_key(due_at)},
                    ":token": {"S": tick.token},
                    ":newest": item["due_at"],
                },
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise
            # replaced, removed or advanced meanwhile: the message just sent is stale or a repeat
        return True

    def repair(self, margin_s: float = 120.0) -> int:
        """Queues a new tick for each chain whose newest tick is more than `margin_s` overdue (lost);
        how many it re-armed. A live chain's item is advanced by each tick, so it is never found."""
        now = self.clock()
        cutoff = _due_key(now - margin_s)
        repaired = 0
        for shard in range(CHAIN_SHARDS):
            pages = self.dynamodb.get_paginator("query").paginate(
                TableName=self.table_name, IndexName=CHAIN_INDEX,
                KeyConditionExpression="gsi1pk = :pk AND gsi1sk < :cutoff",
                ExpressionAttributeValues={":pk": {"S": f"timer-chain#{shard}"}, ":cutoff": {"S": cutoff}},
            )
            for page in pages:
                repaired += sum(self._rearm(item, now) for item in page.get("Items", []))
        return repaired

    def _rearm(self, item: dict[str, Any], now: float) -> bool:
        """Records the chain's next tick, if the item is still as the (eventually consistent) index
        showed it, then sends it; a crash in between leaves it overdue again for the next sweep."""
        source_id = item["pk"]["S"]
        due_at = Timer.from_interval(int(item["interval"]["N"])).next_after(float(item["due_at"]["N"]), now)
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=self._chain_key(source_id),
                UpdateExpression="SET due_at = :next, gsi1sk = :next_sk",
                ConditionExpression="#token = :token AND due_at = :overdue",
                ExpressionAttributeNames={"#token": "token"},
                ExpressionAttributeValues={
                    ":next": {"N": repr(due_at)},
                    ":next_sk": {"S": _due_key(due_at)},
                    ":token": item["token"],
                    ":overdue": item["due_at"],
                },
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise
            return False  # ticked, replaced, removed or re-armed meanwhile
        self._send(TimerTick(source_id, due_at, item["token"]["S"]), due_at - now)
        return True

    # schedules

    def _target(self, source_id: str) -> dict[str, Any]:
        # Built by hand around the wire form, so that due_at is the placeholder string
        message = {**to_message(TimerTick(source_id, 0.0)), "due_at": SCHEDULED_TIME}
        target: dict[str, Any] = {
            "Arn": self.target_arn,
            "RoleArn": self.role_arn,
            "Input": json.dumps(message),
            "RetryPolicy": dict(RETRY_POLICY),
        }
        if self.dead_letter_arn:
            target["DeadLetterConfig"] = {"Arn": self.dead_letter_arn}
        return target

    def _delete_schedules(self, source_id: str) -> None:
        for suffix in SUFFIXES:
            try:
                self.scheduler.delete_schedule(Name=schedule_name(source_id, suffix), GroupName=self.group_name)
            except ClientError as exc:
                if _code(exc) != "ResourceNotFoundException":
                    raise

    # the chain

    def _chain_key(self, source_id: str) -> dict[str, Any]:
        return {"pk": {"S": source_id}, "sk": {"S": CHAIN_SK}}

    def _start_chain(self, source_id: str, timer: Timer) -> None:
        token = secrets.token_urlsafe(16)
        due_at = self.clock() + timer.interval_seconds
        self.dynamodb.put_item(
            TableName=self.table_name,
            Item={
                **self._chain_key(source_id),
                "token": {"S": token},
                "interval": {"N": str(timer.interval_seconds)},
                "due_at": {"N": repr(due_at)},
                "gsi1pk": {"S": _chain_partition(source_id)},
                "gsi1sk": {"S": _due_key(due_at)},
            },
        )
        self._send(TimerTick(source_id, due_at, token), timer.interval_seconds)

    def _delete_chain(self, source_id: str) -> None:
        self.dynamodb.delete_item(TableName=self.table_name, Key=self._chain_key(source_id))

    def _send(self, tick: TimerTick, delay: float) -> None:
        self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=json.dumps(to_message(tick)),
            DelaySeconds=max(0, min(MAX_SQS_DELAY, math.ceil(delay))),
        )


def _chain_partition(source_id: str) -> str:
    return f"timer-chain#{zlib.crc32(source_id.encode()) % CHAIN_SHARDS}"


def _due_key(due_at: float) -> str:
    """A due time as gsi1's sort key: milliseconds, zero-padded so string order is time order."""
    return f"{max(0, int(due_at * 1000)):016d}"


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
