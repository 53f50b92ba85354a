"""What AWS does between the functions and moto never does: SQS event source mappings (receive a
batch, invoke the consumer, delete what it did not report failed) and EventBridge Scheduler
(fire each schedule of the group at its times, handing its input to its target)."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from headwater.emulated.functions import Functions

log = logging.getLogger("headwater.emulated.pollers")

_RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}


class SqsPoller:
    """One event source mapping: `concurrency` pollers of the queue, each invoking the function
    with up to `batch` records (Lambda scales consumers out the same way)."""

    def __init__(self, sqs: Any, functions: Functions, function: str, queue_url: str, queue_arn: str, batch: int,
                 concurrency: int = 2) -> None:
        self.sqs, self.functions, self.function = sqs, functions, function
        self.queue_url, self.queue_arn, self.batch = queue_url, queue_arn, batch
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._loop, name=f"esm-{function}-{i}", daemon=True)
                        for i in range(concurrency)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self.poll(wait_s=1)
            except Exception:  # noqa: BLE001 - a poller outlives any one batch, as Lambda's does
                log.exception("event source mapping of %s", self.function)
                self.stopping.wait(1)

    def poll(self, wait_s: int) -> int:
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=min(10, self.batch), WaitTimeSeconds=wait_s,
            MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
        if not messages:
            return 0
        event = {"Records": [self._record(m) for m in messages]}
        try:
            result = self.functions.invoke(self.function, event)
        except Exception:
            log.exception("%s failed a batch of %d; SQS makes it visible again", self.function, len(messages))
            return 0
        failed = {f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start:start + 10])])
        return len(messages)

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"], "body": message["Body"],
            "attributes": message.get("Attributes", {}), "messageAttributes": message.get("MessageAttributes", {}),
            "md5OfBody": message.get("MD5OfBody", ""), "eventSource": "aws:sqs", "eventSourceARN": self.queue_arn,
            "awsRegion": "us-east-1",
        }


@dataclass
class _Armed:
    version: str  # what the schedule was when its next firing was computed
    next_at: float | None


class SchedulePoller:
    """Fires the schedules of one group: `rate(...)` from its StartDate, `cron(...)` in its time
    zone, `at(...)` once. The input's `<aws.scheduler.scheduled-time>` is the firing's time."""

    def __init__(self, scheduler: Any, sqs: Any, functions: Functions, group: str, queue_urls: dict[str, str],
                 interval_s: float = 0.5) -> None:
        self.scheduler, self.sqs, self.functions, self.group = scheduler, sqs, functions, group
        self.queue_urls = queue_urls  # by ARN
        self.interval_s = interval_s
        self.armed: dict[str, _Armed] = {}
        self.stopping = threading.Event()
        self.pool = ThreadPoolExecutor(4, thread_name_prefix="scheduler")
        self.thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        while not self.stopping.wait(self.interval_s):
            try:
                self.fire_due(time.time())
            except Exception:  # noqa: BLE001
                log.exception("schedule poller")

    def fire_due(self, now: float) -> int:
        fired = 0
        seen = set()
        for summary in self._schedules():
            name = summary["Name"]
            seen.add(name)
            schedule = self.scheduler.get_schedule(Name=name, GroupName=self.group)
            version = json.dumps([schedule.get("ScheduleExpression"), str(schedule.get("StartDate")),
                                  schedule.get("ScheduleExpressionTimezone"), schedule.get("Target")], default=str)
            armed = self.armed.get(name)
            if armed is None or armed.version != version:
                armed = self.armed[name] = _Armed(version, next_firing(schedule, now, first=True))
            while armed.next_at is not None and armed.next_at <= now:
                self.pool.submit(self._fire, schedule["Target"], armed.next_at)
                fired += 1
                armed.next_at = next_firing(schedule, armed.next_at, first=False)
        for gone in set(self.armed) - seen:
            del self.armed[gone]
        return fired

    def _schedules(self) -> list[dict[str, Any]]:
        out, token = [], None
        while True:
            page = self.scheduler.list_schedules(GroupName=self.group, **({"NextToken": token} if token else {}))
            out += page.get("Schedules", [])
            token = page.get("NextToken")
            if not token:
                return out

    def _fire(self, target: dict[str, Any], at: float) -> None:
        scheduled = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        text = target.get("Input", "{}").replace("<aws.scheduler.scheduled-time>", scheduled)
        text = text.replace("<aws.scheduler.execution-id>", str(uuid.uuid4()))
        arn = target["Arn"]
        try:
            function = self.functions.by_arn(arn)
            if function is not None:
                self.functions.invoke(function, json.loads(text))
            elif arn in self.queue_urls:
                self.sqs.send_message(QueueUrl=self.queue_urls[arn], MessageBody=text)
            else:
                log.error("schedule target %s is nothing this deployment has", arn)
        except Exception:  # noqa: BLE001 - Scheduler retries per the RetryPolicy; here: logged
            log.exception("schedule target %s failed", arn)


class StackSchedules:
    """The template's own schedules (a function's `ScheduleV2` event: the sweep), from the start of
    the deployment: each firing invokes its function with an empty event, one at a time. With
    `period_s` (the setting HEADWATER_EMULATED_SCHEDULE_S, for tests), each fires that often
    instead of as its expression says."""

    def __init__(self, functions: Functions, schedules: list[tuple[str, str]], start: float,
                 interval_s: float = 1.0, period_s: float | None = None) -> None:
        self.functions = functions
        self.expressions = dict(schedules)
        self.period_s = period_s
        self.next_at = {name: self._next(e, start) for name, e in schedules}
        self.interval_s = min(interval_s, period_s or interval_s)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="stack-schedules", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _loop(self) -> None:
        while not self.stopping.wait(self.interval_s):
            self.fire_due(time.time())

    def _next(self, expression: str, after: float) -> float | None:
        if self.period_s:
            return after + self.period_s
        return next_firing({"ScheduleExpression": expression}, after, first=False)

    def fire_due(self, now: float) -> int:
        """Invokes each function whose firing is due (once, however many were missed: Scheduler's
        own would have run meanwhile); how many it invoked."""
        fired = 0
        for name, at in list(self.next_at.items()):
            if at is None or at > now:
                continue
            self.next_at[name] = self._next(self.expressions[name], now)
            fired += 1
            try:
                log.info("%s (scheduled): %s", name, self.functions.invoke(name, {}))
            except Exception:  # noqa: BLE001 - the next firing is the retry (RetryPolicy 0)
                log.exception("scheduled invocation of %s failed", name)
        return fired


def next_firing(schedule: dict[str, Any], after: float, first: bool) -> float | None:
    expression = schedule["ScheduleExpression"]
    start = schedule.get("StartDate")
    start_s = start.timestamp() if isinstance(start, datetime) else None
    rate = _RATE.fullmatch(expression)
    if rate:
        period = int(rate.group(1)) * _UNIT_S[rate.group(2).rstrip("s")]
        origin = start_s if start_s is not None else after
        if first and origin >= after:
            return origin
        steps = int((after - origin) // period) + 1
        return origin + steps * period
    if expression.startswith("at("):
        at = datetime.fromisoformat(expression[3:-1]).replace(tzinfo=ZoneInfo(
            schedule.get("ScheduleExpressionTimezone") or "UTC")).timestamp()
        return at if first and at >= after else None
    if expression.startswith("cron("):
        from croniter import croniter

        zone = ZoneInfo(schedule.get("ScheduleExpressionTimezone") or "UTC")
        base = datetime.fromtimestamp(max(after, start_s or 0), zone)
        return float(croniter(_five_fields(expression[5:-1]), base).get_next(float))
    log.error("schedule expression %r is not one the emulator knows", expression)
    return None


def _five_fields(aws: str) -> str:
    """AWS cron (minute hour day-of-month month day-of-week year; days of week 1-7 from Sunday,
    `?` for "any") as a standard five-field one (days of week 0-6 from Sunday)."""
    minute, hour, dom, month, dow, _year = aws.split()
    dow = re.sub(r"\d+", lambda m: str(int(m.group()) - 1), dow)
    return " ".join(f.replace("?", "*") for f in (minute, hour, dom, month, dow))
