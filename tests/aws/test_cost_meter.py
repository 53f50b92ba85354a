"""bench/aws_meter.py bills what AWS bills: DynamoDB units from item sizes by the rounding rules
(checked on moto, the meter's hooks on a real boto3 client), SQS 64 KB chunks, invocations."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from bench.aws_meter import Meter, item_size

REGION = "us-east-1"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    from headwater.emulated.deployment import start_moto

    server = start_moto()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def metered(endpoint: str) -> Iterator[tuple[Meter, Any, Any]]:
    session = boto3.session.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    ddb = session.client("dynamodb", endpoint_url=endpoint)
    name = f"t{id(session)}"
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "sk", "AttributeType": "S"},
                                           {"AttributeName": "g", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                {"AttributeName": "sk", "KeyType": "RANGE"}],
                     GlobalSecondaryIndexes=[{"IndexName": "keys", "Projection": {"ProjectionType": "KEYS_ONLY"},
                                              "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}]}])
    meter = Meter(endpoint, {"F": 1024}, {})
    metered_session = boto3.session.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    meter.install(metered_session.events)
    yield meter, metered_session.client("dynamodb", endpoint_url=endpoint), name


def _units(meter: Meter) -> tuple[float, float]:
    tally = meter.tally()["F"]
    return tally.wru, tally.rru


def test_item_size_follows_dynamodbs_rules() -> None:
    assert item_size({"pk": {"S": "abc"}}) == 2 + 3
    assert item_size({"n": {"N": "12345"}}) == 1 + 4  # 3 bytes of digits + 1
    assert item_size({"b": {"BOOL": True}, "z": {"NULL": True}}) == 2 + 2
    assert item_size({"m": {"M": {"a": {"S": "xy"}}}}) == 1 + 3 + 1 + 1 + 2
    assert item_size({"l": {"L": [{"S": "x"}, {"S": "y"}]}}) == 1 + 3 + 2 * (1 + 1)


def test_writes_round_up_per_kilobyte_and_transactions_count_twice(metered: tuple[Meter, Any, str]) -> None:
    meter, ddb, table = metered
    with meter.invocation("F"):
        ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "v": {"S": "x" * 1500}})
    assert _units(meter) == (2, 0)  # 1.5 KB: two units
    meter.reset()
    with meter.invocation("F"):  # an overwrite by a smaller item is billed by the larger one
        ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "v": {"S": "x"}})
    assert _units(meter) == (2, 0)
    meter.reset()
    with meter.invocation("F"):
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": table, "Item": {"pk": {"S": "b"}, "sk": {"S": "1"}, "v": {"S": "x" * 2100}}}},
            {"Update": {"TableName": table, "Key": {"pk": {"S": "a"}, "sk": {"S": "1"}},
                        "UpdateExpression": "SET w = :w", "ExpressionAttributeValues": {":w": {"N": "1"}}}}])
    assert _units(meter) == (2 * 3 + 2 * 1, 0)


def test_reads_by_four_kilobytes_and_queries_by_what_they_evaluate(metered: tuple[Meter, Any, str]) -> None:
    meter, ddb, table = metered
    for i in range(3):
        meter.tables.client.put_item(TableName=table, Item={"pk": {"S": "q"}, "sk": {"S": str(i)}, "g": {"S": "k"},
                                                            "v": {"S": "x" * 3000}})
    with meter.invocation("F"):
        ddb.get_item(TableName=table, Key={"pk": {"S": "q"}, "sk": {"S": "0"}}, ConsistentRead=True)
        ddb.get_item(TableName=table, Key={"pk": {"S": "q"}, "sk": {"S": "1"}})
    assert _units(meter) == (0, 1 + 0.5)
    meter.reset()
    with meter.invocation("F"):  # projecting the keys does not make the items smaller: 9 KB read
        ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "q"}},
                  ProjectionExpression="sk", ConsistentRead=True)
    assert _units(meter) == (0, 3)
    meter.reset()
    with meter.invocation("F"):  # a keys-only index holds small items: one unit, eventually consistent
        ddb.query(TableName=table, IndexName="keys", KeyConditionExpression="g = :g",
                  ExpressionAttributeValues={":g": {"S": "k"}})
    assert _units(meter) == (0, 0.5)


def test_an_invocation_is_billed_by_its_memory_and_an_index_write_is_counted(
        metered: tuple[Meter, Any, str]) -> None:
    meter, ddb, table = metered
    with meter.invocation("F"):
        ddb.put_item(TableName=table, Item={"pk": {"S": "i"}, "sk": {"S": "1"}, "g": {"S": "k"}})
    tally = meter.tally()["F"]
    assert (tally.invocations, tally.wru) == (1, 1 + 1)  # the item, its keys-only index entry
    assert tally.gb_s == pytest.approx(tally.billed_ms / 1000)  # 1024 MB
    assert tally.calls == {"dynamodb.PutItem": 1}


def test_waits_that_overlap_are_billed_once() -> None:
    """A commit's webhook attempts are made side by side: Lambda bills their wall time, not the sum."""
    from bench.aws_meter import Invocation

    record = Invocation("F", 512)
    record.waits += [(10.0, 10.1), (10.02, 10.1), (10.05, 10.12), (11.0, 11.005)]
    assert record.waited_ms == pytest.approx(125.0)


def test_an_invocations_log_is_its_lines_and_lambdas_with_their_metadata(endpoint: str) -> None:
    """Each line a log event with 26 bytes of metadata; Lambda's START, END and REPORT lines on
    top (REPORT's XRAY part when the function traces); an API request's access log line."""
    from bench.aws_meter import LOG_EVENT_OVERHEAD, log_bytes, platform_log_lines

    meter = Meter(endpoint, {"F": 512, "G": 512}, {}, tracing={"F": "Active", "G": "PassThrough"},
                  access_log_format='{"requestId":"$context.requestId"}')
    meter.install_logs()
    try:
        with meter.invocation("F", api=True):
            print("hello")  # print writes the newline apart: still one event
            sys.stdout.write("two\nlines\n")
        with meter.invocation("G"), meter.invocation("F"):  # called by G: continues G's trace, starts none
            pass
        print("outside any invocation")
    finally:
        meter.uninstall_logs()
    tally = meter.tally()
    own = len("hello") + len("two") + len("lines") + 3 * LOG_EVENT_OVERHEAD
    access = len('{"requestId":"Qm3xZg2YIAMEbXw="}') + LOG_EVENT_OVERHEAD
    platform_f = tally["F"].log_bytes - own - access - log_bytes(platform_log_lines(512, 1, True))
    assert 0 <= platform_f <= log_bytes(platform_log_lines(512, 1, True)) + 10  # the nested call's lines
    assert tally["F"].log_events == 3 + 3 + 1 + 3
    assert 250 <= log_bytes(platform_log_lines(512, 57, False)) <= 350
    assert tally["F"].trace_starts == 1 and tally["G"].trace_starts == 0
