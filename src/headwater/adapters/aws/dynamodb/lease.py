"""Source leases across machines: a `lock` item (`pk = <source_id>, sk = lock`) put only when
there is none or it has expired, and deleted by its holder only.

A holder that dies leaves the item behind until `expires_at` passes (the condition compares it
with the clock, since DynamoDB's TTL deletes expired items only eventually). A holder that lets go
leaves the item too, expired, naming the process (`holder`, one per DynamoLease) that held it, so
that the next taker learns from the item it replaces whether another process held the source
since it last did (`taken_elsewhere`): a Lambda container that keeps a source's state in memory
between invocations reads it again after another container's runs (it had kept running on the
`this.db` it last wrote, and its commits lost the others' writes). Holding is
re-entrant within a context (a thread, and the coroutines it runs): the task queue holds a lane's
lease while its handler runs, and the handler (`Runs.run_batch`) holds the same source's lease
again. A coroutine's hold (`held`) makes its DynamoDB calls on a worker thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

from botocore.exceptions import ClientError

from headwater.adapters.aws.dynamodb.codec import key, n, s
from headwater.adapters.aws.dynamodb.tables import Tables, error_code
from headwater.adapters.in_process_lease import InProcessLease
from headwater.ports import Busy

LOCK = "lock"
log = logging.getLogger("headwater.lease")
_FIRST_BACKOFF_S, _MAX_BACKOFF_S = 0.02, 1.0


class DynamoLease:
    def __init__(self, tables: Tables, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.tables = tables
        self.clock = clock
        self.sleep = sleep
        self._line = InProcessLease()
        self._holder = secrets.token_hex(8)  # this process, as the lock items it takes name it
        self._elsewhere: dict[str, bool] = {}  # per source: held by another process before this one took it
        self._held: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(f"leases_held_{id(self)}",
                                                                                   default=frozenset())

    def taken_elsewhere(self, source_id: str) -> bool:
        """Asked with the lease held: whether the lock item this process took named another
        holder (or none: new, or cleaned up by TTL)."""
        return self._elsewhere.get(source_id, True)

    @contextmanager
    def hold(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> Iterator[None]:
        """The port's hold; `wait_s` (default `ttl_s`, as the port has it) lets a caller that has
        other work to do give up sooner than the lease would expire (the SQS queue does)."""
        held = self._held.get()
        if source_id in held:
            yield
            return
        token = self._acquire(source_id, ttl_s, ttl_s if wait_s is None else wait_s)
        self._held.set(held | {source_id})
        try:
            yield
        finally:
            self._held.set(held)
            self._release(source_id, token)

    @asynccontextmanager
    async def held(self, source_id: str, ttl_s: float, wait_s: float | None = None) -> AsyncIterator[None]:
        """The coroutines of this process line up here first (in order, holding no thread), and only
        the first asks DynamoDB: each attempt on a worker thread, its backoff awaited."""
        held = self._held.get()
        if source_id in held:
            yield
            return
        wait = ttl_s if wait_s is None else wait_s
        deadline = self.clock() + max(0.0, wait)
        async with self._line.held(source_id, ttl_s, wait):
            token = secrets.token_hex(8)
            backoff = _FIRST_BACKOFF_S
            while not await self._attempt(source_id, ttl_s, token):
                left = deadline - self.clock()
                if left <= 0:
                    raise Busy(f"source {source_id} is busy")
                await asyncio.sleep(min(backoff, left))
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
            self._held.set(held | {source_id})
            try:
                yield
            finally:
                self._held.set(held)
                await asyncio.to_thread(self._release, source_id, token)

    async def _attempt(self, source_id: str, ttl_s: float, token: str) -> bool:
        """One conditional put, on a worker thread. A coroutine cancelled meanwhile cannot stop the
        put: whatever it took is given back when it ends (else the source would wait out the ttl
        for a holder that is gone)."""
        attempt = asyncio.ensure_future(asyncio.to_thread(self._try, source_id, ttl_s, token))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            attempt.add_done_callback(functools.partial(self._give_back, source_id, token))
            raise

    def _give_back(self, source_id: str, token: str, attempt: asyncio.Future[bool]) -> None:
        if attempt.cancelled() or attempt.exception() is not None or not attempt.result():
            return
        released = asyncio.get_running_loop().run_in_executor(None, self._release, source_id, token)
        released.add_done_callback(_log_failure)

    def _acquire(self, source_id: str, ttl_s: float, wait_s: float) -> str:
        token = secrets.token_hex(8)
        deadline = self.clock() + max(0.0, wait_s)
        backoff = _FIRST_BACKOFF_S
        while not self._try(source_id, ttl_s, token):
            left = deadline - self.clock()
            if left <= 0:
                raise Busy(f"source {source_id} is busy")
            self.sleep(min(backoff, left))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
        return token

    def _try(self, source_id: str, ttl_s: float, token: str) -> bool:
        """One conditional put of the lock item: taken when there is none or it expired."""
        now = self.clock()
        try:
            replaced = self.tables.client.put_item(
                TableName=self.tables.resources,
                Item={**key(source_id, LOCK), "owner": s(token), "holder": s(self._holder),
                      "expires_at": n(math.ceil(now + ttl_s))},
                ConditionExpression="attribute_not_exists(pk) OR #e < :now",
                ExpressionAttributeNames={"#e": "expires_at"},
                ExpressionAttributeValues={":now": n(now)},
                ReturnValues="ALL_OLD",
            ).get("Attributes") or {}
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        self._elsewhere[source_id] = (replaced.get("holder") or {}).get("S") != self._holder
        return True

    def _release(self, source_id: str, token: str) -> None:
        """Expires the item (a second ago: free at once, and TTL deletes it in time) rather than
        deleting it: its `holder` tells the next taker who held the source last."""
        try:
            self.tables.client.update_item(
                TableName=self.tables.resources,
                Key=key(source_id, LOCK),
                UpdateExpression="SET #e = :gone REMOVE #o",
                ConditionExpression="#o = :token",
                ExpressionAttributeNames={"#o": "owner", "#e": "expires_at"},
                ExpressionAttributeValues={":token": s(token), ":gone": n(math.floor(self.clock()) - 1)},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise  # expired and taken by another holder meanwhile: theirs now


def _log_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.warning("a lease taken for a cancelled holder was not given back: it expires", exc_info=done.exception())
