"""Where the AWS adapters find their resources: the names `template.yaml` passes to every function
as environment variables (one place, so the composition root and the emulator agree)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _env(name: str, default: str = "") -> str:
    return os.environ.get(f"HEADWATER_{name}", default)


@dataclass(frozen=True)
class AwsConfig:
    resources_table: str = field(default_factory=lambda: _env("RESOURCES_TABLE", "headwater-resources"))
    events_table: str = field(default_factory=lambda: _env("EVENTS_TABLE", "headwater-events"))
    run_queue_url: str = field(default_factory=lambda: _env("RUN_QUEUE_URL"))
    run_queue_arn: str = field(default_factory=lambda: _env("RUN_QUEUE_ARN"))
    # The FIFO queue of the run queue's commands due now, grouped by source (SqsTaskQueue.ordered_url).
    run_order_queue_url: str = field(default_factory=lambda: _env("RUN_ORDER_QUEUE_URL"))
    webhook_queue_url: str = field(default_factory=lambda: _env("WEBHOOK_QUEUE_URL"))
    event_deletion_queue_url: str = field(default_factory=lambda: _env("EVENT_DELETION_QUEUE_URL"))
    fan_out_queue_url: str = field(default_factory=lambda: _env("FAN_OUT_QUEUE_URL"))
    schedule_group: str = field(default_factory=lambda: _env("SCHEDULE_GROUP", "headwater-timers"))
    scheduler_role_arn: str = field(default_factory=lambda: _env("SCHEDULER_ROLE_ARN"))
    scheduler_dlq_arn: str = field(default_factory=lambda: _env("SCHEDULER_DLQ_ARN"))
    # The schedules' target: the timer function when deployed (template.yaml), else the run queue.
    timer_function_arn: str = field(default_factory=lambda: _env("TIMER_FUNCTION_ARN"))
    runner_function: str = field(default_factory=lambda: _env("RUNNER_FUNCTION"))  # the runner Lambda's name
    payload_bucket: str = field(default_factory=lambda: _env("PAYLOAD_BUCKET"))  # bodies over SQS's 256 KB
    # Component bundles by code hash: read here, reached by the runner through presigned URLs only.
    bundle_bucket: str = field(default_factory=lambda: _env("BUNDLE_BUCKET"))
    # The KMS key of the secret props' envelope encryption (KmsSecrets): an identifier, not a secret.
    kms_key_arn: str = field(default_factory=lambda: _env("KMS_KEY_ARN"))
    idempotency_table: str = field(default_factory=lambda: _env("IDEMPOTENCY_TABLE", "headwater-idempotency"))
    endpoint_url: str | None = field(default_factory=lambda: _env("AWS_ENDPOINT_URL") or None)
    # The runner's Lambda API apart from the rest: under `sam local`, `sam local start-lambda`
    # serves the runner while the tables and queues are on a moto server (docs/aws.md, sam local).
    lambda_endpoint_url: str | None = field(default_factory=lambda: _env("LAMBDA_ENDPOINT_URL") or None)
    # Committed commands this function handles at once rather than through their queue (its role
    # may write what they write): fan-outs and webhook attempts on the run consumer.
    at_once: frozenset[str] = field(default_factory=lambda: frozenset(
        ({"fan_out"} if _env("FAN_OUT_AT_ONCE") == "true" else set())
        | ({"deliver_webhook", "deliver_first_attempts"} if _env("DELIVER_AT_ONCE") == "true" else set())))

    def endpoint_for(self, service: str) -> str | None:
        """The endpoint a client of `service` talks to (None: AWS itself)."""
        if service == "lambda" and self.lambda_endpoint_url:
            return self.lambda_endpoint_url
        return self.endpoint_url

    def routes(self) -> dict[str, str]:
        """Which queue carries which command type (the rest go to the run queue)."""
        routes = {}
        if self.webhook_queue_url:
            routes["deliver_webhook"] = self.webhook_queue_url
            routes["deliver_first_attempts"] = self.webhook_queue_url
            routes["send"] = self.webhook_queue_url
            routes["backfill_webhook"] = self.webhook_queue_url  # sends in order, signing as attempts do
        if self.event_deletion_queue_url:
            routes["delete_events"] = self.event_deletion_queue_url
            routes["purge_source"] = self.event_deletion_queue_url
        if self.fan_out_queue_url:
            routes["fan_out"] = self.fan_out_queue_url
            routes["backfill"] = self.fan_out_queue_url  # queues the listener's runs, as fan-outs do
        return routes
