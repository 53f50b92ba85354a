"""Source leases across machines: a `lock` item (`pk = <source_id>, sk = lock`) put only when
there is none or it has expired, and deleted by its holder only.

A holder that dies leaves the item behind until `expires_at` passes (the condition compares it
with the clock, since DynamoDB's TTL deletes expired items only eventually). Holding is
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
        self._held: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(f"leases_held_{id(self)}",
                                                                                   default=frozenset())

    def taken_elsewhere(self, source_id: str) -> bool:
        # The lock item is deleted at release, so it cannot say who held it last: a machine's
        # copy of a source is dropped by its own changes and by a commit that loses a race.
        return False

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
            self.tables.client.put_item(
                TableName=self.tables.resources,
                Item={**key(source_id, LOCK), "owner": s(token), "expires_at": n(math.ceil(now + ttl_s))},
                ConditionExpression="attribute_not_exists(pk) OR #e < :now",
                ExpressionAttributeNames={"#e": "expires_at"},
                ExpressionAttributeValues={":now": n(now)},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def _release(self, source_id: str, token: str) -> None:
        try:
            self.tables.client.delete_item(
                TableName=self.tables.resources,
                Key=key(source_id, LOCK),
                ConditionExpression="#o = :token",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":token": s(token)},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise  # expired and taken by another holder meanwhile: theirs now


def _log_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.warning("a lease taken for a cancelled holder was not given back: it expires", exc_info=done.exception())
