"""The storage contract, resources: components, sources, state, and what routes events."""

from __future__ import annotations

import dataclasses

import pytest

from headwater.domain import ids
from headwater.domain.errors import Conflict
from headwater.domain.models import REGISTRY_NAMESPACE, SourceState
from headwater.domain.pagination import PageRequest
from headwater.domain.routing import Attempt, Delivery, Subscription, Webhook, subscription_key
from headwater.domain.workflows import Step, Workflow
from tests.contract import builders
from tests.contract.conftest import Backend

# components


def test_components_get_growing_seqs_and_the_newest_of_a_key_wins(store: Backend) -> None:
    alice, bob = builders.user(store), builders.user(store)
    first = builders.component(store, alice.id, "counter")
    second = builders.component(store, alice.id, "counter", code="export default { v: 2 }", file_name="counter.mjs")
    builders.component(store, bob.id, "counter")
    keyless = builders.component(store, alice.id, None)
    assert first.seq < second.seq < keyless.seq
    with store.uow(readonly=True) as uow:
        assert uow.components.get(first.id) == first
        assert uow.components.get("sc_missing") is None
        assert uow.components.latest_by_key(alice.id, "counter") == second
        assert uow.components.latest_by_key(alice.id, "other") is None


def test_publishing_replaces_the_registry_entry_of_a_key(store: Backend) -> None:
    alice = builders.user(store)
    first = builders.component(store, alice.id, "slack-new-message")
    second = builders.component(store, alice.id, "slack-new-message")
    with store.uow(readonly=True) as uow:
        assert uow.components.latest_by_key(REGISTRY_NAMESPACE, "slack-new-message") is None
    for published in (first, second):
        with store.uow() as uow:
            uow.components.publish(published)
            uow.commit()
        with store.uow(readonly=True) as uow:
            assert uow.components.latest_by_key(REGISTRY_NAMESPACE, "slack-new-message") == published


def test_the_registry_lists_one_component_per_key_newest_first(store: Backend) -> None:
    alice, bob = builders.user(store), builders.user(store)
    a1 = builders.component(store, alice.id, "a")
    b = builders.component(store, bob.id, "b")
    c = builders.component(store, alice.id, "c")
    a2 = builders.component(store, bob.id, "a")
    builders.component(store, alice.id, "unpublished")
    for published in (a1, b, c, a2):  # a2 replaces a1 as the entry of "a"
        with store.uow() as uow:
            uow.components.publish(published)
            uow.commit()
    with store.uow(readonly=True) as uow:
        first = uow.components.registry(PageRequest(limit=2))
        assert [x.id for x in first.items] == [a2.id, c.id] and first.total_count == 3
        rest = uow.components.registry(PageRequest(limit=2, after=first.seqs[-1]))
        assert [x.id for x in rest.items] == [b.id]
        assert [x.id for x in uow.components.registry(PageRequest(before=rest.seqs[0])).items] == [a2.id, c.id]


def test_component_lists_page_newest_first(store: Backend) -> None:
    alice = builders.user(store)
    made = [builders.component(store, alice.id, f"k{i}") for i in range(5)]
    builders.component(store, builders.user(store).id)  # another namespace
    with store.uow(readonly=True) as uow:
        page = uow.components.list(alice.id, PageRequest(limit=2))
        assert [c.id for c in page.items] == [made[4].id, made[3].id]
        assert page.total_count == 5
        older = uow.components.list(alice.id, PageRequest(limit=2, after=page.seqs[-1]))
        assert [c.id for c in older.items] == [made[2].id, made[1].id]
        newer = uow.components.list(alice.id, PageRequest(limit=2, before=older.seqs[0]))
        assert [c.id for c in newer.items] == [made[4].id, made[3].id]
        last = uow.components.list(alice.id, PageRequest(limit=2, after=older.seqs[-1]))
        assert [c.id for c in last.items] == [made[0].id]
        assert uow.components.list("u_nobody", PageRequest()).total_count == 0


# sources


def test_a_source_is_found_by_id_and_by_endpoint(store: Backend) -> None:
    alice = builders.user(store)
    comp = builders.component(store, alice.id)
    src = builders.add_source(store, builders.source(alice, comp.id, "hook", "en_one", nested={"a": [1, 2.0]}))
    assert src.seq > 0
    with store.uow(readonly=True) as uow:
        assert uow.sources.get(src.id) == src
        assert uow.sources.by_endpoint("en_one") == src
        assert uow.sources.by_endpoint("en_other") is None
        assert uow.sources.get("dc_missing") is None


def test_slugs_are_unique_per_namespace_and_endpoints_everywhere(store: Backend) -> None:
    alice, bob = builders.user(store), builders.user(store)
    comp = builders.component(store, alice.id)
    builders.add_source(store, builders.source(alice, comp.id, "hook", "en_one"))
    with pytest.raises(Conflict) as caught:
        builders.add_source(store, builders.source(alice, comp.id, "hook"))
    assert caught.value.field == "name_slug"
    with pytest.raises(Conflict) as caught:
        builders.add_source(store, builders.source(bob, comp.id, "other", "en_one"))
    assert caught.value.field == "endpoint_id"
    builders.add_source(store, builders.source(bob, comp.id, "hook"))  # another namespace: fine


def test_one_unit_of_work_cannot_claim_a_slug_twice(store: Backend) -> None:
    alice = builders.user(store)
    comp = builders.component(store, alice.id)
    first, second = builders.source(alice, comp.id, "twin"), builders.source(alice, comp.id, "twin")
    with pytest.raises(Conflict) as caught, store.uow() as uow:
        uow.sources.add(first)
        uow.sources.add(second)
        uow.commit()
    assert caught.value.field == "name_slug"
    with store.uow(readonly=True) as uow:
        assert uow.sources.get(first.id) is None and uow.sources.get(second.id) is None


def test_an_update_moves_the_slug_and_endpoint_claims(store: Backend) -> None:
    alice = builders.user(store)
    comp = builders.component(store, alice.id)
    src = builders.add_source(store, builders.source(alice, comp.id, "old", "en_old"))
    builders.add_source(store, builders.source(alice, comp.id, "taken"))
    moved = dataclasses.replace(src, name="New", name_slug="new", endpoint_id="en_new", updated_at=src.updated_at + 1)
    with store.uow() as uow:
        uow.sources.update(moved, src)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.sources.get(src.id) == moved
        assert uow.sources.by_endpoint("en_new") == moved
        assert uow.sources.by_endpoint("en_old") is None
    builders.add_source(store, builders.source(alice, comp.id, "old", "en_old"))  # both free again

    with pytest.raises(Conflict) as caught, store.uow() as uow:
        uow.sources.update(dataclasses.replace(moved, name_slug="taken"), moved)
        uow.commit()
    assert caught.value.field == "name_slug"
    with store.uow(readonly=True) as uow:
        assert uow.sources.get(src.id) == moved


def test_removing_a_source_frees_its_claims(store: Backend) -> None:
    alice = builders.user(store)
    comp = builders.component(store, alice.id)
    src = builders.add_source(store, builders.source(alice, comp.id, "hook", "en_one"))
    with store.uow() as uow:
        uow.sources.remove(src)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.sources.get(src.id) is None
        assert uow.sources.by_endpoint("en_one") is None
        assert uow.sources.list(alice.id, PageRequest()).total_count == 0
    builders.add_source(store, builders.source(alice, comp.id, "hook", "en_one"))


def test_source_cursors_hold_while_sources_are_added(store: Backend) -> None:
    alice = builders.user(store)
    comp = builders.component(store, alice.id)
    made = [builders.add_source(store, builders.source(alice, comp.id, f"s{i}")) for i in range(6)]
    with store.uow(readonly=True) as uow:
        first = uow.sources.list(alice.id, PageRequest(limit=3))
    assert [s.id for s in first.items] == [s.id for s in made[:2:-1]]
    newer = [builders.add_source(store, builders.source(alice, comp.id, f"n{i}")) for i in range(2)]
    with store.uow(readonly=True) as uow:
        second = uow.sources.list(alice.id, PageRequest(limit=3, after=first.seqs[-1]))
        assert [s.id for s in second.items] == [s.id for s in made[2::-1]]  # no duplicates, no gaps
        assert second.total_count == 8
        assert uow.sources.list(alice.id, PageRequest(limit=3, after=second.seqs[-1])).items == []
        ahead = uow.sources.list(alice.id, PageRequest(limit=3, before=first.seqs[0]))
        assert [s.id for s in ahead.items] == [s.id for s in newer[::-1]]


# state


def test_state_is_saved_on_its_version(store: Backend) -> None:
    with store.uow(readonly=True) as uow:
        empty = uow.state.get("dc_x")
    assert empty == SourceState() and empty.version == 0

    first = SourceState(db={"n": 1, "f": 0.5}, dedupe={"ids": ['"a"']}, last_ms=5, last_seq=7, applied=["t1"],
                        timer_run_since=12.5, last_tick=3.0, channels=["c"], runs=4,
                        activity={"h": [3600, [[1, 2, 0, 3]]]}, last_run_ms=5, last_event_ms=4, ran_tick=3600.0,
                        skipped_ticks=3, stalled={"since": 1.0}, snapshots=2)
    unset = [f.name for f in dataclasses.fields(SourceState)
             if f.name != "version" and getattr(first, f.name) == getattr(empty, f.name)]
    assert not unset, f"give {unset} a value here: every field of the state must survive each store"
    with store.uow() as uow:
        uow.state.save("dc_x", first, 0)
        uow.commit()
    with store.uow(readonly=True) as uow:
        saved = uow.state.get("dc_x")
    assert saved == dataclasses.replace(first, version=1)

    with pytest.raises(Conflict) as caught, store.uow() as uow:  # twice on one version in one unit of work
        uow.state.save("dc_y", SourceState(), 0)
        uow.state.save("dc_y", SourceState(), 0)
        uow.commit()
    assert caught.value.field == "version"
    for stale in (0, 2):
        with pytest.raises(Conflict) as caught, store.uow() as uow:
            uow.state.save("dc_x", SourceState(db={"lost": True}), stale)
            uow.commit()
        assert caught.value.field == "version"
    with store.uow() as uow:
        uow.state.save("dc_x", dataclasses.replace(saved, db={"n": 2}), 1)
        uow.commit()
    with store.uow() as uow:
        assert uow.state.get("dc_x").db == {"n": 2} and uow.state.get("dc_x").version == 2
        uow.state.remove("dc_x")
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.state.get("dc_x") == SourceState()


# routing


def test_subscriptions_are_idempotent_and_go_with_what_they_name(store: Backend) -> None:
    def sub(namespace: str, emitter: str, listener: str, created_at: int) -> Subscription:
        return Subscription(subscription_key(namespace, emitter, listener, ""), namespace, emitter, listener, "",
                            created_at)

    a, b, c = sub("u_1", "dc_a", "dc_b", 10), sub("u_1", "dc_b", "wh_c", 20), sub("u_2", "dc_x", "dc_a", 30)
    with store.uow() as uow:
        for s in (a, b, c):
            uow.subscriptions.add(s)
        uow.commit()
    with store.uow() as uow:
        uow.subscriptions.add(dataclasses.replace(a, created_at=99))  # again: nothing changes
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.subscriptions.for_namespace("u_1") == [a, b]
    with store.uow() as uow:
        uow.subscriptions.remove_naming("dc_a")  # as emitter in u_1, as listener in u_2
        uow.commit()
    with store.uow() as uow:
        assert uow.subscriptions.for_namespace("u_1") == [b]
        assert uow.subscriptions.for_namespace("u_2") == []
        assert uow.subscriptions.remove(b.id) is True
        uow.commit()
    with store.uow() as uow:
        assert uow.subscriptions.remove(b.id) is False
        assert uow.subscriptions.for_namespace("u_1") == []


def test_a_backfilling_subscription_is_kept_as_such_until_its_backfill_is_finished(store: Backend) -> None:
    sub = Subscription(subscription_key("u_1", "dc_a", "wh_b", ""), "u_1", "dc_a", "wh_b", "", 10, backfilling=True)
    other = Subscription(subscription_key("u_1", "dc_a", "wh_c", ""), "u_1", "dc_a", "wh_c", "", 11, backfilling=True)
    with store.uow() as uow:
        uow.subscriptions.add(sub)
        uow.subscriptions.add(other)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.subscriptions.for_namespace("u_1") == [sub, other]
    with store.uow() as uow:
        uow.subscriptions.finish_backfill(sub.id)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.subscriptions.for_namespace("u_1") == [dataclasses.replace(sub, backfilling=False), other]
    with store.uow() as uow:
        assert uow.subscriptions.remove(sub.id)
        uow.commit()
    with store.uow() as uow:
        uow.subscriptions.finish_backfill(sub.id)  # gone: not made again
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.subscriptions.for_namespace("u_1") == [other]


def test_webhooks_and_their_deliveries(store: Backend) -> None:
    alice = builders.user(store)
    hooks = [Webhook(ids.new_id("webhook"), alice.id, alice.id, f"https://example.com/{i}", "secret", name=f"w{i}",
                     created_at=i, updated_at=i) for i in range(3)]
    with store.uow() as uow:
        for hook in hooks:
            uow.webhooks.add(hook)
        uow.commit()
    changed = dataclasses.replace(hooks[0], url="https://example.com/new", name=None, active=False, updated_at=9,
                                  signing_secret="ignored")
    with store.uow() as uow:
        uow.webhooks.update(changed)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.webhooks.get(hooks[0].id) == dataclasses.replace(changed, signing_secret="secret")
        page = uow.webhooks.list(alice.id, PageRequest(limit=2))
        assert [w.id for w in page.items] == [hooks[2].id, hooks[1].id] and page.total_count == 3

    deliveries = [Delivery(f"msg_{i}", hooks[1].id, "dc_a", f"1-{i}", {"event": i}, created_at_ms=i)
                  for i in range(3)]
    with store.uow() as uow:
        for d in deliveries:
            uow.deliveries.add(d)
        uow.commit()
    with pytest.raises(Conflict) as caught, store.uow() as uow:
        uow.deliveries.add(deliveries[0])
        uow.commit()
    assert caught.value.field == "delivery"
    with store.uow() as uow:
        current = uow.deliveries.get("msg_0")
        assert current is not None and current.version == 1
        retried = dataclasses.replace(current, status="failed", attempts=[Attempt(5, 500, "boom", 12)], next_at=6.5)
        uow.deliveries.save(retried, current.version)
        uow.commit()
    with pytest.raises(Conflict) as caught, store.uow() as uow:
        uow.deliveries.save(retried, 1)
        uow.commit()
    assert caught.value.field == "version"
    with store.uow() as uow:
        assert uow.deliveries.get("msg_0") == dataclasses.replace(retried, version=2)
        page = uow.deliveries.for_webhook(hooks[1].id, PageRequest(limit=2))
        assert [d.id for d in page.items] == ["msg_2", "msg_1"] and page.total_count == 3
        assert page.items[1] == dataclasses.replace(deliveries[1], version=1)  # whole, read through the index
        rest = uow.deliveries.for_webhook(hooks[1].id, PageRequest(limit=2, after=page.seqs[-1]))
        assert [d.id for d in rest.items] == ["msg_0"] and rest.items[0].attempts == retried.attempts
        back = uow.deliveries.for_webhook(hooks[1].id, PageRequest(limit=1, before=rest.seqs[0]))
        assert [d.id for d in back.items] == ["msg_1"] and back.total_count == 3
        assert uow.deliveries.for_webhook(hooks[0].id, PageRequest(limit=2)).items == []
        uow.webhooks.remove(hooks[2].id)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.webhooks.get(hooks[2].id) is None


def test_workflows_have_unique_names_per_namespace(store: Backend) -> None:
    def workflow(namespace: str, name: str) -> Workflow:
        return Workflow(ids.new_id("workflow"), namespace, namespace, name, "d_1",
                        [Step("first", "./a.mjs", {"x": "{{ steps.trigger.event }}"}, "sc_1")], "dc_1", 1, 1)

    one, two = workflow("u_1", "alpha"), workflow("u_1", "beta")
    with store.uow() as uow:
        uow.workflows.add(one)
        uow.workflows.add(two)
        uow.workflows.add(workflow("u_2", "alpha"))
        uow.commit()
    with pytest.raises(Conflict) as caught, store.uow() as uow:
        uow.workflows.add(workflow("u_1", "alpha"))
        uow.commit()
    assert caught.value.field == "name"
    changed = dataclasses.replace(one, steps=[Step("other", "sc_2")], updated_at=2)
    with store.uow() as uow:
        uow.workflows.update(changed)
        uow.commit()
    with store.uow() as uow:
        assert uow.workflows.get(one.id) == changed
        assert uow.workflows.by_name("u_1", "alpha") == changed
        assert uow.workflows.by_name("u_1", "gamma") is None
        assert [w.id for w in uow.workflows.list("u_1")] == [two.id, one.id]
        uow.workflows.remove(two)
        uow.commit()
    with store.uow(readonly=True) as uow:
        assert uow.workflows.get(two.id) is None and uow.workflows.by_name("u_1", "beta") is None
