"""The AWS cost model of docs/aws.md, computed from the design's request counts per unit of work
(us-east-1 list prices; free tiers left out). Each count is what the code does: see the table in
docs/aws.md (Cost model) for where each comes from.

    .venv/bin/python bench/aws_cost.py
"""

from __future__ import annotations

import json

PRICE = {  # USD, us-east-1, on-demand list prices
    "apigw_request": 1.00 / 1e6,        # HTTP API, first 300 M a month
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_s": 0.0000166667,        # x86_64
    "sqs_request": 0.40 / 1e6,          # standard queue, per 64 KB chunk
    "ddb_wru": 0.625 / 1e6,             # on-demand write request unit (1 KB)
    "ddb_rru": 0.125 / 1e6,             # on-demand read request unit (4 KB, strongly consistent)
    "scheduler_invocation": 1.00 / 1e6,
    "logs_gb": 0.50,                    # CloudWatch Logs ingestion
}

# (function, memory MB, billed ms) per invocation-equivalent of each step
RUN = {  # a run of a source: RunQueueFunction (batch of 5) + the runner
    "lambda_requests": 1 / 5 + 1,       # a fifth of a consumer invocation, one runner invocation
    "lambda_gb_s": (1024 * 0.120 + 1024 * 0.050) / 1024,  # consumer waits on the runner (120 ms), runner 50 ms
    "sqs_requests": 2 / 5 + 1 + 0,      # receive + delete per batch of 5; the fan-out message sent
    "wru": 2 + 2 + 6 + 1 + 2 + 1 + 1,   # idempotency (2), lease put+delete (2), transaction of state, event,
                                        # outbox (3 items x 2), channel marker (1), usage ADD in the
                                        # transaction (2), outbox done (1), trim of the 101st event (1)
    "rru": 2 + 1 + 1,                   # source + state (consistent), idempotency read on put, trim query
    "log_kb": 2.0,
}
INGEST = {  # an HTTP request to a plain source
    "apigw": 1,
    "lambda_requests": 1,
    "lambda_gb_s": 1024 * 0.030 / 1024,
    "sqs_requests": 1,
    "wru": 0,
    "rru": 2,                           # endpoint claim, source
    "log_kb": 1.0,
}
FAN_OUT_AND_DELIVERY = {  # FanOutFunction (batch 10) + WebhookDeliveryFunction (batch 10), one webhook
    "lambda_requests": 2 / 10,
    "lambda_gb_s": (512 * 0.030 + 512 * 0.150) / 1024,  # matching 30 ms; the POST ~150 ms
    "sqs_requests": 2 / 10 + 1 + 2 / 10,
    "wru": 2 + 4 + 1 + 2 + 2,           # idempotency x2 functions, delivery + outbox (txn), outbox done, delivery save
    "rru": 1 + 3 + 1,                   # subscriptions query; delivery, webhook, event; idempotency
    "log_kb": 2.0,
}
TIMER_TICK = {  # Scheduler -> TimerTickFunction: state saved, the run queued
    "scheduler": 1,
    "lambda_requests": 1,
    "lambda_gb_s": 512 * 0.030 / 1024,
    "sqs_requests": 1,
    "wru": 2 + 4 + 1,                   # idempotency, state + outbox (txn), outbox done
    "rru": 2 + 1,                       # source, state, idempotency
    "log_kb": 1.0,
}


def cost(*steps: dict[str, float], units: float) -> dict[str, float]:
    total: dict[str, float] = {}

    def add(name: str, value: float) -> None:
        total[name] = total.get(name, 0.0) + value * units

    for step in steps:
        add("api_gateway", step.get("apigw", 0) * PRICE["apigw_request"])
        add("lambda", step.get("lambda_requests", 0) * PRICE["lambda_request"]
            + step.get("lambda_gb_s", 0) * PRICE["lambda_gb_s"])
        add("sqs", step.get("sqs_requests", 0) * PRICE["sqs_request"])
        add("dynamodb", step.get("wru", 0) * PRICE["ddb_wru"] + step.get("rru", 0) * PRICE["ddb_rru"])
        add("scheduler", step.get("scheduler", 0) * PRICE["scheduler_invocation"])
        add("cloudwatch_logs", step.get("log_kb", 0) / 1024 / 1024 * PRICE["logs_gb"])
    rounded = {k: round(v, 2) for k, v in total.items() if v}
    rounded["total"] = round(sum(total.values()), 2)
    return rounded


def main() -> None:
    ticks = 10_000 * 60 * 24 * 30  # 10,000 timers at one minute, a 30-day month
    print(json.dumps({
        "one_million_http_events": cost(INGEST, RUN, FAN_OUT_AND_DELIVERY, units=1e6),
        "timer_10000_at_1_min_month": {"ticks": ticks, **cost(TIMER_TICK, RUN, units=ticks)},
    }, indent=1))


if __name__ == "__main__":
    main()
