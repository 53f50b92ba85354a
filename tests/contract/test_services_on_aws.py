"""One service layer, two adapter sets: the composition root's AWS set (DynamoDB, SQS, EventBridge
Scheduler under moto) carries the same use cases as the local one. The runner is the fake one:
what runs where is the runner's business, not the store's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from headwater.bootstrap import aws_adapters, bootstrap
from headwater.domain.events import Emit
from headwater.domain.models import Principal
from headwater.domain.runs import RunResult
from headwater.services.sources import SourceRequest
from headwater.settings import Settings
from tests.contract.conftest import aws_environment
from tests.fakes import FakeBundler, FakeRunner, to_end
from tests.services.test_services import HTTP, TIMER, component_code


def test_deploy_ingest_run_read_timers_and_delete_on_aws(aws_clients: Callable[[str], Any],
                                                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clients, queues = aws_environment(aws_clients, monkeypatch)
    runner = FakeRunner()
    runner.script = lambda instance, event: RunResult(emits=[Emit(event, {"id": event["n"]})],
                                                      db_writes={"n": event["n"]})
    settings = Settings(data_dir=tmp_path, backend="aws")
    adapters = aws_adapters(settings, clients, runner,
                            FakeBundler())
    services = bootstrap(settings, adapters)
    queue: Any = adapters.queue

    user, key = services.accounts.create_user("ada", "ada@example.com", "paid")
    ada = services.accounts.authenticate(key)
    assert ada.user.id == user.id
    req = SourceRequest(component_code=component_code(configurable_props=HTTP, dedupe="unique"), name="orders")
    source = to_end(services.sources.create(ada, req, None))
    again = to_end(services.sources.create(ada, req, None))
    assert (source.name_slug, again.name_slug) == ("orders", "orders-1")

    asyncio.run(services.ingest.receive(source.endpoint_id or "", {"n": 1}))
    asyncio.run(services.ingest.receive(source.endpoint_id or "", {"n": 1}))  # deduped by id
    while queue.poll_once():
        pass
    page = services.events.summaries(ada, source.id, 10, True, "")
    assert [item["event"] for item in page["data"]] == [{"n": 1}]

    timed = to_end(services.sources.create(ada, SourceRequest(component_code=component_code(configurable_props=TIMER),
                                                       configured_props={"timer": {"intervalSeconds": 300}}), None))
    while queue.poll_once():
        pass
    schedule = clients["scheduler"].get_schedule(Name=timed.id, GroupName="timers")
    assert schedule["ScheduleExpression"] == "rate(5 minutes)"

    to_end(services.sources.delete(ada, source.id))
    while queue.poll_once(queue_url=queues["deletions"]):
        pass
    assert services.events.newer_than(source.id, "", None) == []
    assert Principal(user).user.id == user.id


def test_each_run_sees_the_db_the_one_before_it_wrote_whichever_container_ran_it(
        aws_clients: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two Lambda containers (a composition each) take turns running one source's queued runs:
    each run starts from the `this.db` the run before it left, wherever that ran. Before, a
    container ran on the state it had kept in memory from its own last run (the DynamoDB lease
    always said nobody else had held the source), so its run counted 2 again and its commit
    wrote that over the other's 2 (issue 35: answers as local)."""
    clients, _ = aws_environment(aws_clients, monkeypatch)
    runner = FakeRunner()
    runner.script = lambda instance, event: RunResult(
        emits=[Emit({"count": instance.db.get("count", 0) + 1}, {})],
        db_writes={"count": instance.db.get("count", 0) + 1})
    settings = Settings(data_dir=tmp_path, backend="aws")
    one, other = (aws_adapters(settings, clients, runner, FakeBundler()) for _ in range(2))
    first = bootstrap(settings, one)
    bootstrap(settings, other)  # the second container: its handlers on its queue adapter
    _, key = first.accounts.create_user("ada", "ada@example.com", "paid")
    ada = first.accounts.authenticate(key)
    source = to_end(first.sources.create(ada, SourceRequest(component_code=component_code(configurable_props=HTTP)),
                                          None))
    while one.queue.poll_once():  # type: ignore[attr-defined]
        pass  # what the source's creation queued
    for n in range(4):
        asyncio.run(first.ingest.receive(source.endpoint_id or "", {"n": n}))
    for adapters in (one, other, one, other):  # one run each, in turn
        assert adapters.queue.poll_once(max_messages=1) == 1  # type: ignore[attr-defined]
    page = first.events.summaries(ada, source.id, 10, True, "")
    assert [item["event"]["count"] for item in page["data"]] == [4, 3, 2, 1]
