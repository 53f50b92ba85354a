"""The emulated deployment: a moto server on loopback, provisioned from template.yaml (tables,
queues with their dead-letter queues, the schedule group, the secret props' KMS key and its alias), and the
environment template.yaml gives the functions. `headwater serve` writes where it is
(`aws-emulated.json` in the data dir) and every `headwater` command with the same data dir finds
it there (`load_environment`)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.emulated.template import Template

REGION = "us-east-1"
ACCOUNT = "123456789012"
STACK = "headwater"
STATE_FILE = "aws-emulated.json"
_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "emulated", "AWS_SECRET_ACCESS_KEY": "emulated",
                "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}
# Settings the operator gives the emulated deployment as they give the local one (the same
# settings, the same defaults): template.yaml's parameters for them are not applied here.
_OPERATOR = ("HEADWATER_BACKEND", "HEADWATER_PUBLIC_URL", "HEADWATER_LOG_LEVEL", "HEADWATER_WEBHOOK_RETRY_SCHEDULE",
             "HEADWATER_DATA_DIR", "HEADWATER_ALLOW_PRIVATE_URLS", "HEADWATER_ALLOW_LOOPBACK_URLS",
             "HEADWATER_INGEST_RATE", "HEADWATER_INGEST_BURST",
             "HEADWATER_AWS_ENDPOINT_URL")  # the last: template.yaml's is empty (AWS); here, the moto server
_TUNABLE = ("HEADWATER_SSE_MAX_S",)  # template.yaml's value unless the environment has one


class _OneDynamoDBRequestAtATime:
    """moto applies a DynamoDB request in steps without a lock (a transaction copies the table,
    checks, writes, restores on failure): requests are made atomic here, as they are on AWS.
    Other services pass through (an SQS long poll must not hold anyone up)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
            return self.app(environ, start_response)
        with self.lock:
            return list(self.app(environ, start_response))


def _wait_for_change(queue: Any, timeout_s: float) -> None:
    """Until a message is added to `queue`, or `timeout_s`."""
    with queue._messages_lock:
        queue._messages_lock.wait(timeout=timeout_s)


def _fifo_safe_long_polls() -> None:
    """Two faults of moto's SQS long poll, which the emulated stack's pollers (two per queue, as
    Lambda's) ran into on the run queue's FIFO side:
    - it takes the set of message groups in flight once, when the poll starts, so a poll that began
      before a group's batch was received hands out that group's next messages while the batch is
      still in flight (two batches of one source at once: the second waited for the lease);
    - it checks the queue again as soon as any message is visible, so a poll whose visible messages
      all wait behind their group spins for its whole wait, holding the server's interpreter (two
      such polls slowed every other call of the stack about threefold).
    Here a long poll is a series of immediate receives, each seeing the groups in flight as they
    are (one at a time, as SQS hands a group to one receiver), waiting between them for a message
    added, or 50 ms."""
    from moto.sqs.models import SQSBackend

    receive = SQSBackend.receive_message
    if getattr(receive, "fifo_safe", False):
        return
    one_at_a_time = threading.Lock()

    def receive_message(self: Any, queue_name: str, count: int, wait_seconds_timeout: int,
                        visibility_timeout: int, message_attribute_names: list[str] | None = None) -> Any:
        deadline = time.monotonic() + (wait_seconds_timeout or 0)
        while True:
            with one_at_a_time:
                received = receive(self, queue_name, count, 0, visibility_timeout, message_attribute_names)
            left = deadline - time.monotonic()
            if received or left <= 0:
                return received
            _wait_for_change(self.get_queue(queue_name), min(left, 0.05))

    receive_message.fifo_safe = True  # type: ignore[attr-defined]
    SQSBackend.receive_message = receive_message  # type: ignore[method-assign]


def _one_clock_read_per_scan() -> None:
    """moto lists a queue's receivable messages by asking each message whether it is visible and
    not delayed, each answer a read and conversion of the clock. Every customResponse request
    leaves a message delayed by 15 minutes (its fallback, sqs_queue.py), and the pollers receive
    every 50 ms: with a few hundred of them waiting, those scans took half the server's
    interpreter and one source's concurrent requests queued past API Gateway's 30 s (503s that AWS,
    whose delayed messages cost a receiver nothing, would not give). Here a scan reads the clock
    once."""
    from moto.core.utils import unix_time_millis
    from moto.sqs.models import Queue

    if getattr(Queue.messages.fget, "one_clock_read", False):  # type: ignore[attr-defined]
        return

    def messages(self: Any) -> list[Any]:
        now = unix_time_millis()
        return [m for m in self._messages if now > m.visible_at and now >= m.delayed_until]

    messages.one_clock_read = True  # type: ignore[attr-defined]
    Queue.messages = property(messages)  # type: ignore[method-assign, assignment]


def _item_level_transactions() -> None:
    """moto's TransactWriteItems deep-copies every table it touches (once per item) to roll back
    a failed transaction, so a commit cost grew with the table: with a few thousand events stored,
    a run's commit took a third of a second, one source's concurrent customResponse requests queued
    past API Gateway's 30 s and were answered 503, where AWS (whose transactions copy nothing)
    answers them all. Here only the items the transaction touches are kept, and put back on a
    failure; the tables are not copied. Requests are one at a time (_OneDynamoDBRequestAtATime)."""
    import copy

    import moto.dynamodb.models as models
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    transact = DynamoDBBackend.transact_write_items
    if getattr(transact, "item_level", False):
        return

    class _TablesNotCopied:
        """The module's `copy`, but a Table "copied" for a rollback is the table itself."""

        @staticmethod
        def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def before(backend: Any, items: list[dict[str, Any]]) -> list[tuple[Any, Any, Any, Any]]:
        """(table, hash, range, a copy of the item or None) of each item the transaction names."""
        kept = []
        for item in items:
            try:
                _, op = next(iter(item.items()))
                table = backend.get_table(op["TableName"])
                key = op["Item"] if "Item" in op else op["Key"]
                hash_value = DynamoType(key[table.hash_key_attr])
                range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
                kept.append((table, hash_value, range_value, copy.deepcopy(table.get_item(hash_value, range_value))))
            except Exception:  # noqa: BLE001, S112 - moto's own call reports it; nothing of it is written
                continue
        return kept

    def put_back(kept: list[tuple[Any, Any, Any, Any]]) -> None:
        for table, hash_value, range_value, item in reversed(kept):
            if range_value is not None:
                if item is None:
                    table.items[hash_value].pop(range_value, None)
                else:
                    table.items[hash_value][range_value] = item
            elif item is None:
                table.items.pop(hash_value, None)
            else:
                table.items[hash_value] = item

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        kept = before(self, transact_items) if len(transact_items) <= 100 else []
        try:
            transact(self, transact_items)
        except Exception:
            put_back(kept)
            raise

    models.copy = _TablesNotCopied  # type: ignore[assignment]
    transact_write_items.item_level = True  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def start_moto() -> Any:
    """moto's threaded server on a free loopback port."""
    _fifo_safe_long_polls()
    _one_clock_read_per_scan()
    _item_level_transactions()
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = _OneDynamoDBRequestAtATime(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    server = Server(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    return server


@dataclass
class Deployment:
    endpoint: str
    names: dict[str, str]  # logical id -> physical name (tables, queues, group, functions, bucket)
    queue_urls: dict[str, str]  # logical id -> URL
    arns: dict[str, str]  # logical id -> ARN
    environment: dict[str, str]  # what the Python functions get (the union of template.yaml's)

    def save(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / STATE_FILE).write_text(json.dumps(self.__dict__, indent=1))

    @classmethod
    def read(cls, data_dir: Path) -> Deployment:
        path = data_dir / STATE_FILE
        if not path.exists():
            raise RuntimeError(f"No emulated AWS deployment in {data_dir}: start one with "
                               "`HEADWATER_BACKEND=aws-emulated headwater serve` (same data dir).")
        return cls(**json.loads(path.read_text()))

    def apply(self) -> None:
        apply_environment(self.endpoint, self.environment)


def apply_environment(endpoint: str, environment: dict[str, str]) -> None:
    for name, value in _CREDENTIALS.items():
        os.environ.setdefault(name, value)
    os.environ["HEADWATER_AWS_ENDPOINT_URL"] = endpoint
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # no EMF lines in the server's log
    os.environ.setdefault("POWERTOOLS_IDEMPOTENCY_DISABLED", "false")
    for name, value in environment.items():
        if name in _TUNABLE:
            os.environ.setdefault(name, value)
        elif name not in _OPERATOR:
            os.environ[name] = value


def load_environment(data_dir: Path) -> None:
    """For a `headwater` command: the running emulated deployment of this data dir."""
    Deployment.read(data_dir).apply()


def provision(template: Template, endpoint: str, public_url: str) -> Deployment:
    """Creates what template.yaml declares that the functions use, on the moto server."""
    import boto3

    def client(service: str) -> Any:
        return boto3.client(service, endpoint_url=endpoint, region_name=REGION, aws_access_key_id="emulated",
                            aws_secret_access_key="emulated")  # noqa: S106 - moto's, not a secret

    names: dict[str, str] = {}
    urls: dict[str, str] = {}
    arns: dict[str, str] = {}
    resolver = Resolver(template, names, urls, arns, {"PublicUrl": public_url})
    dynamodb, sqs = client("dynamodb"), client("sqs")
    for name, resource in template.of_type("AWS::DynamoDB::Table").items():
        names[name] = f"{STACK}-{name}"
        _create_table(dynamodb, names[name], resource["Properties"])
        arns[name] = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{names[name]}"
    queues = template.of_type("AWS::SQS::Queue")
    for name in sorted(queues, key=lambda n: "RedrivePolicy" in queues[n]["Properties"]):  # dead letters first
        props = queues[name]["Properties"]
        names[name] = f"{STACK}-{name}" + (".fifo" if props.get("FifoQueue") else "")  # as CloudFormation names it
        arns[name] = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{names[name]}"
        attributes = {"VisibilityTimeout": str(props.get("VisibilityTimeout", 30)),
                      "MessageRetentionPeriod": str(props.get("MessageRetentionPeriod", 345600))}
        if props.get("FifoQueue"):
            attributes["FifoQueue"] = "true"
            for fifo in ("ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"):
                if fifo in props:
                    attributes[fifo] = str(props[fifo]).lower() if isinstance(props[fifo], bool) else props[fifo]
        if "RedrivePolicy" in props:
            attributes["RedrivePolicy"] = json.dumps(resolver.resolve(props["RedrivePolicy"]))
        urls[name] = sqs.create_queue(QueueName=names[name], Attributes=attributes)["QueueUrl"]
    for name, resource in template.of_type("AWS::Scheduler::ScheduleGroup").items():
        names[name] = str(resolver.resolve(resource["Properties"]["Name"]))
        client("scheduler").create_schedule_group(Name=names[name])
    for name, resource in template.of_type("AWS::KMS::Key").items():  # the secret props' key (KmsSecrets)
        metadata = client("kms").create_key(Description=str(resource["Properties"].get("Description", name)),
                                            KeySpec="SYMMETRIC_DEFAULT", KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]
        names[name], arns[name] = metadata["KeyId"], metadata["Arn"]
    for name, resource in template.of_type("AWS::KMS::Alias").items():  # so the key is found by its alias too
        names[name] = str(resolver.resolve(resource["Properties"]["AliasName"]))
        client("kms").create_alias(AliasName=names[name], TargetKeyId=str(resolver.resolve(
            resource["Properties"]["TargetKeyId"])))
    for name in template.of_type("AWS::S3::Bucket"):
        names[name] = f"{STACK}-{name}".lower()
        client("s3").create_bucket(Bucket=names[name])
        arns[name] = f"arn:aws:s3:::{names[name]}"
    for name, resource in template.of_type("AWS::Serverless::Function").items():
        given = resource["Properties"].get("FunctionName")
        names[name] = str(resolver.resolve(given)) if given else f"{STACK}-{name}"
        arns[name] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{names[name]}"
    for name in template.of_type("AWS::IAM::Role"):
        arns[name] = f"arn:aws:iam::{ACCOUNT}:role/{STACK}-{name}"
    environment: dict[str, str] = {}
    for function in template.functions().values():
        if function.runtime.startswith("python"):
            environment.update({k: str(resolver.resolve(v)) for k, v in function.environment.items()})
    for function in template.functions().values():  # the emulated runner function runs in this process
        if not function.runtime.startswith("python"):
            for k, v in function.environment.items():
                environment.setdefault(k, str(resolver.resolve(v)))
    return Deployment(endpoint, names, urls, arns, environment)


def _create_table(client: Any, name: str, props: dict[str, Any]) -> None:
    request: dict[str, Any] = {"TableName": name, "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
                               "AttributeDefinitions": props["AttributeDefinitions"], "KeySchema": props["KeySchema"]}
    if props.get("GlobalSecondaryIndexes"):
        request["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    client.create_table(**request)
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        client.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": bool(ttl["Enabled"]), "AttributeName": ttl["AttributeName"]})


class Resolver:
    """Ref, GetAtt and Sub over the provisioned names (what CloudFormation would put there)."""

    def __init__(self, template: Template, names: dict[str, str], urls: dict[str, str], arns: dict[str, str],
                 parameters: dict[str, str]) -> None:
        self.template = template
        self.names, self.urls, self.arns = names, urls, arns
        self.parameters = {**template.parameter_defaults(), **parameters}

    def ref(self, name: str) -> str:
        pseudo = {"AWS::StackName": STACK, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT,
                  "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        if name in self.urls:
            return self.urls[name]  # a queue's Ref is its URL
        return self.names[name]

    def attribute(self, name: str, attribute: str) -> str:
        if attribute == "Arn":
            return self.arns[name]
        if attribute == "QueueName":
            return self.names[name]
        raise KeyError(f"GetAtt {name}.{attribute}")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                return self.attribute(arg[0], arg[1])
            if key == "Fn::Sub":
                return re.sub(r"\$\{([^}]+)\}", lambda m: self._sub(m.group(1)), arg)
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    def _sub(self, name: str) -> str:
        if "." in name and not name.startswith("AWS::"):
            resource, attribute = name.split(".", 1)
            return self.attribute(resource, attribute)
        return self.ref(name)
