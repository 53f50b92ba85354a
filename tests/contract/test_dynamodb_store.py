"""What only the DynamoDB store has: its table schema, its transaction limits, compressed items,
the outbox left by a crash, and leases that expire."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.adapters.aws.dynamodb import DynamoStore
from headwater.adapters.aws.dynamodb.lease import DynamoLease
from headwater.adapters.aws.dynamodb.uow import MAX_WRITES, TRANSACTION_BYTES, ReadOnlyUnitOfWork
from headwater.domain.commands import FanOut, RunSource, SyncSchedule
from headwater.domain.errors import Conflict, PayloadTooLarge
from headwater.domain.events import EventId
from headwater.domain.models import SourceState, StoredEvent, User
from headwater.domain.routing import carried
from headwater.ports import Busy
from tests.contract.conftest import EVENTS, RESOURCES

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def client(store: DynamoStore) -> Any:
    return store.tables.client


def test_the_tables_match_the_template(dynamo: DynamoStore) -> None:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # !Ref, !GetAtt, !Sub
    resources = yaml.load(TEMPLATE.read_text(), Loader=Loader)["Resources"]  # noqa: S506 - SafeLoader
    for logical, name in (("ResourcesTable", RESOURCES), ("EventsTable", EVENTS)):
        declared = resources[logical]["Properties"]
        table = client(dynamo).describe_table(TableName=name)["Table"]
        assert sorted(table["AttributeDefinitions"], key=str) == sorted(declared["AttributeDefinitions"], key=str)
        assert table["KeySchema"] == declared["KeySchema"]
        indexes = {i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in table.get("GlobalSecondaryIndexes", [])}
        assert indexes == {i["IndexName"]: (i["KeySchema"], i["Projection"])
                           for i in declared.get("GlobalSecondaryIndexes", [])}
        ttl = client(dynamo).describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        assert ttl["AttributeName"] == declared["TimeToLiveSpecification"]["AttributeName"] == "expires_at"


def test_a_read_only_unit_of_work_refuses_writes(dynamo: DynamoStore) -> None:
    with dynamo.uow(readonly=True) as uow:
        with pytest.raises(ReadOnlyUnitOfWork):
            uow.users.add(User("u_1", "alice", "a@example.com", "free", 1))
        with pytest.raises(ReadOnlyUnitOfWork):
            uow.events.delete_range("dc_1", None, None, None)
        with pytest.raises(ReadOnlyUnitOfWork):
            uow.outbox.add(SyncSchedule("dc_1"))


def test_a_commit_takes_at_most_max_writes_items(dynamo: DynamoStore) -> None:
    with dynamo.uow() as uow:
        assert uow.max_writes == MAX_WRITES == 100
        for i in range(MAX_WRITES + 1):
            uow.events.put("dc_1", StoredEvent(f"1-{i}", 1, {}, {}))
        with pytest.raises(ValueError, match="at most 100"):
            uow.commit()


def test_the_first_failed_condition_names_the_conflict(dynamo: DynamoStore) -> None:
    with dynamo.uow() as uow:
        uow.users.add(User("u_1", "alice", "a@example.com", "free", 1))
        uow.commit()
    with pytest.raises(Conflict) as caught, dynamo.uow() as uow:
        uow.state.save("dc_1", SourceState(), 0)
        uow.users.add(User("u_2", "alice", "a@example.com", "free", 1))
        uow.commit()
    assert caught.value.field == "username"
    with dynamo.uow(readonly=True) as uow:
        assert uow.state.get("dc_1").version == 0  # cancelled with the rest



def test_a_single_write_is_the_item_own_call_and_conflicts_alike(dynamo: DynamoStore) -> None:
    calls: list[str] = []
    client(dynamo).meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    with dynamo.uow() as uow:
        uow.state.save("dc_1", SourceState(), 0)
        uow.commit()
    assert "PutItem" in calls and "TransactWriteItems" not in calls
    calls.clear()
    with pytest.raises(Conflict) as caught, dynamo.uow() as uow:
        uow.state.save("dc_1", SourceState(), 0)  # a writer that read version 0
        uow.commit()
    assert caught.value.field == "version" and "TransactWriteItems" not in calls
    with dynamo.uow() as uow:
        uow.state.save("dc_1", SourceState(), 1)
        uow.users.add(User("u_1", "alice", "a@example.com", "free", 1))
        calls.clear()
        uow.commit()
    assert "TransactWriteItems" in calls  # two items: one transaction
    with dynamo.uow(readonly=True) as uow:
        assert uow.state.get("dc_1").version == 2

def noise(size: int) -> str:
    """Text that hardly compresses."""
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()


def test_large_events_are_compressed_and_too_large_ones_refused(dynamo: DynamoStore) -> None:
    big = {"text": "all work and no play " * 50_000}  # ~1 MB that compresses well
    with dynamo.uow() as uow:
        uow.events.put("dc_1", StoredEvent("1-1", 1, big, {"id": 1}))
        uow.commit()
    item = client(dynamo).get_item(TableName=EVENTS, Key={"pk": {"S": "dc_1#"}, "sk": {"S": "0000000000000001-"
                                                                                          "000000000001"}})["Item"]
    assert "body_z" in item and "body" not in item
    with dynamo.uow(readonly=True) as uow:
        assert uow.events.get("dc_1", "", "1-1") == StoredEvent("1-1", 1, big, {"id": 1})

    with dynamo.uow() as uow, pytest.raises(PayloadTooLarge):
        uow.events.put("dc_1", StoredEvent("1-2", 1, {"text": noise(600_000)}, {}))
    with dynamo.uow() as uow, pytest.raises(PayloadTooLarge):
        uow.state.save("dc_1", SourceState(db={"blob": noise(600_000)}), 0)


def test_events_beyond_the_transaction_size_follow_right_after_it(dynamo: DynamoStore) -> None:
    events = [StoredEvent(f"1-{i}", 1, {"blob": noise(300_000)}, {}) for i in range(20)]  # ~4.5 MB compressed
    with dynamo.uow() as uow:
        uow.state.save("dc_1", SourceState(last_seq=20), 0)
        for e in events:
            uow.events.put("dc_1", e)
        uow.commit()
    transactions = [params for name, params in client(dynamo).calls if name == "transact_write_items"]
    assert len(transactions) == 1
    items = [next(iter(write.values())).get("Item", {}) for write in transactions[0]["TransactItems"]]
    bodies = sum(len(item["body_z"]["B"]) for item in items if "body_z" in item)
    assert 0 < bodies <= TRANSACTION_BYTES  # DynamoDB takes at most 4 MB of items in one transaction
    assert len(items) < 21
    with dynamo.uow(readonly=True) as uow:
        assert uow.events.count("dc_1", "") == 20
        assert uow.state.get("dc_1").version == 1


def test_outbox_items_stay_until_the_queue_has_them(dynamo: DynamoStore) -> None:
    handed: list[Any] = []
    dynamo.on_commit(lambda tasks: (_ for _ in ()).throw(RuntimeError("SQS is down")))  # a failing hand-over
    dynamo.on_commit(handed.extend)
    with dynamo.uow() as uow:
        uow.outbox.add(SyncSchedule("dc_1"))
        uow.outbox.add(SyncSchedule("dc_2"), delay_s=30)
        uow.commit()  # the commit stands though the first callback failed
    assert [t.command for t in handed] == [SyncSchedule("dc_1"), SyncSchedule("dc_2")]
    assert dynamo.pending_outbox(older_than_s=3600) == []  # not left behind: just written
    pending = dynamo.pending_outbox(older_than_s=-60)
    assert pending == sorted(handed, key=lambda t: t.id)
    dynamo.outbox_done([t.id for t in handed])
    assert dynamo.pending_outbox(older_than_s=-60) == []


def test_an_outbox_item_keeps_a_fan_outs_event_ids_not_their_bodies(dynamo: DynamoStore) -> None:
    """The bodies are stored once (the events table); the message sent at commit carries them."""
    event = StoredEvent("5-1", 5, {"payload": "x" * 1000}, {"emit_id": "e"}, "")
    handed: list[Any] = []
    dynamo.on_commit(handed.extend)
    with dynamo.uow() as uow:
        uow.events.put("dc_1", event)
        uow.outbox.add(FanOut("dc_1", "u_1", "", ("5-1",), events=(carried(event),)))
        uow.commit()
    assert handed[0].command.events == (carried(event),)
    recovered = dynamo.pending_outbox(older_than_s=-60)
    assert [t.command for t in recovered] == [FanOut("dc_1", "u_1", "", ("5-1",))]
    assert recovered[0].id == handed[0].id


def test_an_outbox_item_keeps_an_http_runs_request_body_once(dynamo: DynamoStore) -> None:
    """A request's `body` is its `bodyRaw` parsed: the item keeps the raw bytes only (one write
    unit less for a 1 KB body), and the command recovered from it is the one added."""
    raw = '{"order": "%s", "items": [1, 2, 3]}' % ("o" * 600)
    request = {"method": "POST", "path": "/", "query": {}, "headers": {"content-type": "application/json"},
               "bodyRaw": raw, "body": json.loads(raw)}
    run = RunSource("dc_1", request, 1000, "http")
    kept = dynamo.outbox_keep(run, due_at=0.0)
    with dynamo.uow() as uow:
        uow.outbox.add(run)
        uow.commit()
    items = client(dynamo).scan(TableName=RESOURCES)["Items"]
    stored = [zlib.decompress(i["body_z"]["B"]).decode() for i in items if i["pk"]["S"].startswith("outbox#")]
    assert len(stored) == 2 and all(text.count("o" * 600) == 1 for text in stored)
    recovered = dynamo.pending_outbox(older_than_s=-60)
    assert [t.command for t in recovered] == [run, run]
    assert kept.id in [t.id for t in recovered] and kept.not_before == 0.0


def test_retention_counts_each_channel_and_reads_only_what_it_deletes(dynamo: DynamoStore) -> None:
    """The channel marker counts its events; a marker written before counting is counted once."""
    queries: list[dict[str, Any]] = []
    client(dynamo).meta.events.register("before-parameter-build.dynamodb.Query",
                                        lambda params, **_: queries.append(dict(params)))

    def commit(*ids: str, keep: int = 4) -> list[str]:
        with dynamo.uow() as uow:
            for i in ids:
                uow.events.put("dc_1", StoredEvent(i, int(i.split("-")[0]), {"i": i}, {}, ""))
            uow.events.trim("dc_1", "", keep)
            uow.commit()
        with dynamo.uow(readonly=True) as uow:
            return [e.id for e in uow.events.newest("dc_1", "", 100)]

    def marker() -> dict[str, Any]:
        return client(dynamo).get_item(TableName=RESOURCES, Key={"pk": {"S": "dc_1"}, "sk": {"S": "channel#"}},
                                       ConsistentRead=True)["Item"]

    assert commit("1-1", "2-2", "3-3") == ["3-3", "2-2", "1-1"]
    client(dynamo).update_item(TableName=RESOURCES, Key={"pk": {"S": "dc_1"}, "sk": {"S": "channel#"}},
                               UpdateExpression="REMOVE n, counted")  # as markers were before counting
    assert commit("4-4", "5-5") == ["5-5", "4-4", "3-3", "2-2"]  # counted by a Query, once
    queries.clear()
    for i in range(6, 10):
        assert commit(f"{i}-{i}") == [f"{j}-{j}" for j in range(i, i - 4, -1)]
    trims = [q for q in queries if q["TableName"] == EVENTS and q.get("ProjectionExpression") == "sk"]
    assert [(q["ScanIndexForward"], q.get("Limit")) for q in trims] == [(True, 1)] * 4  # the oldest only
    assert marker()["n"] == {"N": "4"}
    with dynamo.uow() as uow:
        assert uow.events.delete_range("dc_1", "", EventId(8, 8), None) == 2
        uow.commit()
    assert marker()["n"] == {"N": "2"}
    assert commit("10-10") == ["10-10", "7-7", "6-6"]
    assert commit("11-11", "12-12") == ["12-12", "11-11", "10-10", "7-7"]


def test_done_marks(dynamo: DynamoStore) -> None:
    assert dynamo.done_of(["m1", "m2"]) == set()
    dynamo.mark_done(["m1"])
    assert dynamo.done_of(["m1", "m2"]) == {"m1"}


def test_a_lease_is_reentrant_in_its_thread_and_expires_when_its_holder_died(dynamo: DynamoStore) -> None:
    with dynamo.lease.hold("dc_1", ttl_s=30), dynamo.lease.hold("dc_1", ttl_s=30):
        pass  # the queue holds a lane, its handler holds the same source
    now = [1_000_000.0]
    dead = DynamoLease(dynamo.tables, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    other = DynamoLease(dynamo.tables, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    holding = dead.hold("dc_2", ttl_s=10)
    holding.__enter__()  # and never leaves: its process died
    with pytest.raises(Busy), other.hold("dc_2", ttl_s=10, wait_s=5):
        pass
    assert now[0] >= 1_000_005.0  # it waited (in fake time) as long as it was told
    now[0] += 10
    with other.hold("dc_2", ttl_s=10):
        pass


def test_deliveries_are_listed_on_a_keys_only_index_and_old_ones_are_backfilled(dynamo: DynamoStore) -> None:
    from headwater.adapters.aws.dynamodb.backfill import backfill_deliveries
    from headwater.adapters.aws.dynamodb.codec import body, n, s, seq_key
    from headwater.domain.pagination import PageRequest
    from headwater.domain.routing import Delivery

    indexes = {i["IndexName"]: i["Projection"]["ProjectionType"]
               for i in client(dynamo).describe_table(TableName=RESOURCES)["Table"]["GlobalSecondaryIndexes"]}
    assert indexes["gsi3"] == "KEYS_ONLY"
    old = Delivery("msg_old", "wh_1", "dc_a", "1-1", {"event": 1}, created_at_ms=1)
    assert dynamo.tables.next_seq("wh_1", "deliveries") == 1
    client(dynamo).put_item(TableName=RESOURCES, Item={  # as deliveries were made before gsi3
        "pk": s(old.id), "sk": s("#delivery"), "version": n(1), "seq": n(1), "gsi2pk": s("deliveries#wh_1"),
        "gsi2sk": s(seq_key(1)), **body({**dataclasses.asdict(old), "version": None})})
    with dynamo.uow() as uow:
        uow.deliveries.add(Delivery("msg_new", "wh_1", "dc_a", "1-2", {"event": 2}, created_at_ms=2))
        uow.commit()
    new_item = client(dynamo).get_item(TableName=RESOURCES, Key={"pk": s("msg_new"), "sk": s("#delivery")})["Item"]
    assert "gsi2pk" not in new_item and new_item["gsi3pk"] == s("deliveries#wh_1")

    def listed() -> list[str]:
        with dynamo.uow(readonly=True) as uow:
            return [d.id for d in uow.deliveries.for_webhook("wh_1", PageRequest(limit=10)).items]

    assert listed() == ["msg_new"]
    assert backfill_deliveries(client(dynamo), RESOURCES) == 1
    assert listed() == ["msg_new", "msg_old"]
    with dynamo.uow(readonly=True) as uow:
        assert uow.deliveries.get("msg_old") == dataclasses.replace(old, version=1)
    assert backfill_deliveries(client(dynamo), RESOURCES) == 0


def test_a_commit_to_a_full_channel_reads_its_marker_then_counts_and_trims_in_one_update(dynamo: DynamoStore) -> None:
    from headwater.adapters.aws.dynamodb.codec import s

    def commit(i: int) -> None:
        with dynamo.uow() as uow:
            uow.events.put("dc_m", StoredEvent(f"{i}-{i}", i, {"n": i}, {}, ""))
            uow.events.trim("dc_m", "", 3)
            uow.commit()

    def kept() -> list[int]:
        with dynamo.uow(readonly=True) as uow:
            return [e.event["n"] for e in uow.events.newest("dc_m", "", 10)]

    marker = {"pk": s("dc_m"), "sk": s("channel#")}
    for i in range(1, 6):
        commit(i)
    start = len(client(dynamo).calls)
    commit(6)
    on_marker = [name for name, kwargs in client(dynamo).calls[start:] if kwargs.get("Key") == marker]
    assert on_marker == ["get_item", "update_item"]
    assert kept() == [6, 5, 4]
    client(dynamo).delete_item(TableName=RESOURCES, Key=marker)  # as a purge elsewhere does
    commit(7)
    assert client(dynamo).get_item(TableName=RESOURCES, Key=marker)["Item"]["n"] == {"N": "3"}
    assert kept() == [7, 6, 5]
    commit(8)
    assert kept() == [8, 7, 6]


def test_usage_is_added_by_one_update_after_the_commit_not_in_its_transaction(dynamo: DynamoStore) -> None:
    start = len(client(dynamo).calls)
    with dynamo.uow() as uow:
        uow.state.save("dc_u", SourceState(db={"n": 1}), 0)
        uow.usage.record("u_1", "2025-01-01", 1, 5)
        uow.outbox.add(SyncSchedule("dc_u"))
        uow.usage.record("u_1", "2025-01-01", 2, 5)
        uow.commit()
    calls = client(dynamo).calls[start:]
    [transaction] = [kwargs["TransactItems"] for name, kwargs in calls if name == "transact_write_items"]
    assert len(transaction) == 2 and "usage#" not in repr(transaction)
    added = [kwargs for name, kwargs in calls
             if name == "update_item" and kwargs["Key"]["sk"]["S"] == "usage#2025-01-01"]
    assert len(added) == 1
    assert dynamo.usage.totals("u_1", "2025-01-01", "2025-01-01") == (3, 10)


def test_a_commits_deliveries_take_their_list_places_by_one_counter_add_per_webhook(dynamo: DynamoStore) -> None:
    from headwater.domain.pagination import PageRequest
    from headwater.domain.routing import Delivery

    start = len(client(dynamo).calls)
    with dynamo.uow() as uow:
        for i in range(3):
            uow.deliveries.add(Delivery(f"msg_a{i}", "wh_a", "dc_a", f"1-{i}", {"event": i}, created_at_ms=i))
        uow.deliveries.add(Delivery("msg_b0", "wh_b", "dc_a", "1-0", {"event": 0}, created_at_ms=0))
        uow.commit()
    with dynamo.uow() as uow:  # a later commit's goes after them
        uow.deliveries.add(Delivery("msg_a3", "wh_a", "dc_a", "1-3", {"event": 3}, created_at_ms=3))
        uow.commit()
    counted = [kwargs["Key"]["pk"]["S"] for name, kwargs in client(dynamo).calls[start:]
               if name == "update_item" and kwargs["Key"]["sk"]["S"] == "counter#deliveries"]
    assert counted == ["wh_a", "wh_b", "wh_a"]
    with dynamo.uow(readonly=True) as uow:
        page = uow.deliveries.for_webhook("wh_a", PageRequest(limit=10))
        assert [d.id for d in page.items] == ["msg_a3", "msg_a2", "msg_a1", "msg_a0"] and page.seqs == [4, 3, 2, 1]
        assert [d.id for d in uow.deliveries.for_webhook("wh_b", PageRequest(limit=10)).items] == ["msg_b0"]
