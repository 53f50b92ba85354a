"""What every handler of a container shares, built at import (module level), so that a warm
container reuses the services, boto3 clients and runner: Powertools Logger, Metrics and Tracer
(X-Ray, `Tracing: Active` in template.yaml, the event path's functions per its EventPathTracing; the
Tracer disables itself outside Lambda, and records nothing in an unsampled invocation), the
services over the AWS adapters, Mangum for the HTTP functions, batch processing with idempotency
for the SQS ones."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig
from starlette.types import ASGIApp, Receive, Scope, Send

from headwater.bootstrap import Services, bootstrap
from headwater.settings import Settings

LambdaHandler = Callable[[dict[str, Any], Any], Any]

logger = Logger(service="headwater")
metrics = Metrics(namespace="Headwater", service="headwater")
# Each invocation a segment, its AWS calls (botocore) and HTTP requests (httpx) subsegments; not its
# response nor its event (user data).
tracer = Tracer(service="headwater")
_metrics_lock = threading.Lock()  # one container runs one invocation at a time; the emulator runs several


@cache
def services() -> Services:
    """The container's services (HEADWATER_BACKEND=aws: DynamoDB, SQS, EventBridge Scheduler)."""
    return bootstrap(Settings())


@cache
def _dynamodb() -> Any:
    import boto3

    from headwater.adapters.aws.config import AwsConfig

    return boto3.client("dynamodb", endpoint_url=AwsConfig().endpoint_url)


def idempotency() -> DynamoDBPersistenceLayer:
    """Powertools' idempotency records in the IdempotencyTable, through the container's client:
    one layer per handler (a layer keeps the first key path it is configured with)."""
    from headwater.adapters.aws.config import AwsConfig

    return DynamoDBPersistenceLayer(table_name=AwsConfig().idempotency_table, boto3_client=_dynamodb())


def idempotency_config(key_path: str) -> IdempotencyConfig:
    """A day of memory: SQS and Scheduler redeliver within minutes (a message lives 4 days at most,
    and the services' task ids catch a later repeat too)."""
    return IdempotencyConfig(event_key_jmespath=key_path, expires_after_seconds=86_400,
                             raise_on_no_idempotency_key=True)


def count(name: str, value: float = 1) -> None:
    """A CloudWatch metric (EMF), flushed at once: the handler's only one per invocation."""
    with _metrics_lock:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        metrics.flush_metrics()


def http_handler(app: ASGIApp, name: str) -> LambdaHandler:
    """Mangum over an ASGI app, lifespan off (the services are built at import, not on startup)."""
    from mangum import Mangum

    mangum = Mangum(app, lifespan="off")  # type: ignore[arg-type]

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> Any:
        from headwater.adapters.aws import request_ids

        request_id = (event.get("requestContext") or {}).get("requestId")
        if request_id:
            tracer.put_annotation(key="request_id", value=request_id)
        with request_ids.bound(request_id):  # on every message the request causes (docs/aws.md, Tracing)
            response = mangum(event, context)
        count(f"{name}Requests")
        return response

    return handler


class Draining:
    """Waits, after the answer, for the inline runs' bookkeeping (`SqsTaskQueue.drain`): Lambda
    freezes the container as soon as the handler returns."""

    def __init__(self, app: ASGIApp, svc: Services) -> None:
        self.app = app
        self.queue = svc.adapters.queue

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
        drain = getattr(self.queue, "drain", None)
        if drain is not None:
            await drain()


def api_handler(name: str, routers: list[Any], site: bool = False) -> LambdaHandler:
    """A route group's function: the FastAPI app with only its routers (and the house errors)."""
    from headwater.api.app import create_api
    from headwater.api.middleware import ContainFaults

    return http_handler(ContainFaults(create_api(services(), routers, site=site)), name)


class RecordFailed(Exception):
    """A message the queue left for a later receive (its handler failed, or it is not a command)."""


def sqs_handler(name: str) -> LambdaHandler:
    """An SQS event source mapping's consumer (ReportBatchItemFailures): Powertools batch processing
    with each message handled once per message id (SQS delivers at least once), by the task queue,
    which holds the message's lane and sends early or blocked messages back with a delay.

    A FIFO queue's batch (a mapping reads one queue: a batch is all FIFO or none) is handled whole,
    not a record at a time, so a source's runs in it share one runner call and one commit; and
    without an idempotency record (a put and an update, two write units a message): SQS hands out
    none of its group's later messages until the batch it came in is settled, so a repeat comes
    back with at most its batch's ten applied after it, while the lane's state still lists its task
    id among the newest applied ones (a run, a tick, a workflow step); its other commands (a
    schedule sync, a fan-out) are idempotent. Nor does a webhook attempt that carries its number:
    the delivery records its attempts, and a repeat finds its own there (services/webhooks.py says
    what that leaves: two copies at the same instant both send). Nor does an inline run's fallback
    (one per customResponse request, arriving 15 minutes later): the queue deletes it unrun when
    the inline run's done mark is there, and otherwise its run commits its task id among the lane's
    applied ones, which a repeat finds, as a FIFO message's does."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.idempotency import idempotent_function

    from headwater.adapters.aws import request_ids

    queue: Any = services().adapters.queue
    config = idempotency_config("messageId")

    def process(message: dict[str, Any]) -> bool:
        failures = queue.handle_records([message])["batchItemFailures"]
        if failures:
            raise RecordFailed(message["messageId"])
        return True

    once = idempotent_function(data_keyword_argument="message", persistence_store=idempotency(), config=config)
    handle = once(process)

    def traced(message: dict[str, Any]) -> None:
        """The request the message came from, if any, as the log lines' correlation id and a trace
        annotation; the queue binds it again for the messages this one's work sends."""
        request_id = request_ids.of_message(message)
        logger.set_correlation_id(request_id)
        if request_id:
            tracer.put_annotation(key="request_id", value=request_id)

    def record_handler(record: SQSRecord) -> bool:
        traced(record.raw_event)
        if _needs_no_record(record.raw_event):
            return process(message=record.raw_event)
        return bool(handle(message=record.raw_event))

    def ordered(records: list[dict[str, Any]]) -> dict[str, Any]:
        """A FIFO queue's batch, handled as one: a source's runs in it go to the runner in one call
        and commit in one unit of work (one lease, one state write, one trim and one usage count
        for the batch rather than for each message)."""
        traced(records[0])
        return queue.handle_records(records)

    @logger.inject_lambda_context
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> Any:
        config.register_lambda_context(context)
        records = event.get("Records", [])
        response: Any
        if records and all(str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records):
            response = ordered(records)
        else:
            processor = BatchProcessor(event_type=EventType.SQS)  # per invocation: it keeps the batch's outcome
            response = process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                                context=context)
        count(f"{name}Messages", len(records))
        return response

    return handler


def _needs_no_record(message: dict[str, Any]) -> bool:
    """A message whose repeat is dropped without an idempotency record (sqs_handler says why): a
    `deliver_webhook` with its attempt number (not a manual retry), a commit's
    `deliver_first_attempts` (each attempt 0), or an inline (customResponse) run's delayed message
    (sqs_queue.py `ingest_answered`)."""
    try:
        body = json.loads(message.get("body") or "")
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    if body.get("inline") is True or body.get("type") == "deliver_first_attempts":
        return True
    return body.get("type") == "deliver_webhook" and not body.get("manual") and isinstance(body.get("attempt"), int)


def timer_handler() -> LambdaHandler:
    """The EventBridge Scheduler target: the schedule's input is a `timer_tick` message whose
    `due_at` Scheduler filled in; one tick per (source, time) however often Scheduler delivers it.
    Without an idempotency record (a put and an update, two write units a tick): the tick is
    taken by a conditional save of the source's state, which drops a tick at or before the last
    one taken (services/timers.py), so a repeat, at once or later, queues no second run."""
    from headwater.domain.commands import TimerTick, from_message
    from headwater.ports import Task

    timers = services().timers

    @logger.inject_lambda_context
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        command = from_message(event)
        if not isinstance(command, TimerTick):
            raise ValueError(f"not a timer tick: {event.get('type')!r}")
        ran = bool(timers.tick([Task(f"tick:{command.source_id}:{command.due_at}", command)])[0])
        count("TimerTicks")
        return {"ticked": ran}

    return handler


SWEEP_MARGIN_S = 120.0  # beyond a busy lane's and a failed handler's first retries (sqs_queue.RETRY_DELAYS_S)


def sweep_handler() -> LambdaHandler:
    """The sweep, an EventBridge Scheduler rate (docs/aws.md, Sweep): outbox items committed but never
    handed to their queue are sent, sub-minute timer chains whose tick was lost are re-armed, and
    the sources due a look are looked at for a stall (docs/health.md).
    Both are conditional and idempotent, so an overlapping or repeated sweep changes nothing."""
    adapters: Any = services().adapters
    stalls = services().stalls

    @logger.inject_lambda_context
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
        swept = {"outbox": adapters.queue.recover(older_than_s=SWEEP_MARGIN_S),
                 "chains": adapters.scheduler.repair(margin_s=SWEEP_MARGIN_S)}
        count("SweptOutbox", swept["outbox"])
        count("RearmedChains", swept["chains"])
        if stalls is not None:  # the sources due a look for a stall (services/stalls.py)
            looked = stalls.check(time.time())
            swept.update(stalls_looked=looked.looked, stalls_started=looked.started)
            count("SourceStalls", looked.started)
        return swept

    return handler
