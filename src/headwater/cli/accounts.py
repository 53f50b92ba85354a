"""Connected accounts from the command line: `headwater accounts list|create|show|update|delete`.
Credentials go to the service and are never printed back; to keep them out of the shell's history,
give them in a JSON file or on stdin (`--credentials -`) rather than as `--credential k=v`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from headwater.cli.client import all_pages, api, checked
from headwater.cli.output import Failure, emit, handles_errors, json_option


@click.group()
def accounts() -> None:
    """Connected accounts: an app's credentials, kept encrypted, that sources use through
    `{"authProvisionId": "apn_..."}`."""


def credentials_of(pairs: tuple[str, ...], source: str | None, removed: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The credentials given: a JSON object from a file (or `-`, stdin), then `name=value` pairs (strings)
    over it, then the fields to remove (as nulls: the service's merge patch). None when nothing was."""
    credentials: dict[str, Any] = {}
    if source is not None:
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text()
        except OSError as e:
            raise Failure(f"Cannot read the credentials from {source}: {e.strerror}.") from None
        try:
            loaded = json.loads(text)
        except ValueError:
            raise Failure(f"The credentials in {'stdin' if source == '-' else source} are not JSON.") from None
        if not isinstance(loaded, dict):
            raise Failure("The credentials must be a JSON object of the app's fields, like {\"api_key\": \"...\"}.")
        credentials.update(loaded)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise Failure("--credential must be of the form name=value (the value is not shown here).")
        credentials[name] = value
    for name in removed:
        credentials[name] = None
    return credentials if source is not None or pairs or removed else None


def account_line(a: dict[str, Any]) -> str:
    return "  ".join(part for part in (a["id"], a["app"], a["name"], a["status"], ",".join(a["fields"]) or "-"))


def account_text(a: dict[str, Any]) -> str:
    lines = [f"{a['id']}  {a['name']}  ({a['app']}, {a['kind']})", f"status     {a['status']}",
             f"fields     {', '.join(a['fields']) or 'none'}", f"owner      {a['owner_id']}"]
    if a.get("expires_at"):
        lines.append(f"expires    {a['expires_at']}")
    return "\n".join(lines)


credential_options = [
    click.option("--credential", "pairs", multiple=True, metavar="NAME=VALUE",
                 help="a credential field (repeatable); the value is kept as a string"),
    click.option("--credentials", "source", metavar="FILE",
                 help="a JSON object of credential fields, from FILE or - (stdin)"),
]


def with_credentials(f: Any) -> Any:
    for option in reversed(credential_options):
        f = option(f)
    return f


@accounts.command("list")
@click.option("--org", "org_id", help="only this org's accounts (o_...)")
@json_option
@handles_errors
def accounts_list(org_id: str | None, as_json: bool) -> None:
    """The accounts you may use (yours and your orgs'), newest first."""
    with api() as client:
        found = all_pages(client, f"/orgs/{org_id}/accounts" if org_id else "/accounts")
    emit(as_json, {"data": found}, "\n".join(map(account_line, found)) or "no accounts")


@accounts.command("create")
@click.argument("app")
@click.option("--name", help="default: the app's slug")
@with_credentials
@click.option("--org", "org_id", help="the owning org (o_...)")
@json_option
@handles_errors
def accounts_create(app: str, name: str | None, pairs: tuple[str, ...], source: str | None, org_id: str | None,
                    as_json: bool) -> None:
    """Connect an account of APP (an app slug) with its credential fields."""
    body: dict[str, Any] = {"app": app, "credentials": credentials_of(pairs, source) or {}}
    if name:
        body["name"] = name
    with api() as client:
        account = checked(client.post("/accounts", json=body, params={"org_id": org_id} if org_id else {}))["data"]
    fields = ", ".join(account["fields"]) or "no fields"
    emit(as_json, account, f"connected {account['id']} ({account['app']}: {fields})"
         f"\nuse it as {{\"authProvisionId\": \"{account['id']}\"}}")


@accounts.command("show")
@click.argument("account")
@json_option
@handles_errors
def accounts_show(account: str, as_json: bool) -> None:
    """An account: its app, status and field names (never their values)."""
    with api() as client:
        found = checked(client.get(f"/accounts/{account}"))["data"]
    emit(as_json, found, account_text(found))


@accounts.command("update")
@click.argument("account")
@click.option("--name")
@with_credentials
@click.option("--remove", "removed", multiple=True, metavar="NAME", help="a credential field to remove (repeatable)")
@json_option
@handles_errors
def accounts_update(account: str, name: str | None, pairs: tuple[str, ...], source: str | None,
                    removed: tuple[str, ...], as_json: bool) -> None:
    """Rename an account or change credential fields (the others stay); sources see them from their next run."""
    body: dict[str, Any] = {}
    if name:
        body["name"] = name
    credentials = credentials_of(pairs, source, removed)
    if credentials is not None:
        body["credentials"] = credentials
    if not body:
        raise Failure("Nothing to change: give --name, --credential, --credentials or --remove.")
    with api() as client:
        updated = checked(client.patch(f"/accounts/{account}", json=body))["data"]
    emit(as_json, updated, f"updated {updated['id']} ({', '.join(updated['fields']) or 'no fields'})")


@accounts.command("delete")
@click.argument("account")
@json_option
@handles_errors
def accounts_delete(account: str, as_json: bool) -> None:
    """Delete an account: sources using it fail their next runs (ACCOUNT_NOT_FOUND) until given another."""
    with api() as client:
        checked(client.delete(f"/accounts/{account}"))
    emit(as_json, {"deleted": account}, f"deleted {account}")


COMMANDS = [accounts]
