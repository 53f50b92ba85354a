"""What one event costs on AWS, measured: the emulated deployment (HEADWATER_BACKEND=aws-emulated:
moto provisioned from template.yaml, the functions' own handlers, the pollers) runs in this
process with every boto3 call metered (bench/aws_meter.py: DynamoDB units from item sizes, SQS
64 KB chunks, Lambda invocations and GB-s, S3, KMS, Scheduler), for named scenarios, priced
from the table in docs/aws.md (Cost). Counts are per event, after `--warmup` events that bring
the source to its steady state (a full channel, a full dedupe window).

Beyond the calls: CloudWatch Logs (the bytes each invocation writes, as the meter counts them: the
handler's own lines, Lambda's START/END/REPORT, API Gateway's access log line; ingested, and
stored for the template's retention), X-Ray traces (the invocations of `Tracing: Active`
functions that start one, recorded at the default sampling rule, 1 a second and 5% of the rest,
at the rate the mode assumes) and Lambda's init phase (billed since August 2025: each function's
init time, measured as `bench/aws_cold_start.py --cpu` does, times the mode's cold-start fraction). The
two modes:

- `one_by_one` (the headline): each event after the one before it was delivered, a source at low
  traffic (`--one-by-one-rate` events a second, by default 0.2: each trace is recorded, as the
  sampling rule's first a second) whose run queue batches hold one event; 1% of invocations
  cold (`--one-by-one-cold`: an idle gap longer than Lambda keeps an environment, or its
  recycling, once in 100 events);
- `back_to_back`: events posted at once, a busy source (`--back-to-back-rate`, 100 a second, the
  default ingest budget: about 5% of traces recorded) whose batches hold the events that came
  while the one before ran; 0.1% of invocations cold.

`custom_response` (each request waits for its run) and `timer_tick` (a tick at a time) make the
same calls either way: they are measured once and priced under both modes' assumptions.

Scenarios:
- `http_default`: an HTTP source answering the default response, a 1 KB JSON body, one webhook
  subscribed (its delivery included; the receiver answers after `--receiver-ms`);
- `webhook_retry`: `http_default` with a receiver that fails each event's first attempt (503) and
  takes the second: the failed attempt, the retry through the delivery queue and function, and
  (since a webhook that failed lately is left to the queue) every later first attempt there too;
- `custom_response`: an HTTP source with `customResponse` (the run inline in the ingest function),
  1 KB body, no subscriber;
- `timer_tick`: a timer source's tick as EventBridge Scheduler fires it (the run emits a small event).

    .venv/bin/python bench/aws_cost.py [--scenarios http_default,timer_tick] [--events 20] [--warmup 110]
    .venv/bin/python bench/aws_cost.py --json        # the counts and prices as JSON
    .venv/bin/python bench/aws_cost.py --modes one_by_one  # only the headline mode
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.aws_cold_start import init_ms  # noqa: E402
from bench.aws_meter import Meter, Tally, log_bytes, platform_log_lines  # noqa: E402
from bench.ingest import ECHO, PLAIN  # noqa: E402
from headwater.emulated.template import Template  # noqa: E402
from tests.conftest import Server, client_for, free_port, new_user  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "aws.md"
SCENARIOS = ("http_default", "webhook_retry", "custom_response", "timer_tick")
MODES = ("one_by_one", "back_to_back")
TARGETS = {"http_default": 10.0, "custom_response": 10.0, "timer_tick": 10.0, "webhook_retry": 15.0}
GB = 2**30
WORDS = ("blue", "cotton", "shirt", "large", "slim", "fit", "organic", "wool", "socks", "pack", "leather", "belt",
         "brown", "classic", "canvas", "sneakers", "white", "running", "shoes", "trail", "waterproof", "jacket",
         "hooded", "fleece", "scarf", "knit", "gift", "wrap")


def order_event(i: int) -> dict[str, Any]:
    """A 1 KB JSON body as a shop's webhook sends one (random ids, a few words), different for each
    event: it compresses about as real bodies do (to 56%), where 1,000 repeated letters would
    compress to almost nothing and flatter every store that compresses."""
    r = random.Random(i)

    def hexs(n: int) -> str:
        return f"{r.getrandbits(4 * n):0{n}x}"

    def words(n: int) -> str:
        return " ".join(r.choice(WORDS) for _ in range(n))

    items = [{"id": "li_" + hexs(16), "sku": hexs(8).upper(), "title": words(3), "quantity": r.randint(1, 4),
              "unit_price": {"amount": r.randint(199, 19999), "currency": "EUR"}} for _ in range(3)]
    return {"id": "evt_" + hexs(24), "type": "order.created", "created": 1795800000 + i * 7, "livemode": False,
            "data": {"object": {
                "id": "ord_" + hexs(20), "status": "paid",
                "customer": {"id": "cus_" + hexs(14), "email": f"{hexs(8)}@example.com", "name": words(2).title()},
                "items": items,
                "shipping": {"line1": f"{r.randint(1, 300)} {words(2).title()} Street", "city": "Lyon",
                             "postal_code": str(r.randint(10000, 99999)), "country": "FR"},
                "total": {"amount": sum(x["unit_price"]["amount"] * x["quantity"] for x in items), "currency": "EUR"},
                "note": words(8), "metadata": {"channel": "web", "campaign": words(2), "ref": hexs(16)}}}}
TIMER = """export default {
  name: "Bench timer", version: "1.0.0",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 60 } } },
  async run(event) { this.$emit({ tick: event.timestamp }, { summary: "tick" }) },
};"""


def prices(path: Path = DOCS) -> dict[str, float]:
    """The price table of docs/aws.md: rows `| \\`key\\` | USD | per N unit |`, as USD per unit."""
    out = {}
    for key, usd, per in re.findall(r"^\| `(\w+)` \| \$?([\d.]+) \| ([\d,]+) ", path.read_text(), re.M):
        out[key] = float(usd) / float(per.replace(",", ""))
    return out


# ---- the emulated deployment in this process, metered

@dataclass
class Stack:
    server: Server
    meter: Meter
    functions: Any
    queue_urls: dict[str, str]
    sqs: Any  # unmetered
    scheduler: Any  # unmetered
    group: str
    moto: _Moto


@contextmanager
def emulated_stack(data_dir: Path) -> Iterator[Stack]:
    import boto3
    import uvicorn

    port = free_port()
    os.environ.update({"HEADWATER_BACKEND": "aws-emulated", "HEADWATER_HOST": "127.0.0.1",
                       "HEADWATER_PORT": str(port), "HEADWATER_DATA_DIR": str(data_dir),
                       "HEADWATER_WEBHOOK_RETRY_SCHEDULE": "1,1,1"})
    os.environ.setdefault("HEADWATER_INGEST_RATE", "0")  # no ingest budget unless the caller sets one
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"  # their EMF lines are log lines on AWS: counted
    from headwater.adapters.aws.local_runner_function import LocalRunnerFunction
    from headwater.emulated.deployment import provision
    from headwater.emulated.functions import Functions
    from headwater.emulated.gateway import Gateway
    from headwater.emulated.pollers import SqsPoller
    from headwater.services.registry import publish_shipped_registry
    from headwater.settings import Settings

    for noisy in ("werkzeug", "mangum"):  # a line per moto call and per request
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings = Settings()
    moto = _moto_process()  # its own process: its work must not hold this one's interpreter
    template = Template.read()
    memory = memory_of(template)
    deployment = provision(template, moto.endpoint, settings.public_url)
    deployment.apply()
    deployment.save(data_dir)
    http_functions = {route.function for route in template.routes()}
    consumers = {deployment.queue_urls[queue]: f.name for f in template.functions().values() for queue, _ in f.queues}
    api = next(iter(template.of_type("AWS::Serverless::HttpApi").values()))["Properties"]
    meter = Meter(deployment.endpoint, memory, consumers, tracing_of(template),
                  api.get("AccessLogSettings", {}).get("Format", ""))
    meter.install()  # before any client of the functions is built
    meter.install_logs()  # before the handlers' loggers take stdout
    meter.install_pools()

    run = LocalRunnerFunction.invoke

    def metered_runner(self: LocalRunnerFunction, request: dict[str, Any], account: str) -> dict[str, Any]:
        with meter.invocation("RunnerFunction"):
            return run(self, request, account)

    LocalRunnerFunction.invoke = metered_runner  # type: ignore[method-assign]

    class MeteredFunctions(Functions):
        def invoke(self, name: str, event: Any) -> Any:
            with meter.invocation(name, api=name in http_functions, scheduled=name == "TimerTickFunction"):
                return super().invoke(name, event)

    send = httpx.Client.send

    def metered_send(self: httpx.Client, *args: Any, **kwargs: Any) -> httpx.Response:
        started = time.perf_counter()
        try:
            return send(self, *args, **kwargs)
        finally:
            meter.waited(started, time.perf_counter())

    httpx.Client.send = metered_send  # type: ignore[method-assign]
    asend = httpx.AsyncClient.send

    async def metered_asend(self: httpx.AsyncClient, *args: Any, **kwargs: Any) -> httpx.Response:
        started = time.perf_counter()
        try:
            return await asend(self, *args, **kwargs)
        finally:
            meter.waited(started, time.perf_counter())

    httpx.AsyncClient.send = metered_asend  # type: ignore[method-assign]

    from headwater.entrypoints.aws import runtime

    services = runtime.services()
    publish_shipped_registry(services.registry, services.settings)
    functions = MeteredFunctions(template.functions(), deployment.arns)
    sqs = boto3.session.Session().client("sqs", endpoint_url=deployment.endpoint)
    pollers = [SqsPoller(boto3.client("sqs", endpoint_url=deployment.endpoint), functions, f.name,
                         deployment.queue_urls[queue], deployment.arns[queue], batch)
               for f in functions.functions.values() for queue, batch in f.queues]
    for poller in pollers:
        poller.start()
    gateway = Gateway(template.routes(), functions, f"127.0.0.1:{port}")
    server = uvicorn.Server(uvicorn.Config(gateway, host="127.0.0.1", port=port, log_level="warning",
                                          access_log=False))
    thread = threading.Thread(target=server.run, name="gateway", daemon=True)
    thread.start()
    env = {k: v for k, v in os.environ.items()}
    hw = Server(base_url=f"http://127.0.0.1:{port}", data_dir=data_dir, port=port, env=env)
    try:
        _wait(lambda: _healthy(hw.base_url), 60, "the gateway to answer")
        group = next(iter(template.of_type("AWS::Scheduler::ScheduleGroup")))
        yield Stack(hw, meter, functions, deployment.queue_urls, sqs,
                    boto3.session.Session().client("scheduler", endpoint_url=deployment.endpoint),
                    deployment.names[group], moto)
    finally:
        server.should_exit = True
        thread.join(10)
        for poller in pollers:
            poller.stop()
        functions.close()
        runtime.services().close()
        moto.process.terminate()
        moto.process.wait(10)
        meter.uninstall_logs()


def _resolved(value: Any, parameters: dict[str, str]) -> Any:
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return parameters.get(value["Ref"], value)
    return value


def tracing_of(template: Any) -> dict[str, str]:
    """Each function's X-Ray mode (its own `Tracing`, else Globals', else Lambda's PassThrough)."""
    parameters = template.parameter_defaults()
    default = _resolved(template.body.get("Globals", {}).get("Function", {}).get("Tracing", "PassThrough"), parameters)
    return {name: str(_resolved(r["Properties"].get("Tracing", default), parameters))
            for name, r in template.of_type("AWS::Serverless::Function").items()}


def memory_of(template: Any) -> dict[str, int]:
    globals_ = template.body.get("Globals", {}).get("Function", {})
    return {name: int(r["Properties"].get("MemorySize", globals_.get("MemorySize", 128)))
            for name, r in template.of_type("AWS::Serverless::Function").items()}


def log_retention_days(template: Any) -> int:
    return int(template.parameter_defaults().get("LogRetentionDays") or 30)


@dataclass
class _Moto:
    process: subprocess.Popen[str]
    endpoint: str


    def fallbacks_due(self, at_most: int = 1_000_000) -> int:
        """Makes the inline runs' fallback messages due now (`at_most` of them), as they are 15
        minutes later: each customResponse request sent one (delayed 900 s), which was received,
        found done and deleted unrun when it arrived; its cost was the event's too, and a settle
        leaves delayed messages out. Since the fallback is an outbox item (sqs_queue.py
        `ingest_answered`), deleted when the run is done, there are none, unless a code change
        brings them back. Returns how many."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{at_most}\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())


_MOTO_CHILD = """
import json, sys
from headwater.emulated.deployment import start_moto
from moto.sqs.models import sqs_backends
server = start_moto()
print('http://%s:%d' % server.get_host_and_port(), flush=True)
for line in sys.stdin:
    at_most, due = int(line), 0
    for regions in sqs_backends.values():
        for backend in regions.values():
            for queue in backend.queues.values():
                for message in list(queue._messages):
                    try:
                        inline = json.loads(message.body).get('inline') is True
                    except (ValueError, AttributeError):
                        inline = False
                    if inline and message.delayed_until and due < at_most:
                        message.delayed_until = 0
                        due += 1
    print(due, flush=True)
"""


def _moto_process() -> _Moto:
    """The emulated deployment's moto server (headwater.emulated.deployment.start_moto) in a child,
    which makes the delayed fallback messages due when told (`_Moto.fallbacks_due`)."""
    process = subprocess.Popen([sys.executable, "-c", _MOTO_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None
    return _Moto(process, process.stdout.readline().strip())


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _wait(done: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s for {what}")
        time.sleep(0.1)


def settle(stack: Stack, quiet_s: float = 1.5, timeout_s: float = 120) -> None:
    """Until every queue is empty (delayed messages aside) and no AWS call was made for `quiet_s`."""
    def idle() -> bool:
        for url in stack.queue_urls.values():
            a = stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
            if int(a["ApproximateNumberOfMessages"]) or int(a["ApproximateNumberOfMessagesNotVisible"]):
                return False
        return time.monotonic() - stack.meter.last_call > quiet_s

    _wait(idle, timeout_s, "the deployment to settle")


class Receiver:
    """A webhook endpoint on loopback that answers 200 after `delay_s` (a receiver's round trip);
    with `fail_first`, 503 to the first attempt of each delivery (by its `webhook-id`). `count`:
    the deliveries it took."""

    def __init__(self, delay_s: float, fail_first: bool = False) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.count = 0
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                self.rfile.read(int(self.headers.get("content-length", 0)))
                time.sleep(delay_s)
                delivery = self.headers.get("webhook-id", "")
                with receiver.lock:
                    taken = not fail_first or delivery in receiver.seen
                    receiver.seen.add(delivery)
                    receiver.count += taken
                self.send_response(200 if taken else 503)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


# ---- scenarios: each returns the tallies of `events` events, by function

_SENT = itertools.count()


def _post_events(url: str, n: int, receiver: Receiver | None = None) -> None:
    """`n` events; with `receiver`, each once the one before it was delivered."""
    with httpx.Client(timeout=60) as client:
        for _ in range(n):
            taken = receiver.count if receiver else 0
            response = client.post(url, json=order_event(next(_SENT)))
            assert response.status_code == 200, response.text
            if receiver is not None:
                _wait(lambda taken=taken: receiver.count > taken, 60, "the event's delivery")


def http_source(stack: Stack, api: httpx.Client, code: str, events: int, warmup: int,
                receiver_ms: float | None, fail_first: bool = False, one_by_one: bool = False) -> dict[str, Tally]:
    created = api.post("/sources", json={"component_code": code})
    assert created.status_code == 200, created.text
    source = created.json()["data"]
    url = source["configured_props"]["http"]["endpoint_url"]
    receiver = None
    if receiver_ms is not None:
        receiver = Receiver(receiver_ms / 1000, fail_first)
        hook = api.post("/webhooks", params={"url": receiver.url, "name": "bench"})
        assert hook.status_code == 200, hook.text
        subscribed = api.post("/subscriptions", params={"emitter_id": source["id"],
                                                        "listener_id": hook.json()["data"]["id"]})
        assert subscribed.status_code == 200, subscribed.text
    try:
        _post_events(url, warmup)
        if receiver is not None:
            _wait(lambda: receiver.count >= warmup, 300, "the warm-up deliveries")
        settle(stack)
        stack.moto.fallbacks_due()
        settle(stack)
        stack.meter.reset()
        _post_events(url, events, receiver if one_by_one else None)
        if receiver is not None:
            _wait(lambda: receiver.count >= warmup + events, 300, "the deliveries")
        settle(stack)
        # one by one, each fallback arrives alone (15 minutes after its request), as its event came
        while stack.moto.fallbacks_due(1 if one_by_one else 1_000_000):
            settle(stack, quiet_s=0.8)
        return stack.meter.tally()
    finally:
        if receiver is not None:
            receiver.close()


def timer_ticks(stack: Stack, api: httpx.Client, events: int, warmup: int) -> dict[str, Tally]:
    created = api.post("/sources", json={"component_code": TIMER})
    assert created.status_code == 200, created.text
    source_id = created.json()["data"]["id"]

    def schedules() -> list[dict[str, Any]]:  # made by the run queue's sync_schedule
        return [s for s in stack.scheduler.list_schedules(GroupName=stack.group)["Schedules"]
                if s["Name"].startswith(source_id)]

    _wait(schedules, 60, f"the schedule of {source_id}")
    target = stack.scheduler.get_schedule(Name=schedules()[0]["Name"], GroupName=stack.group)["Target"]
    due = int(time.time()) // 60 * 60 + 60

    def tick(i: int) -> None:  # as EventBridge Scheduler fires it (emulated/pollers.py SchedulePoller._fire)
        scheduled = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due + 60 * i))
        text = target["Input"].replace("<aws.scheduler.scheduled-time>", scheduled)
        text = text.replace("<aws.scheduler.execution-id>", f"bench-{i}")
        stack.functions.invoke(stack.functions.by_arn(target["Arn"]), json.loads(text))
        settle(stack, quiet_s=0.8)

    for i in range(warmup):
        tick(i)
    stack.meter.reset()
    for i in range(warmup, warmup + events):
        tick(i)
    return stack.meter.tally()


def run_scenarios(names: list[str], modes: list[str], events: int, warmup: int, receiver_ms: float
                  ) -> Iterator[tuple[str, str, dict[str, Tally]]]:
    """Each (mode, scenario)'s tallies (of `events` events, by function) as soon as measured;
    `custom_response` and `timer_tick` once, for the first mode (they make the same calls in both,
    but for custom_response's fallback messages, which arrive one by one in that mode)."""
    with emulated_stack(Path(tempfile.mkdtemp(prefix="aws-cost-"))) as stack:
        user = new_user(stack.server, tier="paid")
        with client_for(stack.server, user.api_key) as api:
            for mode in modes:
                one_by_one = mode == "one_by_one"
                if "http_default" in names:
                    yield mode, "http_default", http_source(stack, api, PLAIN, events, warmup, receiver_ms,
                                                            one_by_one=one_by_one)
                if "webhook_retry" in names:
                    yield mode, "webhook_retry", http_source(stack, api, PLAIN, events, warmup, receiver_ms,
                                                             fail_first=True, one_by_one=one_by_one)
                if mode != modes[0]:
                    continue
                if "custom_response" in names:
                    yield mode, "custom_response", http_source(stack, api, ECHO, events, warmup, None,
                                                               one_by_one=one_by_one)
                if "timer_tick" in names:
                    yield mode, "timer_tick", timer_ticks(stack, api, events, min(warmup, 5))


# ---- pricing and the report

ARCH_PRICE = "lambda_gb_s_x86"


@dataclass
class Assumptions:
    """What the calls alone do not say: the rate (X-Ray sampling), the cold starts (init billing),
    the log retention (storage)."""

    mode: str
    events_per_s: float
    cold_fraction: float
    init_ms: dict[str, float]  # by function, measured
    memory_mb: dict[str, int]
    retention_days: int

    def recorded_fraction(self, trace_starts_per_event: float) -> float:
        """Of the traces started, the share X-Ray's default rule records: the first each second
        (the reservoir) and 5% of the rest, at this many starts a second."""
        rate = trace_starts_per_event * self.events_per_s
        if rate <= 0:
            return 0.0
        return (min(rate, 1.0) + 0.05 * max(0.0, rate - 1.0)) / rate


def priced(tally: Tally, price: dict[str, float], model: Assumptions | None = None, function: str = "",
           recorded: float = 1.0) -> dict[str, float]:
    """Dollars by service; with `model`, logs, traces (`recorded`: the share of started traces the
    sampling rule records) and the init phase of `function`'s cold starts too."""
    out = {
        "api_gateway": tally.api_requests * price["apigw_http_request"],
        "lambda": tally.invocations * price["lambda_request"] + tally.gb_s * price[ARCH_PRICE],
        "dynamodb": tally.wru * price["ddb_write_unit"] + tally.rru * price["ddb_read_unit"],
        "sqs": tally.sqs * price["sqs_standard_request"] + tally.sqs_fifo * price["sqs_fifo_request"],
        "scheduler": tally.scheduler_invocations * price["scheduler_invocation"],
        "s3": tally.s3_put * price["s3_put_request"] + tally.s3_get * price["s3_get_request"],
        "kms": tally.kms * price["kms_request"],
    }
    if model is None:
        return out
    cold_log_bytes = (log_bytes(platform_log_lines(128, 10, False, cold=True))
                      - log_bytes(platform_log_lines(128, 10, False)))
    logged = (tally.log_bytes + tally.invocations * model.cold_fraction * cold_log_bytes) / GB
    out["logs"] = logged * (price["cw_logs_ingest_gb"] + price["cw_logs_storage_gb_month"] * model.retention_days / 30)
    out["xray"] = tally.trace_starts * recorded * price["xray_trace_recorded"]
    init_s = model.init_ms.get(function, 0.0) / 1000
    out["init"] = (tally.invocations * model.cold_fraction * init_s * model.memory_mb.get(function, 128) / 1024
                   * price[ARCH_PRICE])
    return out


def per_event(tallies: dict[str, Tally], events: int) -> dict[str, Tally]:
    out = {}
    for name, tally in sorted(tallies.items()):
        t = Tally()
        for field, value in tally.units().items():
            setattr(t, field, value / events)
        t.calls = {k: v / events for k, v in tally.calls.items()}
        t.units_by_call = {k: v / events for k, v in tally.units_by_call.items()}
        out[name] = t
    return out


def _total(tallies: dict[str, Tally]) -> Tally:
    total = Tally()
    for t in tallies.values():
        total.add(t)
    return total


def costs(tallies: dict[str, Tally], price: dict[str, float], model: Assumptions) -> dict[str, dict[str, float]]:
    """Dollars by service, by function."""
    recorded = model.recorded_fraction(_total(tallies).trace_starts)
    return {name: priced(t, price, model, name, recorded) for name, t in tallies.items()}


def table(name: str, tallies: dict[str, Tally], price: dict[str, float], model: Assumptions) -> str:
    lines = [f"**{name}**, {model.mode.replace('_', ' ')} (per event; $ per million events)", "",
             "| Function | Invocations | Billed ms | GB-s | Write units | Read units | SQS requests | S3 / KMS "
             "| Log bytes | Traces | $ / M |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    by_function = costs(tallies, price, model)
    recorded = model.recorded_fraction(_total(tallies).trace_starts)
    total = Tally()
    for function, t in tallies.items():
        if not any((t.invocations, t.wru, t.rru, t.sqs, t.sqs_fifo, t.s3_put, t.s3_get, t.kms)):
            continue
        total.add(t)
        usd = sum(by_function[function].values()) * 1e6
        lines.append(f"| {function} | {t.invocations:.2f} | {t.billed_ms:.0f} | {t.gb_s:.4f} | {t.wru:.1f} | "
                     f"{t.rru:.1f} | {t.sqs + t.sqs_fifo:.2f} | {t.s3_put + t.s3_get:.2f} / {t.kms:.2f} | "
                     f"{t.log_bytes:.0f} | {t.trace_starts * recorded:.2f} | {usd:.2f} |")
    by_service = _by_service(by_function)
    lines.append(f"| **total** | {total.invocations:.2f} | {total.billed_ms:.0f} | {total.gb_s:.4f} | "
                 f"{total.wru:.1f} | {total.rru:.1f} | {total.sqs + total.sqs_fifo:.2f} | "
                 f"{total.s3_put + total.s3_get:.2f} / {total.kms:.2f} | {total.log_bytes:.0f} | "
                 f"{total.trace_starts * recorded:.2f} | **{sum(by_service.values()) * 1e6:.2f}** |")
    lines += ["", "By service, $ per million events: " + ", ".join(
        f"{k} {v * 1e6:.2f}" for k, v in by_service.items() if v), "",
        f"Assumed: {model.events_per_s:g} events a second ({recorded:.0%} of the "
        f"{total.trace_starts:.2f} traces an event starts recorded), {model.cold_fraction:.1%} of invocations "
        f"cold (init " + ", ".join(f"{k} {v:.0f} ms" for k, v in sorted(model.init_ms.items()) if k in tallies)
        + f"), logs kept {model.retention_days} days", "",
        "Calls per event: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(total.calls.items())), "",
        "DynamoDB units per event by call: " + ", ".join(
            f"{k} {v:.1f}" for k, v in sorted(total.units_by_call.items(), key=lambda kv: -kv[1])), ""]
    return "\n".join(lines)


def _by_service(by_function: dict[str, dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for services in by_function.values():
        for k, v in services.items():
            out[k] = out.get(k, 0.0) + v
    return out


def summary(tallies: dict[str, Tally], price: dict[str, float], model: Assumptions) -> dict[str, Any]:
    by_service = _by_service(costs(tallies, price, model))
    total = _total(tallies)
    return {"usd_per_million": round(sum(by_service.values()) * 1e6, 2),
            "by_service": {k: round(v * 1e6, 2) for k, v in by_service.items() if v},
            "total": total.units(), "calls": dict(total.calls),
            "functions": {name: t.units() for name, t in tallies.items()}}


def headline(results: dict[str, dict[str, float]]) -> str:
    """Every scenario's $ per million events in each mode, against its target."""
    names = [n for n in SCENARIOS if any(n in r for r in results.values())]
    modes = [m for m in MODES if m in results]
    lines = ["| Scenario | " + " | ".join(m.replace("_", " ") for m in modes) + " | target |",
             "|---|" + "---:|" * len(modes) + "---:|"]
    for name in names:
        cells = [f"{results[m][name]:.2f}" if name in results[m] else "" for m in modes]
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {TARGETS[name]:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--modes", default=",".join(MODES),
                        help="one_by_one: each event once the one before it was delivered, a source at low traffic, "
                             "every run queue batch holding one event; back_to_back: events follow each other at "
                             "once, and a batch holds the ones that came while the one before it ran")
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=110, help="events before the measured ones (steady state)")
    parser.add_argument("--receiver-ms", type=float, default=100.0, help="the webhook receiver's answer time")
    parser.add_argument("--one-by-one-rate", type=float, default=0.2, help="events a second (X-Ray sampling)")
    parser.add_argument("--one-by-one-cold", type=float, default=0.01, help="share of invocations that start cold")
    parser.add_argument("--back-to-back-rate", type=float, default=100.0)
    parser.add_argument("--back-to-back-cold", type=float, default=0.001)
    parser.add_argument("--init-samples", type=int, default=3,
                        help="cold starts measured per function (0: init not priced)")
    parser.add_argument("--init-ms", default="", help="the functions' init ms as JSON (skips measuring them)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = [n for n in args.scenarios.split(",") if n]
    modes = [m for m in args.modes.split(",") if m]
    unknown = (set(names) - set(SCENARIOS)) | (set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown {sorted(unknown)}: scenarios {', '.join(SCENARIOS)}; modes {', '.join(MODES)}")
    price = prices()
    template = Template.read()
    init = {k: float(v) for k, v in json.loads(args.init_ms).items()} if args.init_ms else {}
    rate = {"one_by_one": args.one_by_one_rate, "back_to_back": args.back_to_back_rate}
    cold = {"one_by_one": args.one_by_one_cold, "back_to_back": args.back_to_back_cold}

    def model(mode: str) -> Assumptions:
        return Assumptions(mode, rate[mode], cold[mode], init, memory_of(template), log_retention_days(template))

    out = sys.stdout
    measured: dict[tuple[str, str], dict[str, Tally]] = {}
    if not args.json:
        print(f"{args.events} events per scenario after {args.warmup} (timer: {min(args.warmup, 5)}) warm-up "
              f"ones; receiver answers in {args.receiver_ms:.0f} ms\n", flush=True)
    with redirect_stdout(sys.stderr):  # the functions' logs (Powertools writes to stdout)
        for mode, name, tallies in run_scenarios(names, modes, args.events, args.warmup, args.receiver_ms):
            measured[mode, name] = per_event(tallies, args.events)
            print(f"measured {name}, {mode}", flush=True)
    # the init times once the stack is down (it would slow them down)
    missing = sorted({f for t in measured.values() for f in t if f in template.functions() and f not in init})
    if args.init_samples > 0:
        init.update(init_ms(missing, args.init_samples, cpu=True))
    for (mode, name), tallies in measured.items():
        if not args.json:
            print(table(name, tallies, price, model(mode)), file=out, flush=True)
    results: dict[str, dict[str, Any]] = {mode: {} for mode in modes}
    for mode in modes:
        for name in names:
            found = measured.get((mode, name)) or measured.get((modes[0], name))
            if found is None:
                continue
            tallies = found
            if (mode, name) not in measured and not args.json:
                print(table(name, tallies, price, model(mode)), file=out, flush=True)
            results[mode][name] = summary(tallies, price, model(mode))
    if args.json:  # one line, the last one
        print(json.dumps({**results, "init_ms": {k: round(v) for k, v in init.items()}}))
    else:
        print(headline({m: {n: r["usd_per_million"] for n, r in results[m].items()} for m in modes}), file=out)
        print(f"\nInit ms measured: {json.dumps({k: round(v) for k, v in init.items()})}", file=out)


if __name__ == "__main__":
    main()
