"""OAuth in the CLI (issue 22, part B): the operator's OAuth clients per app (`headwater
oauth-clients set|list|delete`, on the data dir, like `users create`), and `headwater accounts
connect APP` against a running service: it prints the provider's authorize URL (`--open` opens
it in a browser) and waits for the account to appear."""

from __future__ import annotations

import time
from typing import Any

import click

from headwater.cli.admin import data_dir_option, services_for
from headwater.cli.client import all_pages, api, checked
from headwater.cli.output import Failure, emit, handles_errors, json_option
from headwater.domain.oauth import OPERATOR

POLL_S = 1.0


@click.group("oauth-clients")
def oauth_clients() -> None:
    """The operator's OAuth clients per app (used by every user without one of their own)."""


@oauth_clients.command("set")
@click.argument("app")
@click.option("--client-id", required=True)
@click.option("--client-secret", envvar="HEADWATER_OAUTH_CLIENT_SECRET", default=None,
              help="or the environment variable HEADWATER_OAUTH_CLIENT_SECRET (kept out of the shell history); "
                   "none for a public client")
@click.option("--authorize-url", required=True,
              help="the provider's authorization endpoint (its query may not set redirect_uri, state, client_id, "
                   "response_type, code_challenge[_method] or scope: Headwater sets them)")
@click.option("--token-url", required=True)
@click.option("--scope", "scopes", multiple=True, help="a scope (repeatable)")
@click.option("--param", "params", multiple=True, help="an extra authorize URL parameter, name=value (repeatable)")
@data_dir_option
@json_option
@handles_errors
def oauth_clients_set(app: str, client_id: str, client_secret: str | None, authorize_url: str, token_url: str,
                      scopes: tuple[str, ...], params: tuple[str, ...], data_dir: str | None, as_json: bool) -> None:
    """Create or replace the operator's OAuth client of APP (the secret is stored encrypted)."""
    extra: dict[str, str] = {}
    for pair in params:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise Failure(f"--param {pair!r} is not of the form name=value")
        extra[name] = value
    with services_for(data_dir) as services:
        client = services.oauth.set_client(OPERATOR, app, {
            "client_id": client_id, "client_secret": client_secret, "authorize_url": authorize_url,
            "token_url": token_url, "scopes": list(scopes), "extra_params": extra})
        redirect = services.oauth.redirect_uri
    emit(as_json, {**client.to_api(), "redirect_uri": redirect},
         f"OAuth client of {app} set; register {redirect} as its redirect URI with the provider")


@oauth_clients.command("list")
@data_dir_option
@json_option
@handles_errors
def oauth_clients_list(data_dir: str | None, as_json: bool) -> None:
    """The operator's OAuth clients (never their secrets)."""
    with services_for(data_dir) as services:
        clients = [c.to_api() for c in services.oauth.clients(OPERATOR)]
    emit(as_json, clients, "\n".join(f"{c['app']}\t{c['client_id']}\t{c['token_url']}" for c in clients)
         or "no OAuth clients")


@oauth_clients.command("delete")
@click.argument("app")
@data_dir_option
@json_option
@handles_errors
def oauth_clients_delete(app: str, data_dir: str | None, as_json: bool) -> None:
    with services_for(data_dir) as services:
        services.oauth.remove_client(OPERATOR, app)
    emit(as_json, {"deleted": app}, f"OAuth client of {app} deleted")


@click.command("connect")
@click.argument("app", required=False)
@click.option("--account", "account_id", help="reconnect this account (apn_...) instead of connecting a new one")
@click.option("--name", help="the new account's name (default: the app)")
@click.option("--org", "org_id", help="the org that will own the new account")
@click.option("--open", "open_browser", is_flag=True, help="open the authorize URL in a browser")
@click.option("--no-wait", is_flag=True, help="print the URL and return (check with `GET /v1/accounts`)")
@json_option
@handles_errors
def connect(app: str | None, account_id: str | None, name: str | None, org_id: str | None, open_browser: bool,
            no_wait: bool, as_json: bool) -> None:
    """Connect an account of APP with OAuth (or reconnect --account): open the printed URL, authorize,
    and the account appears."""
    if bool(app) == bool(account_id):
        raise Failure("Give an APP to connect, or --account apn_... to reconnect (not both).")
    body = {"account_id": account_id} if account_id else {"app": app, "name": name, "org_id": org_id}
    with api() as client:
        before = _accounts(client, org_id)
        started = checked(client.post("/oauth/connect", json={k: v for k, v in body.items() if v is not None}))["data"]
        url = started["authorize_url"]
        if no_wait or as_json:
            click.echo(f"Open this URL to authorize:\n{url}", err=as_json)
        else:
            click.echo(f"Open this URL to authorize:\n{url}")
        if open_browser:
            import webbrowser  # here: it costs every other command its import

            webbrowser.open(url)
        if no_wait:
            emit(as_json, started, "Then `headwater accounts list` (or GET /v1/accounts) shows the account.")
            return
        if not as_json:
            click.echo("Waiting for the authorization (Ctrl-C stops waiting; the link stays valid until it expires)...")
        while time.time() < started["expires_at"]:
            done = _connected(_accounts(client, org_id), before, account_id)
            if done is not None:
                emit(as_json, done, f"connected {done['app']} account {done['id']} ({done['name']})")
                return
            time.sleep(POLL_S)
    raise Failure("The connect expired before it was authorized: run the command again.")


def _accounts(client: Any, org_id: str | None) -> dict[str, dict[str, Any]]:
    path = f"/orgs/{org_id}/accounts" if org_id else "/users/me/accounts"
    return {a["id"]: a for a in all_pages(client, path)}


def _connected(now: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]],
               account_id: str | None) -> dict[str, Any] | None:
    """The new account, or the reconnected one once it changed and is active again."""
    if account_id:
        account, old = now.get(account_id), before.get(account_id)
        if account and old and account["status"] == "active" and account["updated_at"] != old["updated_at"]:
            return account
        return None
    fresh = [a for a in now.values() if a["id"] not in before and a["kind"] == "oauth"]
    return fresh[0] if fresh else None


def install(cli: click.Group) -> None:
    """Adds `oauth-clients`, and `connect` to the `accounts` group (made here when none is)."""
    cli.add_command(oauth_clients)
    accounts = cli.commands.get("accounts")
    if not isinstance(accounts, click.Group):
        accounts = click.Group("accounts", help="Connected accounts (apn_...).")
        cli.add_command(accounts)
    accounts.add_command(connect)
