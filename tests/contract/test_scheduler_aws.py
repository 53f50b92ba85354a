"""The Scheduler port over EventBridge Scheduler, SQS and DynamoDB, against moto.

moto holds delayed SQS messages back for real, so the messages the adapter sends are read from
its SendMessage calls (a botocore hook); the queue's delayed count shows they were accepted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from headwater.adapters.aws.dynamodb import create_tables
from headwater.adapters.aws.scheduler import EventBridgeScheduler
from headwater.domain import ids
from headwater.domain.commands import TimerTick, from_message
from headwater.domain.timers import Timer

REGION = "us-east-1"
GROUP = "headwater-timers"
TABLE = "headwater-resources"
ROLE_ARN = "arn:aws:iam::123456789012:role/headwater-scheduler"
DLQ_ARN = "arn:aws:sqs:us-east-1:123456789012:headwater-runs-dlq"
NOW = 1_736_942_400.0  # 2025-01-15T12:00:00Z


@dataclass
class Clock:
    now: float = NOW

    def __call__(self) -> float:
        return self.now


@dataclass
class Aws:
    scheduler: EventBridgeScheduler
    client: Any  # the boto3 scheduler client
    sqs: Any
    dynamodb: Any
    queue_url: str
    queue_arn: str
    clock: Clock
    sent: list[dict[str, Any]] = field(default_factory=list)  # SendMessage parameters, in order

    def schedules(self, source_id: str) -> dict[str, dict[str, Any]]:
        listed = self.client.list_schedules(GroupName=GROUP)["Schedules"]
        return {
            s["Name"]: self.client.get_schedule(Name=s["Name"], GroupName=GROUP)
            for s in listed
            if s["Name"].startswith(source_id)
        }

    def ticks(self) -> list[tuple[TimerTick, int]]:
        """The ticks sent so far with their DelaySeconds; forgets them."""
        sent, self.sent[:] = list(self.sent), []
        return [(tick(json.loads(p["MessageBody"])), p["DelaySeconds"]) for p in sent]

    def delayed(self) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["All"])["Attributes"]
        return int(attributes["ApproximateNumberOfMessagesDelayed"])

    def chain_item(self, source_id: str) -> dict[str, Any] | None:
        key = {"pk": {"S": source_id}, "sk": {"S": "schedule"}}
        return self.dynamodb.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")


def tick(message: dict[str, Any]) -> TimerTick:
    command = from_message(message)
    assert isinstance(command, TimerTick)
    return command


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    for name, value in {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("scheduler", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        client.create_schedule_group(Name=GROUP)
        queue_url = sqs.create_queue(QueueName="headwater-runs")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        create_tables(dynamodb, TABLE, "headwater-events")  # the resources table has gsi1, the chains' index
        clock = Clock()
        scheduler = EventBridgeScheduler(
            client, sqs, dynamodb, group_name=GROUP, queue_arn=queue_arn, queue_url=queue_url,
            role_arn=ROLE_ARN, dead_letter_arn=DLQ_ARN, table_name=TABLE, clock=clock,
        )  # fmt: skip
        world = Aws(scheduler, client, sqs, dynamodb, queue_url, queue_arn, clock)

        def record(params: dict[str, Any], **_: Any) -> None:
            world.sent.append(dict(params))

        sqs.meta.events.register("provide-client-params.sqs.SendMessage", record)
        yield world


# --- EventBridge schedules ---------------------------------------------------------------------


def test_cron_timer_becomes_one_schedule_whose_input_is_a_timer_tick(aws: Aws) -> None:
    source_id = ids.new_id("source")
    aws.scheduler.set(source_id, Timer.from_cron("0 9 * * 1-5", "Europe/Paris"))

    schedules = aws.schedules(source_id)
    assert list(schedules) == [source_id]
    schedule = schedules[source_id]
    assert schedule["ScheduleExpression"] == "cron(0 9 ? * MON-FRI *)"
    assert schedule["ScheduleExpressionTimezone"] == "Europe/Paris"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = schedule["Target"]
    assert target["Arn"] == aws.queue_arn and target["RoleArn"] == ROLE_ARN
    assert target["DeadLetterConfig"] == {"Arn": DLQ_ARN}
    assert "<aws.scheduler.scheduled-time>" in target["Input"]
    # what EventBridge delivers: the placeholder filled in with the firing's time
    delivered = target["Input"].replace("<aws.scheduler.scheduled-time>", "2025-01-15T08:00:00Z")
    assert tick(json.loads(delivered)) == TimerTick(
        source_id, datetime.fromisoformat("2025-01-15T08:00:00+00:00").timestamp(), None
    )
    assert aws.sent == [] and aws.chain_item(source_id) is None
    assert aws.scheduler.ticked(TimerTick(source_id, NOW), Timer.from_cron("0 9 * * 1-5", "Europe/Paris"))


def test_cron_restricting_both_day_fields_becomes_two_schedules(aws: Aws) -> None:
    source_id = ids.new_id("source")
    aws.scheduler.set(source_id, Timer.from_cron("0 0 13 * 5"))
    schedules = aws.schedules(source_id)
    assert {name: s["ScheduleExpression"] for name, s in schedules.items()} == {
        f"{source_id}-dom": "cron(0 0 13 * ? *)",
        f"{source_id}-dow": "cron(0 0 ? * FRI *)",
    }
    inputs = {
        tick(json.loads(s["Target"]["Input"].replace("<aws.scheduler.scheduled-time>", "2025-06-13T00:00:00Z")))
        for s in schedules.values()
    }
    assert len(inputs) == 1  # Friday the 13th: the same tick twice, one identity


def test_whole_minute_interval_is_a_rate_starting_one_interval_later(aws: Aws) -> None:
    source_id = ids.new_id("source")
    aws.scheduler.set(source_id, Timer.from_interval(300))
    schedule = aws.schedules(source_id)[source_id]
    assert schedule["ScheduleExpression"] == "rate(5 minutes)"
    assert schedule["StartDate"].timestamp() == NOW + 300
    assert aws.sent == []


def test_set_again_replaces_with_no_leftovers(aws: Aws) -> None:
    source_id, other = ids.new_id("source"), ids.new_id("source")
    aws.scheduler.set(other, Timer.from_cron("0 0 13 * 5"))
    aws.scheduler.set(source_id, Timer.from_cron("0 0 13 * 5"))
    aws.scheduler.set(source_id, Timer.from_cron("*/15 * * * *"))
    assert {n: s["ScheduleExpression"] for n, s in aws.schedules(source_id).items()} == {
        source_id: "cron(0/15 * * * ? *)"
    }
    aws.scheduler.set(source_id, Timer.from_interval(7200))
    assert {n: s["ScheduleExpression"] for n, s in aws.schedules(source_id).items()} == {source_id: "rate(2 hours)"}
    aws.scheduler.set(source_id, Timer.from_interval(5))  # to a chain: no schedule at all
    assert aws.schedules(source_id) == {}
    aws.scheduler.set(source_id, Timer.from_cron("0 0 13 * 5"))  # and back: the chain is gone
    assert set(aws.schedules(source_id)) == {f"{source_id}-dom", f"{source_id}-dow"}
    assert aws.chain_item(source_id) is None
    assert set(aws.schedules(other)) == {f"{other}-dom", f"{other}-dow"}  # the other source is untouched


def test_remove_deletes_everything_and_is_idempotent(aws: Aws) -> None:
    source_id, chained = ids.new_id("source"), ids.new_id("source")
    aws.scheduler.set(source_id, Timer.from_cron("0 0 13 * 5"))
    aws.scheduler.set(chained, Timer.from_interval(5))
    for _ in range(2):
        aws.scheduler.remove(source_id)
        aws.scheduler.remove(chained)
    aws.scheduler.remove(ids.new_id("source"))  # never set
    assert aws.client.list_schedules(GroupName=GROUP)["Schedules"] == []
    assert aws.chain_item(chained) is None


# --- the SQS chain -----------------------------------------------------------------------------


def test_short_interval_starts_a_chain_with_a_token(aws: Aws) -> None:
    source_id = ids.new_id("source")
    aws.scheduler.set(source_id, Timer.from_interval(5))
    assert aws.schedules(source_id) == {}
    [(first, delay)] = aws.ticks()
    assert delay == 5
    assert first.source_id == source_id and first.due_at == NOW + 5 and first.token
    assert aws.delayed() == 1
    item = aws.chain_item(source_id)
    assert item is not None and item["token"] == {"S": first.token} and item["interval"] == {"N": "5"}


def test_ticked_renews_a_current_chain_and_refuses_a_stale_one(aws: Aws) -> None:
    source_id = ids.new_id("source")
    timer = Timer.from_interval(5)
    aws.scheduler.set(source_id, timer)
    [(first, _)] = aws.ticks()

    aws.clock.now = first.due_at + 0.4  # handled a little late: the next stays on the grid
    assert aws.scheduler.ticked(first, timer) is True
    [(second, delay)] = aws.ticks()
    assert second == TimerTick(source_id, first.due_at + 5, first.token)
    assert delay == 5  # ceil(4.6)
    assert aws.delayed() == 2

    assert aws.scheduler.ticked(TimerTick(source_id, second.due_at, "not-the-token"), timer) is False
    assert aws.ticks() == []

    aws.scheduler.remove(source_id)
    aws.clock.now = second.due_at
    assert aws.scheduler.ticked(second, timer) is False
    assert aws.ticks() == []


def test_a_repeated_tick_runs_but_does_not_fork_the_chain(aws: Aws) -> None:
    source_id = ids.new_id("source")
    timer = Timer.from_interval(10)
    aws.scheduler.set(source_id, timer)
    [(first, _)] = aws.ticks()
    aws.clock.now = first.due_at
    assert aws.scheduler.ticked(first, timer) is True
    assert len(aws.ticks()) == 1
    assert aws.scheduler.ticked(first, timer) is True  # SQS redelivery, or a retried handler
    assert aws.ticks() == []


def test_missed_ticks_are_skipped_on_the_grid(aws: Aws) -> None:
    source_id = ids.new_id("source")
    timer = Timer.from_interval(30)
    aws.scheduler.set(source_id, timer)
    [(first, _)] = aws.ticks()
    aws.clock.now = first.due_at + 95  # three ticks' worth late
    assert aws.scheduler.ticked(first, timer) is True
    [(second, delay)] = aws.ticks()
    assert second.due_at == first.due_at + 120 and delay == 25


def test_replacing_a_chain_makes_the_old_one_stale(aws: Aws) -> None:
    source_id = ids.new_id("source")
    aws.scheduler.set(source_id, Timer.from_interval(5))
    [(old, _)] = aws.ticks()
    aws.scheduler.set(source_id, Timer.from_interval(7))
    [(new, delay)] = aws.ticks()
    assert new.token != old.token and delay == 7
    assert aws.scheduler.ticked(old, Timer.from_interval(7)) is False
    aws.scheduler.set(source_id, Timer.from_cron("* * * * *"))  # a chain no more
    assert aws.scheduler.ticked(new, Timer.from_interval(7)) is False
    assert aws.ticks() == []


def test_an_odd_interval_beyond_the_sqs_delay_waits_at_most_900_seconds(aws: Aws) -> None:
    source_id = ids.new_id("source")
    timer = Timer.from_interval(1000)  # not whole minutes, so no rate()
    aws.scheduler.set(source_id, timer)
    assert aws.schedules(source_id) == {}
    [(first, delay)] = aws.ticks()
    assert delay == 900 and first.due_at == NOW + 1000  # the queue re-queues it until due_at
    aws.clock.now = first.due_at + 1
    assert aws.scheduler.ticked(first, timer) is True
    [(second, delay)] = aws.ticks()
    assert second.due_at == first.due_at + 1000 and delay == 900


# --- the sweep re-arms a chain that lost its tick (docs/aws.md, Sweep) ---------------------------


def test_a_chain_whose_tick_was_lost_is_rearmed_once_by_the_sweep(aws: Aws) -> None:
    source_id = ids.new_id("source")
    timer = Timer.from_interval(5)
    aws.scheduler.set(source_id, timer)
    [(first, _)] = aws.ticks()
    aws.clock.now = first.due_at
    assert aws.scheduler.ticked(first, timer) is True
    [(lost, _)] = aws.ticks()
    aws.sqs.purge_queue(QueueUrl=aws.queue_url)  # the tick in flight is gone (dead-lettered, say)
    assert aws.delayed() == 0

    aws.clock.now = lost.due_at + 119  # within the margin: a late tick may still come
    assert aws.scheduler.repair(margin_s=120) == 0
    aws.clock.now = lost.due_at + 123
    assert aws.scheduler.repair(margin_s=120) == 1
    [(rearmed, delay)] = aws.ticks()
    assert rearmed == TimerTick(source_id, lost.due_at + 125, first.token)  # on the chain's grid
    assert delay == 2 and aws.delayed() == 1
    assert aws.scheduler.repair(margin_s=120) == 0  # the next sweep: the chain is live again
    assert aws.ticks() == []

    aws.clock.now = rearmed.due_at
    assert aws.scheduler.ticked(rearmed, timer) is True  # the chain goes on from the new tick
    [(after, _)] = aws.ticks()
    assert after.due_at == rearmed.due_at + 5
    assert aws.scheduler.ticked(lost, timer) is True  # the lost tick, redriven late: runs, does not fork
    assert aws.ticks() == []


def test_the_sweep_leaves_live_and_removed_chains_alone(aws: Aws) -> None:
    live, removed = ids.new_id("source"), ids.new_id("source")
    timer = Timer.from_interval(7)
    aws.scheduler.set(live, timer)
    aws.scheduler.set(removed, timer)
    aws.scheduler.set(ids.new_id("source"), Timer.from_cron("* * * * *"))  # an EventBridge schedule, no chain
    aws.scheduler.remove(removed)
    for _ in range(40):  # five minutes of a chain ticking on time
        [(tick_, _)] = [t for t in aws.ticks() if t[0].source_id == live]
        aws.clock.now = tick_.due_at
        assert aws.scheduler.ticked(tick_, timer) is True
        assert aws.scheduler.repair(margin_s=120) == 0
    assert aws.chain_item(removed) is None


def test_two_sweeps_seeing_one_overdue_chain_rearm_it_once(aws: Aws) -> None:
    source_id = ids.new_id("source")
    aws.scheduler.set(source_id, Timer.from_interval(3))
    aws.ticks()
    item = aws.chain_item(source_id)
    assert item is not None
    aws.clock.now += 300
    assert aws.scheduler._rearm(item, aws.clock.now) is True
    assert aws.scheduler._rearm(item, aws.clock.now) is False  # what it read is no longer the item
    assert len(aws.ticks()) == 1
