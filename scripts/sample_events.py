"""`events/` and `env.json` for `sam local invoke` / `sam local start-api` (docs/aws.md, "sam local"),
made by the code that makes the real ones, so they match today's handlers:

- `events/api/*.json`: API Gateway HTTP API (payload 2.0) events, as the emulated gateway builds
  them for template.yaml's routes (`headwater.emulated.gateway.api_event`),
- `events/sqs/*.json`: SQS batches whose bodies are the commands' wire form as `SqsTaskQueue` sends
  them (`to_message` plus its envelope), on the queue of the consumer that handles them,
- `events/scheduler/timer_tick.json`: a timer schedule's input (`AwsScheduler`) as EventBridge
  Scheduler delivers it, the scheduled time filled in,
- `events/runner/describe.json`: a runner request as `LambdaRunner` sends it (a `describe` whose
  bundle travels inline, as after BUNDLE_MISSING),
- `env.json`: every function's environment from template.yaml, resolved for the emulated
  deployment's names (tables, queues, buckets, the secrets key by its alias), with
  `HEADWATER_AWS_ENDPOINT_URL` pointing at a moto server on the Docker host
  (`http://host.docker.internal:5000`) and the runner's Lambda API at `sam local start-lambda`
  (`HEADWATER_LAMBDA_ENDPOINT_URL`, `http://host.docker.internal:3001`, the runner by its logical id).

`python scripts/sample_events.py` writes them; `python scripts/sample_events.py provision URL`
creates template.yaml's tables, queues, buckets, schedule group and key on the moto server at URL
(`.venv/bin/moto_server -H 0.0.0.0 -p 5000`), which is what env.json names.
tests/aws/test_sample_events.py fails when they differ from what this script writes.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import logging
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"
ENV_JSON = ROOT / "env.json"
LOCAL_ENDPOINT = "http://host.docker.internal:5000"  # a moto server on the Docker host, from a container
LOCAL_LAMBDA_ENDPOINT = "http://host.docker.internal:3001"  # `sam local start-lambda` (its default port)
LOCAL_RUNNER = "RunnerFunction"  # start-lambda knows a function by its logical id

SOURCE_ID = "dc_N_wYnV35laFqysi0MNong6bU"
HTTP_SOURCE_ID = "dc_9T8yvN80TJHjCChbr_l2CQ3I"
ENDPOINT_ID = "en_EOo6XWiAxELWyQZYLgAeMwc"
API_KEY = "hw_dBo3nxVZdTn6WLESmDuprC5k9Qw2LxYtR8uJmF4aZs1"
ORG_ID = "o_obFZ9HJejSZU6uCH2QzXdISB"
NOW_MS = 1768478400000  # 2026-01-15T12:00:00Z
DOMAIN = "k3x9v2m7qd.execute-api.us-east-1.amazonaws.com"
ORDER = {"order_id": 1042, "status": "paid", "amount": {"value": "19.90", "currency": "EUR"}}
HELLO_TIMER = """export default {
  name: "Hello timer",
  key: "hello-timer",
  version: "0.0.1",
  description: "Emits a counter every minute",
  dedupe: "unique",
  props: {
    db: "$.service.db",
    timer: { type: "$.interface.timer", default: { intervalSeconds: 60 } },
  },
  async run(event) {
    const n = (this.db.get("n") ?? 0) + 1;
    this.db.set("n", n);
    this.$emit({ n, timestamp: event.timestamp }, { id: String(n), summary: `tick ${n}` });
  },
};
"""
# What esbuild makes of HELLO_TIMER (the bundle a describe carries; its hash is its sha256).
HELLO_TIMER_BUNDLE = """"use strict";
var __defProp = Object.defineProperty;
var __getOwnPropDesc = Object.getOwnPropertyDescriptor;
var __getOwnPropNames = Object.getOwnPropertyNames;
var __hasOwnProp = Object.prototype.hasOwnProperty;
var __export = (target, all) => {
  for (var name in all)
    __defProp(target, name, { get: all[name], enumerable: true });
};
var __copyProps = (to, from, except, desc) => {
  if (from && typeof from === "object" || typeof from === "function") {
    for (let key of __getOwnPropNames(from))
      if (!__hasOwnProp.call(to, key) && key !== except)
@COPY@
  }
  return to;
};
var __toCommonJS = (mod) => __copyProps(__defProp({}, "__esModule", { value: true }), mod);
var component_exports = {};
__export(component_exports, {
  default: () => component_default
});
module.exports = __toCommonJS(component_exports);
var component_default = {
  name: "Hello timer",
  key: "hello-timer",
  version: "0.0.1",
  description: "Emits a counter every minute",
  dedupe: "unique",
  props: {
    db: "$.service.db",
    timer: { type: "$.interface.timer", default: { intervalSeconds: 60 } }
  },
  async run(event) {
    const n = (this.db.get("n") ?? 0) + 1;
    this.db.set("n", n);
    this.$emit({ n, timestamp: event.timestamp }, { id: String(n), summary: `tick ${n}` });
  }
};
""".replace("@COPY@", "        __defProp(to, key, { get: () => from[key], "
                      "enumerable: !(desc = __getOwnPropDesc(from, key)) || desc.enumerable });")

# file -> (function, method, path, query, headers, body): the API samples and who serves them
API: dict[str, tuple[str, str, str, str, dict[str, str], Any]] = {
    "api/get_users_me.json": ("UsersFunction", "GET", "/v1/users/me", "", {}, None),
    "api/post_components.json": ("ComponentsFunction", "POST", "/v1/components", "", {}, {
        "component_code": HELLO_TIMER,
        "component_url": "https://github.com/example/headwater-components/blob/main/hello-timer.mjs"}),
    "api/post_sources.json": ("SourcesFunction", "POST", "/v1/sources", f"org_id={ORG_ID}", {}, {
        "component_id": "sc_BXpYj56O1MQLPAh6Pjre97a6", "name": "Hello timer (every 30 s)",
        "configured_props": {"timer": {"intervalSeconds": 30}}}),
    "api/get_source_sse.json": ("EventsFunction", "GET", f"/v1/sources/{SOURCE_ID}/sse", "",
                                {"accept": "text/event-stream", "last-event-id": f"{NOW_MS - 60000}-0"}, None),
    "api/http_ingest_post.json": ("HttpIngestFunction", "POST", f"/http/{ENDPOINT_ID}", "source=shop",
                                  {"user-agent": "Shopify-Captain-Hook", "x-shop-signature": "sha256=9b2f6c0d4e1a"},
                                  ORDER),
}


def api_events() -> dict[str, dict[str, Any]]:
    from headwater.emulated.template import Template

    routes = Template.read(ROOT / "template.yaml").routes()
    out = {}
    for name, (function, method, path, query, extra, body) in API.items():
        from headwater.emulated.gateway import api_event

        route, params = next((r, p) for r in routes if (p := r.match(method, path) if r.path else {}) is not None)
        assert route.function == function, (name, route.function)
        data = json.dumps(body).encode() if body is not None else b""
        headers = {"accept": "application/json", "accept-encoding": "gzip, deflate", "host": DOMAIN,
                   "user-agent": "headwater-client/0.1 python-httpx/0.28.1", "x-forwarded-for": "203.0.113.24",
                   "x-forwarded-port": "443", "x-forwarded-proto": "https",
                   "x-amzn-trace-id": "Root=1-6968d6c0-3f1c7a5b2e8d4c6f9a0b1c2d"}
        if not path.startswith("/http/"):
            headers["authorization"] = f"Bearer {API_KEY}"
        if data:
            headers |= {"content-type": "application/json", "content-length": str(len(data))}
        headers |= extra
        scope = {"method": method, "path": path, "query_string": query.encode(), "client": ("203.0.113.24", 0),
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        event = api_event(scope, data, route, params, DOMAIN)
        # What API Gateway fills in per request, fixed here; a text body as API Gateway sends it.
        event["requestContext"] |= {"apiId": DOMAIN.split(".")[0], "requestId": "EbTQFhhdoAMEJSA=",
                                    "time": "15/Jan/2026:12:00:00 +0000", "timeEpoch": NOW_MS}
        if data:
            event["body"], event["isBase64Encoded"] = base64.b64decode(event["body"]).decode(), False
        else:
            event.pop("body")
        out[name] = event
    return out


def _record(queue: str, n: int, body: str) -> dict[str, Any]:
    """An SQS record as the event source mapping hands it over (the emulator's SqsPoller too); from
    the FIFO run queue with its group (the source id), deduplication id and sequence number."""
    fifo = queue == "RunOrderQueue"
    name = f"headwater-{queue}" + (".fifo" if fifo else "")  # as CloudFormation names a FIFO queue
    attributes = {"ApproximateReceiveCount": "1", "SentTimestamp": str(NOW_MS),
                  "SenderId": "AROAEXAMPLEROLEID:headwater-HttpIngestFunction",
                  "ApproximateFirstReceiveTimestamp": str(NOW_MS + 12)}
    if fifo:
        attributes |= {"MessageGroupId": json.loads(body)["source_id"],
                       "MessageDeduplicationId": f"{n:032x}", "SequenceNumber": f"{18_890_000_000_000_000_000 + n}"}
    return {
        "messageId": f"3f8c2a1e-5b7d-4c9e-8a6f-{n:012d}", "receiptHandle": base64.b64encode(
            f"{queue}-{n}-receipt-handle-sample".encode()).decode(), "body": body,
        "attributes": attributes,
        "messageAttributes": {}, "md5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 - SQS's own
        "eventSource": "aws:sqs", "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{name}",
        "awsRegion": "us-east-1",
    }


def sqs_events() -> dict[str, dict[str, Any]]:
    from headwater.adapters.aws.sqs_queue import _body
    from headwater.domain.commands import (
        Command,
        DeleteEvents,
        DeliverWebhook,
        FanOut,
        PurgeSource,
        RunSource,
        TimerTick,
    )
    from headwater.domain.http_interface import http_event
    from headwater.domain.models import StoredEvent
    from headwater.domain.routing import carried

    now = NOW_MS / 1000
    request = http_event("POST", "/", [("source", "shop")],
                         [("content-type", "application/json"), ("user-agent", "Shopify-Captain-Hook")],
                         json.dumps(ORDER).encode())
    stored = StoredEvent(f"{NOW_MS}-0", NOW_MS, {"n": 7, "timestamp": int(now)}, {"summary": "tick 7", "id": "7"})
    batches: dict[str, tuple[str, list[tuple[Command, str | None]]]] = {
        "sqs/run_source_http.json": ("RunOrderQueue", [  # due now: the FIFO run queue
            (RunSource(HTTP_SOURCE_ID, request, 30000, "http", reserved_by="u_KQ3x9v2m7qdPz0Lr8sTgY1aB",
                       reserved_day="2026-01-15"), "http:EbTQIlaAoAMEJUQ="),
        ]),
        "sqs/timer_tick_chain.json": ("RunQueue", [(TimerTick(SOURCE_ID, now, "tok_4b1f0c"), None)]),
        "sqs/fan_out.json": ("FanOutQueue", [
            (FanOut(SOURCE_ID, "u_KQ3x9v2m7qdPz0Lr8sTgY1aB", "", (stored.id,), events=(carried(stored),)), None),
        ]),
        "sqs/deliver_webhook.json": ("WebhookDeliveryQueue", [(DeliverWebhook("dlv_PXnxMTGdg6kYilQ1kSwJdK3k"), None)]),
        "sqs/delete_events.json": ("EventDeletionQueue", [
            (DeleteEvents(SOURCE_ID, "", f"{NOW_MS - 86400000}-0", f"{NOW_MS}-0"), None),
            (PurgeSource("dc_Zq0pW8e1RtY6uI3oP9aS2dF4"), None),
        ]),
    }
    out = {}
    for name, (queue, commands) in batches.items():
        records = [_record(queue, i + 1, _body(command, task_id, now)) for i, (command, task_id) in enumerate(commands)]
        out[name] = {"Records": records}
    return out


def scheduler_events() -> dict[str, dict[str, Any]]:
    from headwater.adapters.aws.scheduler import SCHEDULED_TIME
    from headwater.domain.commands import TimerTick, to_message

    # The schedule's Input (AwsScheduler._target), as Scheduler fills the placeholder in.
    text = json.dumps({**to_message(TimerTick(SOURCE_ID, 0.0)), "due_at": SCHEDULED_TIME})
    return {"scheduler/timer_tick.json": json.loads(text.replace(SCHEDULED_TIME, "2026-01-15T12:00:00Z"))}


def runner_events() -> dict[str, dict[str, Any]]:
    from headwater.adapters.aws.lambda_runner import LambdaRunner
    from headwater.ports import Bundle

    sent: list[dict[str, Any]] = []

    def invoke(request: dict[str, Any], account: str) -> dict[str, Any]:
        sent.append(json.loads(json.dumps(request)))
        if "code" not in request["bundle"]:
            return {"ok": False, "error": {"code": "BUNDLE_MISSING", "message": "not in this container"}}
        return {"ok": True, "result": {"name": "Hello timer", "key": "hello-timer", "version": "0.0.1"}}

    bundle = Bundle(hashlib.sha256(HELLO_TIMER_BUNDLE.encode()).hexdigest(), HELLO_TIMER_BUNDLE)
    with contextlib.suppress(Exception):  # only the request matters here, not what is made of the answer
        LambdaRunner(invoke).describe(bundle, 10000)
    return {"runner/describe.json": sent[-1]}


def samples() -> dict[str, dict[str, Any]]:
    return {**api_events(), **sqs_events(), **scheduler_events(), **runner_events()}


@contextmanager
def _moto() -> Iterator[str]:
    from headwater.emulated.deployment import start_moto

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    server = start_moto()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    # moto keeps its state per process, not per server: a clean one before and after
    reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=30).close()
    try:
        yield endpoint
    finally:
        urllib.request.urlopen(reset, timeout=30).close()
        server.stop()


def environment(endpoint: str = LOCAL_ENDPOINT) -> dict[str, dict[str, str]]:
    """env.json: {function: {variable: value}} for every function, each variable one template.yaml
    declares for it (sam local sets no other), resolved against the emulated deployment's names."""
    from headwater.emulated.deployment import REGION, STACK, Resolver, provision
    from headwater.emulated.template import Template

    template = Template.read(ROOT / "template.yaml")
    with _moto() as scratch:
        deployment = provision(template, scratch, "")
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(scratch))
    urls = {name: endpoint + url.removeprefix(origin) for name, url in deployment.queue_urls.items()}
    arns = dict(deployment.arns)
    alias = template.resources["SecretsKeyAlias"]["Properties"]["AliasName"]["Fn::Sub"]
    arns["SecretsKey"] = f"arn:aws:kms:{REGION}:123456789012:{alias.replace('${AWS::StackName}', STACK)}"
    resolver = Resolver(template, dict(deployment.names), urls, arns, {"PublicUrl": ""})
    out: dict[str, dict[str, str]] = {}
    for name, function in sorted(template.functions().items()):
        env = {k: str(resolver.resolve(v)) for k, v in function.environment.items()}
        if "HEADWATER_AWS_ENDPOINT_URL" in env:
            env["HEADWATER_AWS_ENDPOINT_URL"] = endpoint
        if "HEADWATER_LAMBDA_ENDPOINT_URL" in env:
            env["HEADWATER_LAMBDA_ENDPOINT_URL"] = LOCAL_LAMBDA_ENDPOINT
            env["HEADWATER_RUNNER_FUNCTION"] = LOCAL_RUNNER
        out[name] = dict(sorted(env.items()))
    return out


def write() -> None:
    for name, event in samples().items():
        path = EVENTS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(event, indent=2, ensure_ascii=False) + "\n")
    ENV_JSON.write_text(json.dumps(environment(), indent=2) + "\n")
    print(f"wrote {len(samples())} events under events/ and env.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    up = sub.add_parser("provision", help="template.yaml's resources on a moto server (what env.json names)")
    up.add_argument("endpoint", help="e.g. http://127.0.0.1:5000 (moto_server -H 0.0.0.0 -p 5000)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    if args.command == "provision":
        from headwater.emulated.deployment import provision
        from headwater.emulated.template import Template

        provision(Template.read(ROOT / "template.yaml"), args.endpoint, "")
        print(f"provisioned template.yaml's tables, queues, buckets, schedule group and key on {args.endpoint}")
    else:
        write()


if __name__ == "__main__":
    main()
