"""A meter of what the AWS deployment is billed for, in the emulated stack: every boto3 call the
functions make (botocore's `before-parameter-build` / `before-call` / `after-call` hooks on the
default session, so every client built after `install()` carries them; the adapters are not
touched), priced by the units AWS bills:

- DynamoDB: write units from item sizes, 1 KB each rounded up per item (a write's size is the
  larger of the item before and after; transactional writes and condition checks twice), reads 4 KB
  each (eventually consistent half), a Query or Scan by the total size of the items it evaluates
  rounded up once (filters and projections do not lower it: the sizes come from the same request
  run again, unprojected, by an unmetered client); each global secondary index an item is in costs
  the write of its projection (100 bytes of index overhead each) when a projected attribute changes.
- SQS: a request per 64 KB chunk of its payload; receives that found nothing are counted apart
  (Lambda's pollers make them whatever the traffic: a fixed cost per queue, not per event).
- S3, KMS, Scheduler API: a request each.
- Lambda: each invocation (the emulator's `Functions.invoke`, the runner's invoke), and its billed
  duration times the function's memory. The duration is the CPU time of the invoking thread (wall
  time on a shared, loaded machine says more about the machine than the code), plus `LATENCY_MS`
  per AWS call (what the call takes in-region, from the moment it was made), plus the wall time
  it waited on what it calls synchronously (the runner's invocations; outbound HTTP: webhook
  POSTs). Waits and calls that overlap (a commit's webhook attempts, made side by side) count
  once, as their union on the clock: Lambda bills the wall time, not the sum. The meter's own
  work (the before-images it reads to size a write) is not the function's and is taken off its
  CPU time. The runner's own duration is its wall time.

- CloudWatch Logs: the bytes each invocation writes to its log, as CloudWatch bills them (each
  line a log event, 26 bytes of metadata on top): the lines the handler itself writes (stdout and
  stderr while it runs, counted by `install_logs`: Powertools' JSON lines, EMF metric lines,
  anything logged at the function's level), plus the lines Lambda writes for every invocation
  (`platform_log_bytes`: START, END, REPORT with its XRAY line when the function traces), plus
  an API Gateway access log line (the template's format, filled in) for each API request.
- X-Ray: each invocation of a function with `Tracing: Active` that is not called from within
  another invocation (those continue their caller's trace) starts a trace; which of them are
  recorded depends on the rate (the sampling rule), so the bench prices them (bench/aws_cost.py).

Each call is put to the invocation it was made in (a context variable, which threads started by
anyio and asyncio inherit), else, for the pollers' receives and deletes, to the queue's consumer.
"""

from __future__ import annotations

import base64
import contextvars
import io
import math
import re
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

LATENCY_MS = {"dynamodb": 5.0, "sqs": 8.0, "s3": 15.0, "kms": 8.0, "scheduler": 15.0, "lambda": 10.0}
_TRANSACTIONAL = ("TransactWriteItems", "TransactGetItems")


@dataclass
class Invocation:
    function: str
    memory_mb: int
    waits: list[tuple[float, float]] = field(default_factory=list)  # (start, end), perf_counter s: the runner,
    # outbound HTTP, and each AWS call's modelled latency
    cpu_ms_elsewhere: float = 0.0  # in pool threads it handed work to
    meter_cpu_ms: float = 0.0  # the meter's own, in its hooks
    # per thread, how far its modelled clock runs ahead of the real one: a call that returned here
    # sooner than its modelled latency pushes that thread's later waits back by the difference, so
    # one thread's consecutive calls never overlap on the modelled clock
    ahead_s: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # by service
    log_bytes: int = 0  # its own lines (with each event's 26 bytes of metadata)
    log_events: int = 0

    @property
    def waited_ms(self) -> float:
        """The union of the waits on the clock (overlapping ones count once)."""
        total, reach = 0.0, float("-inf")
        for start, end in sorted(self.waits):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total * 1000


_current: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar("metered_invocation", default=None)

# ---- CloudWatch Logs (https://aws.amazon.com/cloudwatch/pricing/: ingested bytes, each log event
# with 26 bytes of metadata)

LOG_EVENT_OVERHEAD = 26
_REQUEST_ID = "8f5a3c2e-1b2d-4e6f-9a0b-1c2d3e4f5a6b"


def platform_log_lines(memory_mb: int, billed_ms: float, traced: bool, cold: bool = False) -> list[str]:
    """The lines Lambda writes to a function's log for one invocation (the text log format, the
    template's), with realistic values: START, END and REPORT (its XRAY part when the function
    traces; its Init Duration, and an INIT_START line before, on a cold start)."""
    lines = []
    if cold:
        lines.append("INIT_START Runtime Version: python:3.12.v40\tRuntime Version ARN: arn:aws:lambda:us-east-1::"
                     "runtime:" + "0" * 64)
    lines.append(f"START RequestId: {_REQUEST_ID} Version: $LATEST")
    lines.append(f"END RequestId: {_REQUEST_ID}")
    report = (f"REPORT RequestId: {_REQUEST_ID}\tDuration: {billed_ms - 0.43:.2f} ms\tBilled Duration: "
              f"{billed_ms:.0f} ms\tMemory Size: {memory_mb} MB\tMax Memory Used: 143 MB\t")
    if cold:
        report += "Init Duration: 812.34 ms\t"
    if traced:
        report += "\nXRAY TraceId: 1-6567a0b2-3c4d5e6f7a8b9c0d1e2f3a4b\tSegmentId: 4f5a6b7c8d9e0f1a\tSampled: true\t"
    lines.append(report)
    return lines


def log_bytes(lines: list[str]) -> int:
    """What CloudWatch ingests for these log events."""
    return sum(len(line.encode()) + LOG_EVENT_OVERHEAD for line in lines)


def access_log_line(template_format: str) -> str:
    """An API Gateway access log line of the template's format (`$context.x` filled in as for a
    POST to an HTTP source: ids, an address, a time)."""
    values = {"requestId": "Qm3xZg2YIAMEbXw=", "identity.sourceIp": "203.0.113.45",
              "requestTime": "29/Nov/2026:12:04:05 +0000", "httpMethod": "POST",
              "routeKey": "ANY /http/{endpoint_id}", "path": "/http/en_2xq7mwk9d3lz", "status": "200",
              "responseLength": "54", "responseLatency": "23", "integrationErrorMessage": "-"}
    return re.sub(r"\$context\.([\w.]+)", lambda m: values.get(m.group(1), "-"), template_format)


class _CountingStream(io.TextIOBase):
    """A stream that counts, for the current invocation, the lines written to it (each a log
    event), and passes them on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        record = _current.get()
        if record is not None and text:  # a line is an event once its newline is written (print writes it apart)
            lines = text.count("\n")
            record.log_bytes += len(text.encode()) - lines + lines * LOG_EVENT_OVERHEAD
            record.log_events += lines
        return int(self.inner.write(text))

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.inner, "encoding", "utf-8"))


@dataclass
class Tally:
    """What one function (or `poller:<function>`, or `other`) was billed for."""

    invocations: int = 0
    gb_s: float = 0.0
    billed_ms: float = 0.0
    api_requests: int = 0
    scheduler_invocations: int = 0
    wru: float = 0.0
    rru: float = 0.0
    sqs: float = 0.0
    sqs_fifo: float = 0.0
    sqs_empty_receives: int = 0
    s3_put: int = 0
    s3_get: int = 0
    kms: int = 0
    scheduler_api: int = 0
    log_bytes: float = 0.0  # CloudWatch Logs, as ingested: its own lines, Lambda's, API access logs
    log_events: float = 0.0
    trace_starts: float = 0.0  # invocations that would start an X-Ray trace (Tracing: Active, not called by another)
    calls: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    units_by_call: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # DynamoDB units

    def units(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__
                if name not in ("calls", "units_by_call")}

    def add(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            if name in ("calls", "units_by_call"):
                mine = getattr(self, name)
                for k, v in getattr(other, name).items():
                    mine[k] = mine.get(k, 0.0) + v
            else:
                setattr(self, name, getattr(self, name) + getattr(other, name))


# ---- DynamoDB item sizes (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html)

def _number_size(text: str) -> int:
    digits = text.lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
    return math.ceil(len(digits) / 2) + 1


def value_size(value: dict[str, Any]) -> int:
    (kind, v), = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return _number_size(str(v))
    if kind == "B":
        return len(v) if isinstance(v, bytes | bytearray) else len(base64.b64decode(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(_number_size(str(n)) for n in v)
    if kind == "BS":
        return sum(len(b) for b in v)
    if kind == "L":
        return 3 + sum(1 + value_size(x) for x in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(x) for k, x in v.items())
    raise ValueError(f"unknown DynamoDB type {kind}")


def item_size(item: dict[str, Any] | None) -> int:
    return sum(len(k.encode()) + value_size(v) for k, v in (item or {}).items())


def _kb(size: int, unit: int) -> int:
    return max(1, math.ceil(size / unit))


class _Tables:
    """Key schemas and indexes, and the items as they stand, through an unmetered client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.described: dict[str, dict[str, Any]] = {}

    def table(self, name: str) -> dict[str, Any]:
        if name not in self.described:
            self.described[name] = self.client.describe_table(TableName=name)["Table"]
        return self.described[name]

    def key_of(self, name: str, item: dict[str, Any]) -> dict[str, Any]:
        return {k["AttributeName"]: item[k["AttributeName"]] for k in self.table(name)["KeySchema"]}

    def get(self, name: str, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.client.get_item(TableName=name, Key=key, ConsistentRead=True).get("Item")
        return item

    def evaluated(self, operation: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The items a Query or Scan reads (what it is billed by), projected as its index holds them."""
        again = {k: v for k, v in params.items() if k not in (
            "ProjectionExpression", "FilterExpression", "Select", "AttributesToGet", "ReturnConsumedCapacity")}
        names = again.get("ExpressionAttributeNames")
        values = again.get("ExpressionAttributeValues")
        used = " ".join(str(again.get(k, "")) for k in ("KeyConditionExpression",))
        if names:
            again["ExpressionAttributeNames"] = {k: v for k, v in names.items() if k in used}
            if not again["ExpressionAttributeNames"]:
                del again["ExpressionAttributeNames"]
        if values:
            again["ExpressionAttributeValues"] = {k: v for k, v in values.items() if k in used}
            if not again["ExpressionAttributeValues"]:
                del again["ExpressionAttributeValues"]
        if again.get("IndexName"):
            again["Select"] = "ALL_PROJECTED_ATTRIBUTES"
        method = self.client.query if operation == "Query" else self.client.scan
        items: list[dict[str, Any]] = method(**again).get("Items", [])
        return items

    def index_writes(self, name: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> float:
        """Write units on the table's global secondary indexes for one item's change."""
        units = 0.0
        table_keys = [k["AttributeName"] for k in self.table(name)["KeySchema"]]
        for index in self.table(name).get("GlobalSecondaryIndexes", []):
            keys = [k["AttributeName"] for k in index["KeySchema"]]
            projection = index.get("Projection", {})

            def projected(item: dict[str, Any] | None, keys: list[str] = keys, projection: dict[str, Any] = projection
                          ) -> dict[str, Any] | None:
                if item is None or any(k not in item for k in keys):
                    return None
                kind = projection.get("ProjectionType", "ALL")
                if kind == "ALL":
                    return item
                kept = set(keys) | set(table_keys) | set(projection.get("NonKeyAttributes", []) if kind == "INCLUDE"
                                                         else [])
                return {k: v for k, v in item.items() if k in kept}

            old, new = projected(before), projected(after)
            if old == new:
                continue
            if old is not None and new is not None and all(old[k] == new[k] for k in keys):
                units += _kb(max(item_size(old), item_size(new)) + 100, 1024)
            else:
                units += sum(_kb(item_size(x) + 100, 1024) for x in (old, new) if x is not None)
        return units


class Meter:
    """Installs the hooks; `tally()` is what was billed since the last `reset()`, by function."""

    def __init__(self, endpoint: str, memory_mb: dict[str, int], queue_consumers: dict[str, str],
                 tracing: dict[str, str] | None = None, access_log_format: str = "") -> None:
        shadow = boto3.session.Session(region_name="us-east-1", aws_access_key_id="emulated",  # moto's
                                       aws_secret_access_key="emulated")  # noqa: S106 - its clients carry no hooks
        self.tables = _Tables(shadow.client("dynamodb", endpoint_url=endpoint))
        self.memory_mb = memory_mb
        self.queue_consumers = queue_consumers  # queue URL -> the function its event source mapping invokes
        self.lock = threading.Lock()
        self.tallies: dict[str, Tally] = defaultdict(Tally)
        self.last_call = time.monotonic()
        self.tracing = tracing or {}  # function -> its Tracing mode (Active, PassThrough)
        self.access_log_bytes = log_bytes([access_log_line(access_log_format)]) if access_log_format else 0
        self._streams: tuple[Any, Any] | None = None

    def install_logs(self) -> None:
        """Counts what the functions write to stdout and stderr (their log) from here on: Powertools'
        handlers take `sys.stdout` when they are made, so this comes before the handlers are imported."""
        self._streams = (sys.stdout, sys.stderr)
        sys.stdout = _CountingStream(sys.stdout)  # type: ignore[assignment]
        sys.stderr = _CountingStream(sys.stderr)  # type: ignore[assignment]

    def uninstall_logs(self) -> None:
        if self._streams is not None:
            sys.stdout, sys.stderr = self._streams
            self._streams = None

    def install(self, events: Any = None) -> None:
        """On the default session (every `boto3.client` built after this), or the given events."""
        events = events or boto3._get_default_session().events
        events.register("before-parameter-build", self._params)
        events.register("after-call", self._after)

    def reset(self) -> None:
        with self.lock:
            self.tallies = defaultdict(Tally)

    def tally(self) -> dict[str, Tally]:
        with self.lock:
            return dict(self.tallies)

    # ---- invocations

    @contextmanager
    def invocation(self, function: str, api: bool = False, scheduled: bool = False) -> Iterator[Invocation]:
        record = Invocation(function, self.memory_mb[function])
        parent = _current.get()
        token = _current.set(record)
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            yield record
        finally:
            _current.reset(token)
            ended = time.perf_counter()
            wall_ms = (ended - started) * 1000
            if parent is not None:  # the caller waited on this one (the runner)
                ahead = parent.ahead_s[threading.get_ident()]
                parent.waits.append((started + ahead, ended + ahead))
                billed = max(1.0, math.ceil(wall_ms))
            else:
                own_cpu_ms = (time.thread_time() - cpu) * 1000 + record.cpu_ms_elsewhere - record.meter_cpu_ms
                billed = max(1.0, math.ceil(max(0.0, own_cpu_ms) + record.waited_ms))
            traced = self.tracing.get(function) == "Active"
            logs = log_bytes(platform_log_lines(record.memory_mb, billed, traced))
            with self.lock:
                tally = self.tallies[function]
                tally.invocations += 1
                tally.log_bytes += record.log_bytes + logs + (self.access_log_bytes if api else 0)
                tally.log_events += record.log_events + 3 + int(api)
                tally.trace_starts += int(traced and parent is None)
                tally.billed_ms += billed
                tally.gb_s += billed / 1000 * record.memory_mb / 1024
                tally.api_requests += int(api)
                tally.scheduler_invocations += int(scheduled)
            self.last_call = time.monotonic()

    def install_pools(self) -> None:
        """Work handed to a thread pool stays the invocation's (context and CPU time), as work
        handed over by `asyncio.to_thread` and anyio does."""
        from concurrent.futures import ThreadPoolExecutor

        submit = ThreadPoolExecutor.submit

        def submit_in_context(pool: ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            context = contextvars.copy_context()

            def run() -> Any:
                cpu = time.thread_time()
                try:
                    return fn(*args, **kwargs)
                finally:
                    record = _current.get()
                    if record is not None:
                        record.cpu_ms_elsewhere += (time.thread_time() - cpu) * 1000

            return submit(pool, context.run, run)

        ThreadPoolExecutor.submit = submit_in_context  # type: ignore[method-assign]

    def waited(self, started: float, ended: float) -> None:
        """The current invocation waited on something outside (an HTTP request) from `started` to
        `ended` (perf_counter seconds)."""
        record = _current.get()
        if record is not None:
            ahead = record.ahead_s[threading.get_ident()]
            record.waits.append((started + ahead, ended + ahead))

    # ---- the hooks

    def _params(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        cpu = time.thread_time()
        context["metered_params"] = dict(params)
        service = model.service_model.service_name
        if service == "dynamodb" and model.name in ("UpdateItem", "DeleteItem", "PutItem"):
            context["metered_before"] = self.tables.get(params["TableName"], params.get("Key") or
                                                        self.tables.key_of(params["TableName"], params["Item"]))
        elif service == "dynamodb" and model.name == "TransactWriteItems":
            context["metered_before"] = [self._transact_before(i) for i in params.get("TransactItems", [])]
        record = _current.get()
        if record is not None:
            record.meter_cpu_ms += (time.thread_time() - cpu) * 1000
        context["metered_at"] = time.perf_counter()

    def _transact_before(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        (kind, action), = entry.items()
        key = action.get("Key") or self.tables.key_of(action["TableName"], action["Item"])
        return self.tables.get(action["TableName"], key)

    def _after(self, model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        cpu = time.thread_time()
        try:
            self._count(model, parsed, context)
        finally:
            record = _current.get()
            if record is not None:
                record.meter_cpu_ms += (time.thread_time() - cpu) * 1000

    def _count(self, model: Any, parsed: dict[str, Any], context: dict[str, Any]) -> None:
        service, operation = model.service_model.service_name, model.name
        params = context.get("metered_params", {})
        failed = "Error" in parsed and bool(parsed["Error"].get("Code"))
        record = _current.get()
        owner = record.function if record else self._poller_of(service, params)
        tally = Tally()
        tally.calls[f"{service}.{operation}"] += 1
        if service == "dynamodb":
            self._dynamodb(operation, params, parsed, context, failed, tally)
            table = str(params.get("TableName") or "").removeprefix("headwater-")
            tally.units_by_call[f"{operation}({table}) WRU+RRU"] += tally.wru + tally.rru
        elif service == "sqs":
            self._sqs(operation, params, parsed, tally)
        elif service == "s3":
            if operation in ("PutObject", "CopyObject", "ListObjectsV2", "ListObjects", "CreateMultipartUpload"):
                tally.s3_put += 1
            else:
                tally.s3_get += 1
        elif service == "kms":
            tally.kms += 1
        elif service == "scheduler":
            tally.scheduler_api += 1
        with self.lock:
            self.tallies[owner].add(tally)
            if record is not None:
                record.calls[service] += 1
                now = time.perf_counter()
                thread, latency = threading.get_ident(), LATENCY_MS.get(service, 10.0) / 1000
                at = context.get("metered_at", now) + record.ahead_s[thread]
                record.waits.append((at, at + latency))
                record.ahead_s[thread] += max(0.0, latency - (now - context.get("metered_at", now)))
        if tally.sqs_empty_receives == 0:
            self.last_call = time.monotonic()

    def _poller_of(self, service: str, params: dict[str, Any]) -> str:
        if service == "sqs" and params.get("QueueUrl") in self.queue_consumers:
            return f"poller:{self.queue_consumers[params['QueueUrl']]}"
        return "other"

    def _sqs(self, operation: str, params: dict[str, Any], parsed: dict[str, Any], tally: Tally) -> None:
        if operation in ("GetQueueAttributes", "GetQueueUrl", "ListQueues"):
            requests = 1.0
        elif operation == "SendMessage":
            requests = _chunks(len(str(params.get("MessageBody", "")).encode()) + _attributes(params))
        elif operation == "SendMessageBatch":
            requests = _chunks(sum(len(str(e.get("MessageBody", "")).encode()) + _attributes(e)
                                   for e in params.get("Entries", [])))
        elif operation == "ReceiveMessage":
            messages = parsed.get("Messages", [])
            if not messages:
                tally.sqs_empty_receives += 1
                return
            requests = _chunks(sum(len(m.get("Body", "").encode()) for m in messages))
        else:  # DeleteMessage(Batch), ChangeMessageVisibility(Batch), ...
            requests = 1.0
        if str(params.get("QueueUrl", "")).endswith(".fifo"):
            tally.sqs_fifo += requests
        else:
            tally.sqs += requests

    def _dynamodb(self, operation: str, params: dict[str, Any], parsed: dict[str, Any], context: dict[str, Any],
                  failed: bool, tally: Tally) -> None:
        t = self.tables
        if operation == "GetItem":
            item = parsed.get("Item")
            if item is not None and (params.get("ProjectionExpression") or params.get("AttributesToGet")):
                item = t.get(params["TableName"], params["Key"])
            tally.rru += _kb(item_size(item), 4096) * (1 if params.get("ConsistentRead") else 0.5)
        elif operation == "BatchGetItem":
            for name, request in params.get("RequestItems", {}).items():
                factor = 1 if request.get("ConsistentRead") else 0.5
                for key in request.get("Keys", []):
                    tally.rru += _kb(item_size(t.get(name, key)), 4096) * factor
        elif operation in ("Query", "Scan"):
            factor = 0.5 if params.get("IndexName") or not params.get("ConsistentRead") else 1
            tally.rru += _kb(sum(item_size(i) for i in t.evaluated(operation, params)), 4096) * factor
        elif operation in ("PutItem", "UpdateItem", "DeleteItem"):
            tally.wru += self._write(operation, params, context.get("metered_before"), failed, 1)
        elif operation == "BatchWriteItem":
            for name, requests in params.get("RequestItems", {}).items():
                for request in requests:
                    if "PutRequest" in request:
                        new = request["PutRequest"]["Item"]
                        tally.wru += _kb(item_size(new), 1024) + t.index_writes(name, None, new)
                    else:  # the item's size before its delete is gone by now: a unit at least
                        tally.wru += 1
        elif operation == "TransactWriteItems":
            befores = context.get("metered_before") or []
            for entry, before in zip(params.get("TransactItems", []), befores, strict=False):
                (kind, action), = entry.items()
                if kind == "ConditionCheck":
                    tally.wru += 2 * _kb(item_size(before), 1024)
                else:
                    tally.wru += self._write(kind, action, before, failed, 2)
        elif operation == "TransactGetItems":
            for entry in params.get("TransactItems", []):
                action = entry["Get"]
                tally.rru += 2 * _kb(item_size(t.get(action["TableName"], action["Key"])), 4096)

    def _write(self, kind: str, action: dict[str, Any], before: dict[str, Any] | None, failed: bool,
               factor: int) -> float:
        name = action["TableName"]
        if kind in ("PutItem", "Put"):
            after: dict[str, Any] | None = action["Item"]
        elif kind in ("DeleteItem", "Delete"):
            after = None
        else:
            after = self.tables.get(name, action["Key"])
        if failed:
            return float(factor * _kb(item_size(before), 1024))
        units = factor * _kb(max(item_size(before), item_size(after)), 1024)
        return units + self.tables.index_writes(name, before, after)


def _chunks(size: int) -> float:
    return float(max(1, math.ceil(size / 65536)))


def _attributes(params: dict[str, Any]) -> int:
    total = 0
    for name, value in (params.get("MessageAttributes") or {}).items():
        total += len(name.encode()) + len(str(value.get("DataType", "")).encode())
        total += len(str(value.get("StringValue", value.get("BinaryValue", ""))).encode())
    return total

