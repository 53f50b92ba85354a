"""Apps' OAuth clients and connects in progress on the resources table (domain.oauth):
`pk = oauth_clients#<owner>, sk = <app>` (an owner's clients are one query), and
`pk = <state>, sk = #connect` with `expires_at` (the table's TTL attribute); a pending connect
is taken by a delete conditioned on its existence (one taker wins)."""

from __future__ import annotations

import time

from headwater.adapters.aws.dynamodb.codec import Item, body, load, n, number, s
from headwater.adapters.aws.dynamodb.repositories import NEW_ITEM, _Repository
from headwater.adapters.aws.dynamodb.tables import Query
from headwater.adapters.aws.dynamodb.writes import Write, delete, put
from headwater.domain.oauth import OAuthClient, PendingConnect

CONNECT = "#connect"


def _clients(owner: str) -> str:
    return f"oauth_clients#{owner}"


def _client(item: Item) -> OAuthClient:
    return OAuthClient.from_json(load(item))


class DynamoOAuthClients(_Repository):
    def put(self, client: OAuthClient) -> None:
        self.uow.writable()
        self.uow.write(put(self.table, {"pk": s(_clients(client.owner)), "sk": s(client.app),
                                        **body(client.to_json(), "oauth client")}))

    def get(self, owner: str, app: str) -> OAuthClient | None:
        item = self._get(_clients(owner), app)
        return _client(item) if item else None

    def list(self, owner: str) -> list[OAuthClient]:
        items = self.tables.query(Query(self.table, "pk = :pk", {":pk": s(_clients(owner))}))
        return [_client(i) for i in items]

    def remove(self, owner: str, app: str) -> None:
        self.uow.writable()
        self.uow.write(delete(self.table, _clients(owner), app))


class DynamoPendingConnects(_Repository):
    def add(self, pending: PendingConnect) -> None:
        self.uow.writable()
        self.uow.write(put(self.table, {"pk": s(pending.state), "sk": s(CONNECT), "expires_at": n(pending.expires_at),
                                        **body(pending.to_json(), "connect")}, NEW_ITEM, "state", exclusive=True))

    def get(self, state: str) -> PendingConnect | None:
        item = self._get(state, CONNECT)
        if item is None or number(item, "expires_at") < int(time.time()):  # TTL deletes only eventually
            return None
        return PendingConnect.from_json(load(item))

    def take(self, state: str) -> None:
        self.uow.writable()
        self.uow.write(Write(self.table, state, CONNECT, {"Delete": {
            "TableName": self.table, "Key": {"pk": s(state), "sk": s(CONNECT)},
            "ConditionExpression": "attribute_exists(pk)"}}, "state", exclusive=True))
