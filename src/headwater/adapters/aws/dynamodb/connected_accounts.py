"""Connected accounts on the resources table: `pk = <apn_id>, sk = #account`, the record as its
body beside `version` (every save conditions on it), listed per owner on gsi2
(`accounts#<owner>` / seq) like the other resources. Seqs come from one counter for all owners
(as components' do), so the lists of several owners merge into one newest-first list."""

from __future__ import annotations

from collections.abc import Collection

from headwater.adapters.aws.dynamodb.codec import Item, body, load, n, number, s
from headwater.adapters.aws.dynamodb.repositories import GLOBAL, NEW_ITEM, _Repository, listed
from headwater.adapters.aws.dynamodb.writes import delete, put, update
from headwater.domain.connected_accounts import ConnectedAccount
from headwater.domain.pagination import Page, PageRequest

SK = "#account"


def _account(item: Item) -> ConnectedAccount:
    return ConnectedAccount.from_json(load(item), number(item, "version"))


class DynamoConnectedAccounts(_Repository):
    def add(self, account: ConnectedAccount) -> None:
        self.uow.writable()
        seq = self.tables.next_seq(GLOBAL, "accounts")
        self.uow.write(put(self.table, {"pk": s(account.id), "sk": s(SK), "version": n(account.version),
                                        **listed("accounts", account.owner, seq),
                                        **body(account.to_json(), "account")},
                           NEW_ITEM, "id", exclusive=True))

    def get(self, account_id: str) -> ConnectedAccount | None:
        item = self._get(account_id, SK)
        return _account(item) if item else None

    def list(self, owner: str, page: PageRequest) -> Page[ConnectedAccount]:
        items, total = self._page(f"accounts#{owner}", page)
        return Page([_account(i) for i in items], [number(i, "seq") for i in items], total)

    def list_many(self, owners: Collection[str], page: PageRequest) -> Page[ConnectedAccount]:
        """Each owner's page (the `limit` items next to the cursor), merged: the merged page is
        among them."""
        items: list[Item] = []
        total = 0
        for owner in sorted(set(owners)):
            found, count = self._page(f"accounts#{owner}", page)
            items += found
            total += count
        items.sort(key=lambda i: number(i, "seq"), reverse=True)
        window = items[-page.limit:] if page.before is not None else items[:page.limit]
        return Page([_account(i) for i in window], [number(i, "seq") for i in window], total)

    def save(self, account: ConnectedAccount, expected_version: int) -> None:
        """An update, not a put: the list attributes stay; a missing item fails the condition."""
        (attribute, value), = body(account.to_json(), "account").items()
        stale = "body_z" if attribute == "body" else "body"  # a body that grew or shrank past compression
        self.uow.write(update(
            self.table, account.id, SK, "SET #body = :body, #v = :next REMOVE #stale",
            {":body": value, ":next": n(expected_version + 1), ":expected": n(expected_version)},
            {"#v": "version", "#body": attribute, "#stale": stale}, "#v = :expected", "version", exclusive=True))

    def remove(self, account_id: str) -> None:
        self.uow.write(delete(self.table, account_id, SK))
