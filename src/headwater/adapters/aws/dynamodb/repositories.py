"""The resource repositories over the resources table (item layout: docs/aws.md, "Tables").

Each record is one item under its own id (`pk = <id>`); what must be unique is a separate claim
item (`pk = username#<name>`, `slug#<namespace>#<slug>`, ...) put with `attribute_not_exists(pk)`
in the same transaction, so a taken value cancels the whole change and names its field. Lists
are the `gsi2` index (`<kind>#<namespace>`, zero-padded seq), newest first; point lookups by a
unique value read its claim, which (unlike a GSI) can be read consistently.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from headwater.adapters.aws.dynamodb.codec import Item, body, load, n, number, s, seq_key, text
from headwater.adapters.aws.dynamodb.tables import Query
from headwater.adapters.aws.dynamodb.writes import delete, put, update
from headwater.domain.models import (
    REGISTRY_NAMESPACE,
    Component,
    ComponentDefinition,
    Org,
    Source,
    SourceState,
    User,
)
from headwater.domain.pagination import Page, PageRequest
from headwater.domain.routing import Attempt, Delivery, Subscription, Webhook
from headwater.domain.workflows import Step, Workflow

if TYPE_CHECKING:
    from headwater.adapters.aws.dynamodb.uow import DynamoUnitOfWork

CLAIM = "#claim"
GLOBAL = "#global"  # the partition of counters that are not per namespace
NEW_ITEM = "attribute_not_exists(pk)"


class _Repository:
    def __init__(self, uow: DynamoUnitOfWork) -> None:
        self.uow = uow
        self.tables = uow.tables
        self.table = uow.tables.resources

    def _get(self, pk: str, sk: str) -> Item | None:
        return self.tables.get(self.table, pk, sk)

    def _claim(self, pk: str, owner_id: str, field: str) -> None:
        """Puts a uniqueness claim; Conflict(field) at commit when someone holds it."""
        self.uow.write(put(self.table, {"pk": s(pk), "sk": s(CLAIM), "id": s(owner_id)}, NEW_ITEM, field,
                           exclusive=True))

    def _claimed(self, pk: str) -> str | None:
        item = self._get(pk, CLAIM)
        return text(item, "id") if item else None

    def _page(self, list_key: str, page: PageRequest, index: str = "gsi2") -> tuple[list[Item], int]:
        """Newest-first paging on gsi2 (or `index`, keyed alike) by seq: the DynamoDB form of
        domain.pagination.paginate."""
        everything = Query(self.table, f"{index}pk = :pk", {":pk": s(list_key)}, index=index)
        if page.after is not None:
            q = Query(self.table, f"{index}pk = :pk AND {index}sk < :c",
                      {":pk": s(list_key), ":c": s(seq_key(page.after))}, index=index, forward=False)
            items = self.tables.query(q, page.limit)
        elif page.before is not None:
            q = Query(self.table, f"{index}pk = :pk AND {index}sk > :c",
                      {":pk": s(list_key), ":c": s(seq_key(page.before))}, index=index, forward=True)
            items = self.tables.query(q, page.limit)[::-1]
        else:
            items = self.tables.query(dataclasses.replace(everything, forward=False), page.limit)
        return items, self.tables.count(everything)


def listed(kind: str, namespace: str, seq: int) -> Item:
    """The gsi2 attributes that put an item in a newest-first list."""
    return {"gsi2pk": s(f"{kind}#{namespace}"), "gsi2sk": s(seq_key(seq)), "seq": n(seq)}


# accounts


class DynamoUsers(_Repository):
    def add(self, user: User) -> None:
        self.uow.write(put(self.table, {"pk": s(user.id), "sk": s("#user"), **body(dataclasses.asdict(user))}))
        self._claim(f"username#{user.username}", user.id, "username")

    def get(self, user_id: str) -> User | None:
        item = self._get(user_id, "#user")
        return User(**load(item)) if item else None

    def org_ids(self, user_id: str) -> frozenset[str]:
        q = Query(self.table, "pk = :pk AND begins_with(sk, :member)",
                  {":pk": s(user_id), ":member": s("member#")}, projection="sk")
        return frozenset(text(item, "sk").removeprefix("member#") for item in self.tables.iterate(q))


class DynamoOrgs(_Repository):
    def add(self, org: Org) -> None:
        self.uow.write(put(self.table, {"pk": s(org.id), "sk": s("#org"), **body(dataclasses.asdict(org))}))
        self._claim(f"orgname#{org.orgname}", org.id, "orgname")

    def get(self, org_id: str) -> Org | None:
        item = self._get(org_id, "#org")
        return Org(**load(item)) if item else None

    def add_member(self, org_id: str, user_id: str) -> None:
        """Kept under the user (consistent reads for org_ids); gsi1 lists an org's members."""
        self.uow.write(put(self.table, {"pk": s(user_id), "sk": s(f"member#{org_id}"),
                                        "gsi1pk": s(f"members#{org_id}"), "gsi1sk": s(user_id)}))

    def for_user(self, user_id: str) -> list[Org]:
        org_ids = DynamoUsers(self.uow).org_ids(user_id)
        orgs = [Org(**load(item)) for item in self.tables.get_many(self.table, [(o, "#org") for o in org_ids])]
        return sorted(orgs, key=lambda o: (o.created_at, o.id))


class DynamoApiKeys(_Repository):
    """A key is found by its hash (`pk = apikey#<sha256>`); gsi1 lists a user's keys."""

    def add(self, key_hash: str, user_id: str, created_at: int) -> None:
        self.uow.write(put(self.table, {"pk": s(f"apikey#{key_hash}"), "sk": s("#key"), "user_id": s(user_id),
                                        "created_at": n(created_at), "gsi1pk": s(f"keys#{user_id}"),
                                        "gsi1sk": s(key_hash)}))

    def user_for(self, key_hash: str) -> str | None:
        item = self._get(f"apikey#{key_hash}", "#key")
        return text(item, "user_id") if item and "revoked_at" not in item else None

    def revoke(self, key_hash: str, revoked_at: int) -> bool:
        if self.user_for(key_hash) is None:
            return False
        # if_not_exists: a concurrent revocation keeps its time, and neither fails
        self.uow.write(update(self.table, f"apikey#{key_hash}", "#key", "SET #r = if_not_exists(#r, :at)",
                              {":at": n(revoked_at)}, {"#r": "revoked_at"}, condition="attribute_exists(pk)"))
        return True


# components


def _component(item: Item) -> Component:
    data = load(item)
    data["definition"] = ComponentDefinition(**data["definition"])
    return Component(**{**data, "seq": number(item, "seq")})


class DynamoComponents(_Repository):
    """gsi1 finds a namespace's newest component of a key. The registry is one item per key,
    listed on gsi2 by its component's seq; as that list spans namespaces, component seqs come
    from one counter for all (components are created seldom enough for one item to take)."""

    def add(self, component: Component) -> None:
        self.uow.writable()
        component.seq = self.tables.next_seq(GLOBAL, "components")
        item: Item = {"pk": s(component.id), "sk": s("#component"), **listed("components", component.namespace,
                                                                           component.seq)}
        if component.key:
            item |= {"gsi1pk": s(f"compkey#{component.namespace}#{component.key}"), "gsi1sk": s(seq_key(component.seq))}
        self.uow.write(put(self.table, item | body(dataclasses.asdict(component), "component")))

    def get(self, component_id: str) -> Component | None:
        item = self._get(component_id, "#component")
        return _component(item) if item else None

    def latest_by_key(self, namespace: str, key: str) -> Component | None:
        if namespace == REGISTRY_NAMESPACE:
            component_id = self._registered(key)
            return self.get(component_id) if component_id else None
        q = Query(self.table, "gsi1pk = :pk", {":pk": s(f"compkey#{namespace}#{key}")}, index="gsi1", forward=False)
        items = self.tables.query(q, 1)
        return _component(items[0]) if items else None

    def list(self, namespace: str, page: PageRequest) -> Page[Component]:
        items, total = self._page(f"components#{namespace}", page)
        return Page([_component(i) for i in items], [number(i, "seq") for i in items], total)

    def publish(self, component: Component) -> None:
        self.uow.write(put(self.table, {"pk": s(f"registry#{component.key}"), "sk": s("#registry"),
                                        "id": s(component.id), **listed("registry", "", component.seq)}))

    def registry(self, page: PageRequest) -> Page[Component]:
        entries, total = self._page("registry#", page)
        found = {c.id: c for c in map(_component, self.tables.get_many(
            self.table, [(text(e, "id"), "#component") for e in entries]))}
        items = [found[text(e, "id")] for e in entries if text(e, "id") in found]
        return Page(items, [c.seq for c in items], total)

    def _registered(self, key: str) -> str | None:
        item = self._get(f"registry#{key}", "#registry")
        return text(item, "id") if item else None


# sources


def _source(item: Item) -> Source:
    return Source(**{**load(item), "seq": number(item, "seq")})


def _slug_claim(source: Source) -> str:
    return f"slug#{source.namespace}#{source.name_slug}"


def _endpoint_claim(endpoint_id: str) -> str:
    return f"endpoint#{endpoint_id}"


class DynamoSources(_Repository):
    """Claims: `slug#<namespace>#<slug>` and `endpoint#<endpoint_id>`, each naming the source;
    the endpoint claim is also how a request to /http/{endpoint_id} finds its source."""

    def add(self, source: Source) -> None:
        self.uow.writable()
        source.seq = self.tables.next_seq(source.namespace, "sources")
        self._put(source)
        self._claim(_slug_claim(source), source.id, "name_slug")
        if source.endpoint_id:
            self._claim(_endpoint_claim(source.endpoint_id), source.id, "endpoint_id")

    def update(self, source: Source, previous: Source) -> None:
        source.seq = source.seq or previous.seq
        self._put(source)
        if _slug_claim(source) != _slug_claim(previous):
            self.uow.write(delete(self.table, _slug_claim(previous), CLAIM))
            self._claim(_slug_claim(source), source.id, "name_slug")
        if source.endpoint_id != previous.endpoint_id:
            if previous.endpoint_id:
                self.uow.write(delete(self.table, _endpoint_claim(previous.endpoint_id), CLAIM))
            if source.endpoint_id:
                self._claim(_endpoint_claim(source.endpoint_id), source.id, "endpoint_id")

    def remove(self, source: Source) -> None:
        self.uow.write(delete(self.table, source.id, "#source"))
        self.uow.write(delete(self.table, _slug_claim(source), CLAIM))
        if source.endpoint_id:
            self.uow.write(delete(self.table, _endpoint_claim(source.endpoint_id), CLAIM))

    def get(self, source_id: str) -> Source | None:
        item = self._get(source_id, "#source")
        return _source(item) if item else None

    def by_endpoint(self, endpoint_id: str) -> Source | None:
        source_id = self._claimed(_endpoint_claim(endpoint_id))
        source = self.get(source_id) if source_id else None
        return source if source is not None and source.endpoint_id == endpoint_id else None

    def list(self, namespace: str, page: PageRequest) -> Page[Source]:
        items, total = self._page(f"sources#{namespace}", page)
        return Page([_source(i) for i in items], [number(i, "seq") for i in items], total)

    def _put(self, source: Source) -> None:
        data = {k: v for k, v in dataclasses.asdict(source).items() if k != "seq"}
        self.uow.write(put(self.table, {"pk": s(source.id), "sk": s("#source"),
                                        **listed("sources", source.namespace, source.seq), **body(data, "source")}))


class DynamoState(_Repository):
    """`pk = <source_id>, sk = state`: the body and a `version` that every save conditions on."""

    def get(self, source_id: str) -> SourceState:
        item = self._get(source_id, "state")
        return SourceState.from_json(load(item), number(item, "version")) if item else SourceState()

    def save(self, source_id: str, state: SourceState, expected_version: int) -> None:
        item = {"pk": s(source_id), "sk": s("state"), "version": n(expected_version + 1),
                **body(state.to_json(), "source state")}
        if expected_version == 0:
            self.uow.write(put(self.table, item, NEW_ITEM, "version", exclusive=True))
        else:
            self.uow.write(put(self.table, item, "#v = :expected", "version", {":expected": n(expected_version)},
                               {"#v": "version"}, exclusive=True))

    def remove(self, source_id: str) -> None:
        self.uow.write(delete(self.table, source_id, "state"))


# routing


def _subscription(item: Item) -> Subscription:
    return Subscription(**load(item))


class DynamoSubscriptions(_Repository):
    """`pk = <sub_id>`: `#subscription` (gsi1: its namespace's list; gsi2: `naming#<emitter>`)
    and `#listener` (gsi2: `naming#<listener>`), so a deleted resource finds every subscription
    naming it either way."""

    def add(self, subscription: Subscription) -> None:
        self.uow.writable()
        if self._get(subscription.id, "#subscription") is not None:
            return  # idempotent: the first one keeps its created_at
        sub = subscription
        self.uow.write(put(self.table, _subscription_item(sub)))
        self.uow.write(put(self.table, {"pk": s(sub.id), "sk": s("#listener"),
                                        "gsi2pk": s(f"naming#{sub.listener_id}"), "gsi2sk": s(sub.id)}))

    def remove(self, subscription_id: str) -> bool:
        self.uow.writable()
        if self._get(subscription_id, "#subscription") is None:
            return False
        self.uow.write(delete(self.table, subscription_id, "#subscription"))
        self.uow.write(delete(self.table, subscription_id, "#listener"))
        return True

    def for_namespace(self, namespace: str) -> list[Subscription]:
        q = Query(self.table, "gsi1pk = :pk", {":pk": s(f"subs#{namespace}")}, index="gsi1")
        return [_subscription(item) for item in self.tables.iterate(q)]

    def remove_naming(self, resource_id: str) -> None:
        """After the commit, in batches: a resource may be named by more subscriptions than one
        transaction takes, and a leftover subscription to a deleted resource routes nowhere."""
        def remove() -> None:
            q = Query(self.table, "gsi2pk = :pk", {":pk": s(f"naming#{resource_id}")}, index="gsi2",
                      projection="pk")
            ids = {text(item, "pk") for item in self.tables.iterate(q)}
            self.tables.delete_keys(self.table, [(i, sk) for i in sorted(ids) for sk in ("#subscription", "#listener")])

        self.uow.after_commit(remove)

    def finish_backfill(self, subscription_id: str) -> None:
        """Conditional on the item being there, so that an unsubscribe meanwhile is not undone
        (a Conflict on `subscription` then)."""
        self.uow.writable()
        item = self._get(subscription_id, "#subscription")
        if item is None:
            return
        sub = dataclasses.replace(_subscription(item), backfilling=False)
        self.uow.write(put(self.table, _subscription_item(sub), "attribute_exists(pk)", "subscription"))


def _subscription_item(sub: Subscription) -> Item:
    return {"pk": s(sub.id), "sk": s("#subscription"), **body(dataclasses.asdict(sub)),
            "gsi1pk": s(f"subs#{sub.namespace}"), "gsi1sk": s(f"{sub.created_at:020d}#{sub.id}"),
            "gsi2pk": s(f"naming#{sub.emitter_id}"), "gsi2sk": s(sub.id)}


_WEBHOOK_FIELDS = ("url", "name", "description", "active", "updated_at")  # what update() changes


def _webhook(item: Item) -> Webhook:
    return Webhook(**{**load(item), **load_fields(item, _WEBHOOK_FIELDS), "seq": number(item, "seq")})


def fields(values: dict[str, Any]) -> Item:
    """Small scalar fields as attributes of their own, so an update can SET them without a read."""
    out: Item = {}
    for name, value in values.items():
        if value is None:
            out[name] = {"NULL": True}
        elif isinstance(value, bool):
            out[name] = {"BOOL": value}
        elif isinstance(value, int | float):
            out[name] = n(value)
        else:
            out[name] = s(str(value))
    return out


def load_fields(item: Item, names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        value = item.get(name, {"NULL": True})
        if "S" in value:
            out[name] = value["S"]
        elif "BOOL" in value:
            out[name] = value["BOOL"]
        elif "N" in value:
            out[name] = int(value["N"]) if value["N"].lstrip("-").isdigit() else float(value["N"])
        else:
            out[name] = None
    return out


class DynamoWebhooks(_Repository):
    """The fixed fields in the body; the ones update() may change as attributes of their own (it
    leaves the signing secret, owner and creation time as they are, as the SQL store does)."""

    def add(self, webhook: Webhook) -> None:
        self.uow.writable()
        webhook.seq = self.tables.next_seq(webhook.namespace, "webhooks")
        data = dataclasses.asdict(webhook)
        fixed = {k: v for k, v in data.items() if k not in (*_WEBHOOK_FIELDS, "seq")}
        self.uow.write(put(self.table, {"pk": s(webhook.id), "sk": s("#webhook"),
                                        **listed("webhooks", webhook.namespace, webhook.seq), **body(fixed),
                                        **fields({k: data[k] for k in _WEBHOOK_FIELDS})}))

    def get(self, webhook_id: str) -> Webhook | None:
        item = self._get(webhook_id, "#webhook")
        return _webhook(item) if item else None

    def update(self, webhook: Webhook) -> None:
        """A webhook removed meanwhile stays removed (a no-op, as in SQL)."""
        self.uow.writable()
        if self._get(webhook.id, "#webhook") is None:
            return
        values = fields({k: getattr(webhook, k) for k in _WEBHOOK_FIELDS})
        names = {f"#{k}": k for k in _WEBHOOK_FIELDS}
        self.uow.write(update(self.table, webhook.id, "#webhook", "SET " + ", ".join(f"#{k} = :{k}"
                                                                                    for k in _WEBHOOK_FIELDS),
                              {f":{k}": v for k, v in values.items()}, names, "attribute_exists(pk)", "webhook"))

    def remove(self, webhook_id: str) -> None:
        self.uow.write(delete(self.table, webhook_id, "#webhook"))

    def list(self, namespace: str, page: PageRequest) -> Page[Webhook]:
        items, total = self._page(f"webhooks#{namespace}", page)
        return Page([_webhook(i) for i in items], [number(i, "seq") for i in items], total)


def _delivery(item: Item) -> Delivery:
    data = load(item)
    data["attempts"] = [Attempt(**a) for a in data["attempts"]]
    return Delivery(**{**data, "version": number(item, "version")})


def _delivery_body(delivery: Delivery) -> Item:
    return body({**dataclasses.asdict(delivery), "version": None}, "delivery")


DELIVERIES_INDEX = "gsi3"  # keys only: a delivery's saves write no copy of it to an index


def delivery_listed(webhook_id: str, seq: int) -> Item:
    """The gsi3 attributes that put a delivery in its webhook's newest-first list."""
    return {"gsi3pk": s(f"deliveries#{webhook_id}"), "gsi3sk": s(seq_key(seq)), "seq": n(seq)}


class DynamoDeliveries(_Repository):
    """`pk = <delivery_id>`, listed per webhook on gsi3 (keys only: a page is read from the index,
    then its items by BatchGetItem); saved conditionally on `version`. Deliveries made before gsi3
    are listed once `python -m headwater.adapters.aws.dynamodb.backfill` gave them its keys."""

    def add(self, delivery: Delivery) -> None:
        self.uow.writable()
        if not self.uow.will_run_before_commit(self._number):
            self._unnumbered: dict[str, list[Item]] = {}
        item = {"pk": s(delivery.id), "sk": s("#delivery"), "version": n(1), **_delivery_body(delivery)}
        self.uow.write(put(self.table, item, NEW_ITEM, "delivery", exclusive=True))
        self._unnumbered.setdefault(delivery.webhook_id, []).append(item)
        self.uow.before_commit(self._number)

    def _number(self) -> None:
        """The commit's deliveries get their places in their webhooks' lists: one counter add per
        webhook for all of its deliveries, not one each (a run's commit makes several)."""
        for webhook_id, items in self._unnumbered.items():
            last = self.tables.next_seq(webhook_id, "deliveries", len(items))
            for seq, item in zip(range(last - len(items) + 1, last + 1), items, strict=True):
                item.update(delivery_listed(webhook_id, seq))
        self._unnumbered = {}

    def get(self, delivery_id: str) -> Delivery | None:
        item = self._get(delivery_id, "#delivery")
        return _delivery(item) if item else None

    def save(self, delivery: Delivery, expected_version: int) -> None:
        (attribute, value), = _delivery_body(delivery).items()
        stale = "body_z" if attribute == "body" else "body"  # a body that grew or shrank past compression
        self.uow.write(update(
            self.table, delivery.id, "#delivery", "SET #body = :body, #v = :next REMOVE #stale",
            {":body": value, ":next": n(expected_version + 1), ":expected": n(expected_version)},
            {"#v": "version", "#body": attribute, "#stale": stale}, "#v = :expected", "version", exclusive=True))

    def for_webhook(self, webhook_id: str, page: PageRequest) -> Page[Delivery]:
        keys, total = self._page(f"deliveries#{webhook_id}", page, DELIVERIES_INDEX)
        found = {text(i, "pk"): i for i in self.tables.get_many(self.table, [(text(k, "pk"), "#delivery")
                                                                             for k in keys])}
        items = [found[text(k, "pk")] for k in keys if text(k, "pk") in found]
        return Page([_delivery(i) for i in items], [number(i, "seq") for i in items], total)


# workflows


def _workflow(item: Item) -> Workflow:
    data = load(item)
    data["steps"] = [Step(**step) for step in data["steps"]]
    return Workflow(**{**data, "seq": number(item, "seq")})


def _name_claim(namespace: str, name: str) -> str:
    return f"workflow#{namespace}#{name}"


class DynamoWorkflows(_Repository):
    """`pk = <workflow_id>`, listed on gsi2; the name is a claim in its namespace."""

    def add(self, workflow: Workflow) -> None:
        self.uow.writable()
        workflow.seq = self.tables.next_seq(workflow.namespace, "workflows")
        self._put(workflow)
        self._claim(_name_claim(workflow.namespace, workflow.name), workflow.id, "name")

    def update(self, workflow: Workflow) -> None:
        current = self.get(workflow.id)
        if current is None:
            return
        workflow.seq = workflow.seq or current.seq
        self._put(workflow)
        if (current.namespace, current.name) != (workflow.namespace, workflow.name):
            self.uow.write(delete(self.table, _name_claim(current.namespace, current.name), CLAIM))
            self._claim(_name_claim(workflow.namespace, workflow.name), workflow.id, "name")

    def get(self, workflow_id: str) -> Workflow | None:
        item = self._get(workflow_id, "#workflow")
        return _workflow(item) if item else None

    def by_name(self, namespace: str, name: str) -> Workflow | None:
        workflow_id = self._claimed(_name_claim(namespace, name))
        return self.get(workflow_id) if workflow_id else None

    def list(self, namespace: str) -> list[Workflow]:
        q = Query(self.table, "gsi2pk = :pk", {":pk": s(f"workflows#{namespace}")}, index="gsi2", forward=False)
        return [_workflow(item) for item in self.tables.iterate(q)]

    def remove(self, workflow: Workflow) -> None:
        self.uow.write(delete(self.table, workflow.id, "#workflow"))
        self.uow.write(delete(self.table, _name_claim(workflow.namespace, workflow.name), CLAIM))

    def _put(self, workflow: Workflow) -> None:
        data = {k: v for k, v in dataclasses.asdict(workflow).items() if k != "seq"}
        self.uow.write(put(self.table, {"pk": s(workflow.id), "sk": s("#workflow"),
                                        **listed("workflows", workflow.namespace, workflow.seq),
                                        **body(data, "workflow")}))
