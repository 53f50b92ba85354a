"""`events/` and `env.json` (for `sam local`, which cannot run here: its container images cannot be
pulled) are what scripts/sample_events.py makes from the code that sends the real ones, and each
is taken by what handles it: API events by Mangum for their route's function, SQS bodies by the
task queue's decoder as commands of their queue's consumer, the schedule's input as a timer tick,
the runner request by lambda.mjs itself (in tests/e2e/aws/test_runner_lambda.py: it runs Node);
env.json names what the emulated provisioning creates."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import boto3

from headwater.adapters.aws.config import AwsConfig
from headwater.adapters.aws.sqs_queue import _decode
from headwater.domain.commands import TimerTick, from_message
from headwater.emulated.deployment import provision
from headwater.emulated.template import Template
from tests.aws.test_template import CONSUMERS

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sample_events", ROOT / "scripts" / "sample_events.py")
assert _spec and _spec.loader
sample_events = importlib.util.module_from_spec(_spec)
sys.modules["sample_events"] = sample_events
_spec.loader.exec_module(sample_events)

TEMPLATE = Template.read(ROOT / "template.yaml")


def committed(name: str) -> Any:
    return json.loads((ROOT / "events" / name).read_text())


def test_the_samples_are_what_the_code_sends_today() -> None:
    made = sample_events.samples()
    on_disk = {p.relative_to(ROOT / "events").as_posix() for p in (ROOT / "events").rglob("*.json")}
    assert on_disk == set(made), "events/ differs: run `python scripts/sample_events.py`"
    for name, event in made.items():
        assert committed(name) == event, f"events/{name} differs: run `python scripts/sample_events.py`"
    assert json.loads((ROOT / "env.json").read_text()) == sample_events.environment(), \
        "env.json differs: run `python scripts/sample_events.py`"


def test_api_samples_reach_their_function_and_mangum_reads_them_as_sent() -> None:
    from mangum import Mangum
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"method": request.method, "path": request.url.path, "query": request.url.query,
                             "headers": dict(request.headers), "body": (await request.body()).decode()})

    app = Mangum(Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])]), lifespan="off")
    routes = TEMPLATE.routes()
    for name, (function, method, path, query, headers, body) in sample_events.API.items():
        event = committed(name)
        route = next(r for r in routes if r.key == event["routeKey"])
        assert route.function == function and route.match(method, path) == event.get("pathParameters", {}), name
        answer = json.loads(app(event, None)["body"])
        assert (answer["method"], answer["path"], answer["query"]) == (method, path, query), name
        assert answer["body"] == (json.dumps(body) if body is not None else ""), name
        assert all(answer["headers"][k] == v for k, v in headers.items()), name


def test_sqs_samples_are_commands_of_their_queues_consumer() -> None:
    routes = AwsConfig(webhook_queue_url="WebhookDeliveryQueue", event_deletion_queue_url="EventDeletionQueue",
                       fan_out_queue_url="FanOutQueue").routes()
    functions = TEMPLATE.functions()
    seen = set()
    for name in sample_events.sqs_events():
        for record in committed(name)["Records"]:
            queue = record["eventSourceARN"].rsplit(":", 1)[1].removeprefix("headwater-").removesuffix(".fifo")
            assert queue in CONSUMERS and (queue, functions[CONSUMERS[queue]].queues[0][1]) in \
                functions[CONSUMERS[queue]].queues, name
            task, _ = _decode({"Body": record["body"], "MessageId": record["messageId"],
                               "Attributes": record["attributes"]})
            assert routes.get(task.command.name, "RunQueue") == queue.replace("RunOrderQueue", "RunQueue"), name
            if queue == "RunOrderQueue":  # due now, grouped by its lane
                assert record["attributes"]["MessageGroupId"] == task.command.lane, name
            seen.add(task.command.name)
    assert seen >= {"run_source", "timer_tick", "fan_out", "deliver_webhook", "delete_events", "purge_source"}


def test_the_schedule_sample_is_the_tick_of_its_scheduled_time() -> None:
    tick = from_message(committed("scheduler/timer_tick.json"))
    assert isinstance(tick, TimerTick) and tick.due_at == sample_events.NOW_MS / 1000


def test_env_json_sets_only_declared_variables_and_names_what_provisioning_makes() -> None:
    env = json.loads((ROOT / "env.json").read_text())
    functions = TEMPLATE.functions()
    assert set(env) == set(functions)
    for name, variables in env.items():
        assert set(variables) == set(functions[name].environment), f"{name}: sam local sets declared variables only"
        assert variables["HEADWATER_AWS_ENDPOINT_URL"] == sample_events.LOCAL_ENDPOINT
        # the runner through `sam local start-lambda`, by the logical id it knows it by
        assert variables["HEADWATER_LAMBDA_ENDPOINT_URL"] == sample_events.LOCAL_LAMBDA_ENDPOINT
        assert variables["HEADWATER_RUNNER_FUNCTION"] == "RunnerFunction" in functions
    variables = env["RunQueueFunction"]
    with sample_events._moto() as endpoint:
        provision(TEMPLATE, endpoint, "")

        def client(service: str) -> Any:
            return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                                aws_access_key_id="x", aws_secret_access_key="x")  # noqa: S106

        tables = client("dynamodb").list_tables()["TableNames"]
        for table in ("RESOURCES_TABLE", "EVENTS_TABLE", "IDEMPOTENCY_TABLE"):
            assert variables[f"HEADWATER_{table}"] in tables
        for queue in ("RUN_QUEUE_URL", "WEBHOOK_QUEUE_URL", "EVENT_DELETION_QUEUE_URL", "FAN_OUT_QUEUE_URL"):
            url = variables[f"HEADWATER_{queue}"]
            assert url.startswith(sample_events.LOCAL_ENDPOINT + "/")
            assert client("sqs").get_queue_url(QueueName=url.rsplit("/", 1)[1])["QueueUrl"].endswith(
                url.removeprefix(sample_events.LOCAL_ENDPOINT))
        for bucket in ("PAYLOAD_BUCKET", "BUNDLE_BUCKET"):
            client("s3").head_bucket(Bucket=variables[f"HEADWATER_{bucket}"])
        key = client("kms").describe_key(KeyId=variables["HEADWATER_KMS_KEY_ARN"])["KeyMetadata"]
        assert key["KeyState"] == "Enabled"
        client("scheduler").get_schedule_group(Name=variables["HEADWATER_SCHEDULE_GROUP"])
