"""The TaskQueue port over SQS: commands as messages, handlers per command type.

A message body is the command's wire form (`domain.commands.to_message`) plus an envelope:
`task_id` (the outbox item's id, so a task keeps one id however often it is sent; absent for
ingested runs, whose id is the SQS message id), `not_before` (Unix time) and, for a run done
inline, `inline`. SQS delays a message by at most 900 s, so a later one arrives early and is sent
again with the remaining delay. Commands go to the queue of their type (`routes`), the rest to
`queue_url`.

With `ordered_url` (a FIFO queue), the main queue's commands due now go there instead, grouped by
their lane (`MessageGroupId`, the source id): SQS hands out a group's messages in the order sent and
the next only once those before it are deleted, so one source's runs come in order and never
overlap. A FIFO queue has no per-message delay, so delayed commands (timer chains, not-yet-due
tasks, a busy lane's messages sent back, an inline run's fallback) stay on the standard `queue_url`,
where order is not kept. The deduplication id is the task id where there is one (a task `recover`
sends twice is taken once), else a random one.

A standard queue does not keep a lane's messages in order or apart, so `poll_once` holds the store's lease
on a lane while that lane's handler runs: a lane busy elsewhere has its messages sent back with
a short delay rather than made visible again, which would count as a receive towards the
dead-letter queue's `maxReceiveCount`. A FIFO group finding its lane busy (an inline run holds it)
waits for it instead, up to `ordered_wait_s` for the whole batch: sent back, it would go to the
standard queue and could run after the source's later events; held, it keeps its place. Only a lane
whose holder died (its lease outlives that wait) is sent back. A handler that raises has its messages made visible
again after a backoff; those receives do count, so the dead-letter queue ends a task's retries. A
handler that raises TryLater (a run whose account another caller is refreshing) has its messages
sent back after its `after_s`, not counted, with `deferred_since` in their envelope (when they were
first sent back: the handler bounds how long they wait in all); an inline run tries again in place
instead, within `inline_wait_s`.

`ingest_answered`: a response cannot come back through SQS, so the run is done inline, in the
request's own coroutine, and its respond() (else its result) is the answer, returned as a value.
For durability its task is first kept as an outbox item of its own, due `inline_fallback_s` later
(one write unit): a process that dies mid-run leaves it for the sweep's `recover`, which sends it
once it is due. The run done, the item is deleted (one write unit); a run that failed is sent to
its queue at once. (It used to be an SQS message delayed 900 s, which SQS cannot delete before
receiving it: a send, a receive, a delete and an invocation that found the task's done mark, about
$1.4 a million requests more. Such messages sent by an earlier version are still dropped by their
mark; the run handler would also recognise the task id among the source's applied ones.)

Committed tasks of the types in `after_commit` (fan-outs and webhook attempts on the run consumer,
whose role may write what they write) are handled at once by the process that committed them,
by their type's `now` form where it has one, instead of going through their queue: a run's
events reach their subscribers without another invocation, three SQS requests and an
idempotency record (docs/aws.md, Cost). The outbox item stays until the handler returned, so a
process that dies meanwhile leaves the task to `recover`, and one whose handler fails, finds
the lane busy or (the `now` form) answers None goes to its queue as usual; those handlers are
idempotent either way.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from headwater.adapters.answered import answer_of
from headwater.adapters.aws import request_ids
from headwater.domain.commands import Command, RunSource, from_message, to_message
from headwater.ports import (
    AsyncTaskHandler,
    Busy,
    NowHandler,
    OnRespond,
    RunAnswer,
    Task,
    TaskHandler,
    TryLater,
    results_of,
)

log = logging.getLogger("headwater.sqs")

MAX_DELAY_S = 900  # SQS's DelaySeconds limit
MAX_MESSAGE_BYTES = 250 * 1024  # SQS takes 256 KB a message; a larger body goes to the payload store
BATCH = 10  # SendMessageBatch / DeleteMessageBatch / ReceiveMessage limit
BATCH_BYTES = 256 * 1024  # SendMessageBatch's limit on the bodies together
RETRY_DELAYS_S = (1, 5, 30, 120, 600)  # visibility after the 1st, 2nd, ... failure, as the local queue
_ENVELOPE = ("task_id", "not_before", "inline", "deferred_since")
_POINTER = "payload_s3"
_Entry = tuple[str, str, int, str, str | None]  # (key, body, delay, message group, request id) of a message


class WaitingLease(Protocol):
    def hold(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> AbstractContextManager[None]: ...
    def held(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> AbstractAsyncContextManager[None]: ...


class PayloadStore(Protocol):
    """Where a message too large for SQS keeps its body (S3), the message carrying its key."""

    def put(self, body: str) -> str: ...
    def get(self, key: str) -> str: ...


class S3Payloads:
    """Bodies in an S3 bucket under `sqs/<random>` (the bucket's lifecycle rule expires them)."""

    def __init__(self, client: Any, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    def put(self, body: str) -> str:
        key = f"sqs/{uuid.uuid4().hex}"
        self.client.put_object(Bucket=self.bucket, Key=key, Body=body.encode())
        return key

    def get(self, key: str) -> str:
        return str(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read().decode())


class TaskStore(Protocol):
    """What the queue needs of the store (DynamoStore)."""

    @property
    def lease(self) -> WaitingLease: ...
    def outbox_keep(self, command: Command, due_at: float) -> Task: ...
    def outbox_done(self, task_ids: list[str]) -> None: ...
    def pending_outbox(self, older_than_s: float) -> list[Task]: ...
    def mark_done(self, task_ids: list[str]) -> None: ...
    def done_of(self, task_ids: list[str]) -> set[str]: ...


@dataclass
class _Settled:
    """What became of a batch's messages: `finished` ones go (handled, found done, or sent again
    with a delay), `kept` ones stay in the queue (retried later, or dead-lettered in the end)."""

    handled: int = 0
    finished: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)


class SqsTaskQueue:
    def __init__(
        self,
        client: Any,
        queue_url: str,
        store: TaskStore,
        *,
        routes: Mapping[str, str] | None = None,
        lease_ttl_s: float = 300.0,
        lease_wait_s: float = 1.0,
        inline_wait_s: float = 20.0,
        busy_retry_s: int = 5,
        inline_fallback_s: int = MAX_DELAY_S,
        payloads: PayloadStore | None = None,
        clock: Callable[[], float] = time.time,
        after_commit: frozenset[str] = frozenset(),
        ordered_url: str | None = None,
        ordered_wait_s: float = 30.0,
    ) -> None:
        """`lease_ttl_s` must cover the longest handler (the consumer function's timeout): a lane's
        lease is released when its handler returns, or lost that long after a crash. An inline
        (customResponse) run waits up to `inline_wait_s` for its source's turn: concurrent requests
        to one source take turns, within API Gateway's 29 s. A FIFO batch waits up to
        `ordered_wait_s` in all for busy lanes: longer than an inline run can hold one (API Gateway's
        29 s), well within the run consumer's timeout."""
        self.client = client
        self.queue_url = queue_url
        self.store = store
        self.routes = dict(routes or {})
        self.lease_ttl_s = lease_ttl_s
        self.lease_wait_s = lease_wait_s
        self.inline_wait_s = inline_wait_s
        self.busy_retry_s = busy_retry_s
        self.inline_fallback_s = inline_fallback_s
        self.payloads = payloads
        self.clock = clock
        self.handlers: dict[str, TaskHandler | AsyncTaskHandler] = {}
        self.now_handlers: dict[str, NowHandler] = {}
        self.after_commit = after_commit
        self.ordered_url = ordered_url
        self.ordered_wait_s = ordered_wait_s
        self._inline: set[asyncio.Future[Any]] = set()

    def handle(self, command: type[Command], handler: TaskHandler | AsyncTaskHandler,
               now: NowHandler | None = None) -> None:
        """`now` is used for the types handled after their commit (`after_commit`) only; a waiting
        request's run goes inline (`ingest_answered`) by its handler."""
        self.handlers[command.name] = handler
        if now is not None:
            self.now_handlers[command.name] = now

    # sending

    def send(self, tasks: list[Task]) -> None:
        """Committed tasks (DynamoStore.on_commit): sent, then their outbox items deleted. A task
        SQS refused stays in the outbox for `recover`."""
        now = self.clock()
        at_once = [t for t in tasks if t.command.name in self.after_commit and t.command.name in self.handlers
                   and t.not_before <= now]
        if at_once:
            handled = self._handle_now(at_once)
            tasks = [t for t in tasks if t.id not in handled]
        sent: list[str] = []
        by_queue: dict[str, list[_Entry]] = {}
        for task in tasks:
            delay = self._delay(task.not_before)
            by_queue.setdefault(self._url(task.command, delay), []).append(
                (task.id, self._fitting(_body(task.command, task.id, task.not_before)), delay,
                 task.command.lane or task.id, request_ids.current.get()))
        for url, entries in by_queue.items():
            sent += self._send_batch(url, entries)
        if sent:
            self.store.outbox_done(sent)

    def _handle_now(self, tasks: list[Task]) -> set[str]:
        """The tasks handled here and now (their outbox items deleted); the rest go to their queue."""
        handled = [task.id for task in tasks if self._handled_now(task)]
        if handled:
            self.store.outbox_done(handled)
        return set(handled)

    def _handled_now(self, task: Task) -> bool:
        """Its type's `now` form if it has one (None: leave it to the queue), else its handler."""
        name = task.command.name
        try:
            with self._holding(task, 0):
                answered = _handled(self.now_handlers.get(name, self.handlers[name]), [task])
                if answered is None:
                    log.debug("task %s (%s) left to its queue", task.id, name)
                    return False
        except Exception:  # noqa: BLE001 - Busy or a failure: its queue's consumer retries it
            log.info("task %s (%s) goes to its queue", task.id, name, exc_info=True)
            return False
        return True

    def recover(self, older_than_s: float = 60.0) -> int:
        """Sends the outbox items a crash left behind (run it now and then); how many it found."""
        tasks = self.store.pending_outbox(older_than_s)
        if tasks:
            self.send(tasks)
        return len(tasks)

    async def ingest(self, command: RunSource) -> str:
        """Durable once SQS accepted the message; the task id is its message id."""
        return await asyncio.to_thread(self._send_one, command, 0)

    async def ingest_answered(self, command: RunSource, timeout_s: float) -> RunAnswer:
        """The task kept first (an outbox item due in `inline_fallback_s`: durable, and sent by the
        sweep if this process dies mid-run), then the run done here, in this coroutine; the answer
        is its first `respond()`, else its result."""
        kept = await asyncio.to_thread(self.store.outbox_keep, command, self.clock() + self.inline_fallback_s)
        return await answer_of(functools.partial(self._run_inline, Task(kept.id, command)), timeout_s, self._inline)

    async def drain(self) -> None:
        """Waits for this loop's inline runs still finishing their bookkeeping (before a Lambda
        invocation returns and its process is frozen; in tests). Another loop's (the emulator
        serves requests on several) are that loop's to wait for."""
        loop = asyncio.get_running_loop()
        while mine := [run for run in list(self._inline) if run.get_loop() is loop]:
            await asyncio.gather(*mine, return_exceptions=True)

    # receiving

    def poll_once(self, max_messages: int = BATCH, wait_s: int = 0, queue_url: str | None = None) -> int:
        """Receives one batch of `queue_url` (default: the main queue) and handles it (a worker's
        loop, tests); returns how many tasks were handled or found done already. Messages not yet
        due go back with the rest of their delay."""
        url = queue_url or self.queue_url
        response = self.client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=max(1, min(BATCH, max_messages)), WaitTimeSeconds=wait_s,
            MessageSystemAttributeNames=["ApproximateReceiveCount"], MessageAttributeNames=[request_ids.ATTRIBUTE],
        )
        messages = response.get("Messages", [])
        for message in messages:
            message["QueueUrl"] = url  # deletes and visibility changes go back to where it came from
        settled = self._process(messages)
        self._delete(settled.finished)
        return settled.handled

    def handle_records(self, records: list[dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
        """The same for a Lambda SQS event (`ReportBatchItemFailures`): Lambda deletes the
        messages not reported as failures, so this deletes nothing itself."""
        messages = [{"MessageId": r["messageId"], "ReceiptHandle": r["receiptHandle"], "Body": r["body"],
                     "Attributes": r.get("attributes") or {}, "messageAttributes": r.get("messageAttributes") or {}}
                    for r in records]
        for record, message in zip(records, messages, strict=True):
            if self.ordered_url and str(record.get("eventSourceARN", "")).endswith(".fifo"):
                message["QueueUrl"] = self.ordered_url  # its visibility changes go back there
        settled = self._process(messages)
        return {"batchItemFailures": [{"itemIdentifier": m["MessageId"]} for m in settled.kept]}

    def _process(self, messages: list[dict[str, Any]]) -> _Settled:
        settled = _Settled()
        now = self.clock()
        due: list[tuple[Task, dict[str, Any]]] = []
        early: list[tuple[Task, dict[str, Any]]] = []
        inline: list[str] = []
        for message in messages:
            try:
                task, is_inline = _decode(message, self.payloads)
            except (ValueError, TypeError, KeyError):
                log.exception("message %s is not a command; left for the dead-letter queue", message.get("MessageId"))
                settled.kept.append(message)
                continue
            (early if task.not_before > now else due).append((task, message))
            if is_inline:
                inline.append(task.id)
        if early:
            self._send_back(early, None, settled)
        done = self.store.done_of(inline) if inline else set()
        for task, message in due:
            if task.id in done:
                settled.finished.append(message)
                settled.handled += 1
        wait_until = time.monotonic() + self.ordered_wait_s
        for group in _groups([(t, m) for t, m in due if t.id not in done]):
            ordered = self.ordered_url is not None and group[0][1].get("QueueUrl") == self.ordered_url
            wait_s = max(self.lease_wait_s, wait_until - time.monotonic()) if ordered else self.lease_wait_s
            self._run_group(group, settled, wait_s)
        return settled

    def _run_group(self, group: list[tuple[Task, dict[str, Any]]], settled: _Settled, wait_s: float) -> None:
        tasks = [t for t, _ in group]
        handler = self.handlers.get(tasks[0].command.name)
        if handler is None:
            log.error("no handler for %r here; %d messages left for the dead-letter queue", tasks[0].command.name,
                      len(tasks))
            settled.kept += [m for _, m in group]
            return
        try:
            with request_ids.bound(request_ids.of_message(group[0][1])), self._holding(tasks[0], wait_s):
                _handled(handler, tasks)
        except TryLater as later:
            self._send_back(group, max(1, math.ceil(later.after_s)), settled, deferred_since=self.clock())
            return
        except Busy:
            self._send_back(group, self.busy_retry_s, settled)
            return
        except Exception:
            log.exception("%d %s tasks failed (first %s, attempt %d)", len(tasks), tasks[0].command.name,
                          tasks[0].id, tasks[0].attempts + 1)
            self._retry_later(group)
            settled.kept += [m for _, m in group]
            return
        settled.finished += [m for _, m in group]
        settled.handled += len(tasks)

    async def _run_inline(self, task: Task, on_respond: OnRespond) -> list[Any] | None:
        """The run of a request's task, holding its source's lease (up to `inline_wait_s` for its
        turn); one waiting on another caller's refresh tries again in place within that time.
        None when it failed: its task goes to its queue now (its outbox item, if that fails)."""
        handler = self.handlers.get(task.command.name)
        deadline = time.monotonic() + self.inline_wait_s
        try:
            if handler is None:
                raise LookupError(f"no handler for {task.command.name!r}")
            while True:
                try:
                    async with self._held(task, self.inline_wait_s):
                        if inspect.iscoroutinefunction(handler):
                            results = list(await handler([task], on_respond))
                        else:  # a plain handler holds a thread anyway
                            plain: TaskHandler = handler  # type: ignore[assignment]
                            results = list(results_of(await asyncio.to_thread(plain, [task], on_respond)))
                    break
                except TryLater as later:  # its request waits: this invocation tries again, holding nothing else
                    if time.monotonic() + later.after_s > deadline:
                        raise
                    await asyncio.sleep(later.after_s)
                    task = replace(task, deferred_since=task.deferred_since or self.clock())
        except Exception:
            log.exception("inline run %s failed; its task goes to its queue", task.id)
            try:
                await asyncio.to_thread(self.send, [Task(task.id, task.command)])
            except Exception:  # noqa: BLE001 - its outbox item stays: the sweep sends it when due
                log.exception("could not queue inline run %s; the sweep sends it when due", task.id)
            return None
        try:
            await asyncio.to_thread(self.store.outbox_done, [task.id])
        except Exception:  # noqa: BLE001 - the run handler still recognises the task id when the sweep sends it
            log.exception("could not delete inline run %s's outbox item", task.id)
        return results

    @asynccontextmanager
    async def _held(self, task: Task, wait_s: float) -> AsyncIterator[None]:
        lane = task.command.lane
        if lane is None:
            yield
            return
        async with self.store.lease.held(lane, self.lease_ttl_s, wait_s=wait_s):
            yield

    @contextmanager
    def _holding(self, task: Task, wait_s: float) -> Iterator[None]:
        lane = task.command.lane
        if lane is None:
            yield
            return
        with self.store.lease.hold(lane, self.lease_ttl_s, wait_s=wait_s):
            yield

    # SQS calls

    def _fitting(self, body: str) -> str:
        """The body, or a pointer to it in the payload store when SQS would refuse it."""
        if self.payloads is None or len(body.encode()) <= MAX_MESSAGE_BYTES:
            return body
        return json.dumps({_POINTER: self.payloads.put(body)})

    def _url(self, command: Command, delay_s: int) -> str:
        """The command's queue: its route, else the main queue, whose commands due now go to the
        FIFO queue when there is one."""
        url = self.routes.get(command.name, self.queue_url)
        if url == self.queue_url and self.ordered_url and delay_s == 0:
            return self.ordered_url
        return url

    def _delay(self, not_before: float) -> int:
        return max(0, min(MAX_DELAY_S, math.ceil(not_before - self.clock())))

    def _send_one(self, command: Command, delay_s: int) -> str:
        url = self._url(command, delay_s)
        request: dict[str, Any] = {"QueueUrl": url, "MessageBody": self._fitting(_body(command, None, 0.0)),
                                   **request_ids.attributes(request_ids.current.get())}
        if url == self.ordered_url:
            request |= {"MessageGroupId": command.lane or uuid.uuid4().hex, "MessageDeduplicationId": uuid.uuid4().hex}
        else:
            request["DelaySeconds"] = delay_s
        response = self.client.send_message(**request)
        return str(response["MessageId"])

    def _send_batch(self, url: str, entries: list[_Entry]) -> list[str]:
        """(key, body, delay, group, request id) entries in batches of ten and 256 KB; returns the keys SQS
        accepted. On the FIFO queue the group is the message group and the key its deduplication
        id (a task id); elsewhere the delay applies."""
        accepted: list[str] = []
        fifo = url == self.ordered_url
        for chunk in _chunks(entries):
            request = [{"Id": str(i), "MessageBody": body, **request_ids.attributes(request_id),
                        **({"MessageGroupId": group, "MessageDeduplicationId": key} if fifo
                           else {"DelaySeconds": delay})}
                       for i, (key, body, delay, group, request_id) in enumerate(chunk)]
            response = self.client.send_message_batch(QueueUrl=url, Entries=request)
            accepted += [chunk[int(ok["Id"])][0] for ok in response.get("Successful", [])]
            for failed in response.get("Failed", []):
                log.error("SQS refused task %s: %s", chunk[int(failed["Id"])][0], failed.get("Message"))
        return accepted

    def _send_back(self, group: list[tuple[Task, dict[str, Any]]], delay_s: int | None, settled: _Settled,
                   deferred_since: float | None = None) -> None:
        """Sends received messages again (with their task id, and `deferred_since` unless they
        have one already): the originals SQS took again are finished, the others kept
        (redelivered as they are)."""
        by_queue: dict[str, list[_Entry]] = {}
        for task, message in group:
            body = json.loads(message["Body"])
            body["task_id"] = task.id
            if deferred_since is not None and body.get("deferred_since") is None:
                body["deferred_since"] = deferred_since
            delay = self._delay(task.not_before) if delay_s is None else delay_s
            url = self._url(task.command, max(1, delay))  # never to the FIFO queue: a repeat's id is taken
            by_queue.setdefault(url, []).append((message["ReceiptHandle"], json.dumps(body), delay,
                                                 task.command.lane or task.id, request_ids.of_message(message)))
        accepted: set[str] = set()
        for url, entries in by_queue.items():
            accepted |= set(self._send_batch(url, entries))
        for _, message in group:
            (settled.finished if message["ReceiptHandle"] in accepted else settled.kept).append(message)

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for url, of_queue in _by_queue(messages, self.queue_url):
            self._delete_from(url, of_queue)

    def _delete_from(self, url: str, messages: list[dict[str, Any]]) -> None:
        for start in range(0, len(messages), BATCH):
            chunk = messages[start:start + BATCH]
            response = self.client.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)])
            for failed in response.get("Failed", []):
                log.error("could not delete message %s: %s", chunk[int(failed["Id"])].get("MessageId"),
                          failed.get("Message"))

    def _retry_later(self, group: list[tuple[Task, dict[str, Any]]]) -> None:
        urls = {m.get("QueueUrl", self.queue_url) for _, m in group}
        for url in urls:
            self._retry_later_in(url, [(t, m) for t, m in group if m.get("QueueUrl", self.queue_url) == url])

    def _retry_later_in(self, url: str, group: list[tuple[Task, dict[str, Any]]]) -> None:
        for start in range(0, len(group), BATCH):
            chunk = group[start:start + BATCH]
            self.client.change_message_visibility_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"],
                 "VisibilityTimeout": RETRY_DELAYS_S[min(t.attempts, len(RETRY_DELAYS_S) - 1)]}
                for i, (t, m) in enumerate(chunk)])


def _handled(handler: TaskHandler | AsyncTaskHandler | NowHandler, tasks: list[Task]) -> list[Any] | None:
    """A handler's results, waited for: a coroutine handler's run to its end on a loop of this
    thread's own (a consumer invocation handles one batch at a time), in this thread's context
    (the lane's lease it holds, the request id)."""
    answered = handler(tasks, _no_respond)
    if answered is None:
        return None
    if inspect.iscoroutine(answered):
        return list(_run_to_end(answered))
    return results_of(answered)  # type: ignore[arg-type]


def _run_to_end(coroutine: Coroutine[Any, Any, Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    import concurrent.futures
    import contextvars

    context = contextvars.copy_context()  # called on a loop (tests): on a thread of its own
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        return thread.submit(context.run, asyncio.run, coroutine).result()


def _no_respond(_: Task, __: dict[str, Any]) -> None:
    """A queued run's respond() has nobody waiting."""


def _by_queue(messages: list[dict[str, Any]], default: str) -> list[tuple[str, list[dict[str, Any]]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for message in messages:
        grouped.setdefault(message.get("QueueUrl", default), []).append(message)
    return list(grouped.items())


def _body(command: Command, task_id: str | None, not_before: float) -> str:
    body: dict[str, Any] = {**to_message(command), "not_before": not_before}
    if task_id is not None:
        body["task_id"] = task_id
    return json.dumps(body, separators=(",", ":"))


def _decode(message: dict[str, Any], payloads: PayloadStore | None = None) -> tuple[Task, bool]:
    data = json.loads(message["Body"])
    if _POINTER in data:
        if payloads is None:
            raise ValueError("a message whose body is in the payload store, and no payload store")
        pointer = data
        data = {**json.loads(payloads.get(pointer.pop(_POINTER))), **pointer}  # the envelope a re-send added
    envelope = {name: data.pop(name, None) for name in _ENVELOPE}
    received = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
    deferred_since = envelope["deferred_since"]
    task = Task(str(envelope["task_id"] or message["MessageId"]), from_message(data), max(0, received - 1),
                float(envelope["not_before"] or 0.0),
                float(deferred_since) if isinstance(deferred_since, int | float) else None)
    return task, bool(envelope["inline"])


def _groups(due: list[tuple[Task, dict[str, Any]]]) -> list[list[tuple[Task, dict[str, Any]]]]:
    """By (command type, lane), in the order received; a task without a lane is a group of one."""
    groups: dict[tuple[str, str], list[tuple[Task, dict[str, Any]]]] = {}
    for task, message in due:
        lane = task.command.lane or f"task:{task.id}"
        groups.setdefault((task.command.name, lane), []).append((task, message))
    return list(groups.values())


def _chunks(entries: list[_Entry]) -> Iterator[list[_Entry]]:
    chunk: list[_Entry] = []
    size = 0
    for entry in entries:
        length = len(entry[1].encode())
        if chunk and (len(chunk) == BATCH or size + length > BATCH_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(entry)
        size += length
    if chunk:
        yield chunk
