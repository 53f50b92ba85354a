"""Where events go, from the command line: webhooks (create, list, delete, deliveries) and
subscriptions of a listener (webhook, source or workflow) to an emitter's channel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from headwater.cli.client import all_pages, api, checked, readable_time, resolve
from headwater.cli.output import F, emit, handles_errors, json_option

if TYPE_CHECKING:
    import httpx

LISTENER_PREFIXES = ("wh_", "p_", "dc_")


@click.group()
def webhooks() -> None:
    """Webhooks: URLs that receive a subscribed emitter's events, signed (Standard Webhooks)."""


@webhooks.command("create")
@click.option("--url", required=True, help="where deliveries are POSTed (http or https)")
@click.option("--name")
@click.option("--description")
@json_option
@handles_errors
def webhooks_create(url: str, name: str | None, description: str | None, as_json: bool) -> None:
    """Create a webhook; its signing secret is printed this once."""
    params = {"url": url, **({"name": name} if name else {}), **({"description": description} if description else {})}
    with api() as client:
        hook = checked(client.post("/webhooks", params=params))["data"]
    emit(as_json, hook, f"webhook {hook['id']} -> {hook['url']}\nsigning secret {hook['signing_secret']} (shown once)")


@webhooks.command("list")
@json_option
@handles_errors
def webhooks_list(as_json: bool) -> None:
    """Your webhooks."""
    with api() as client:
        hooks = all_pages(client, "/users/me/webhooks")
    emit(as_json, {"data": hooks}, "\n".join(
        f"{h['id']}  {h['url']}  {'active' if h['active'] else 'inactive'}  {h.get('name') or ''}".rstrip()
        for h in hooks) or "no webhooks")


@webhooks.command("delete")
@click.argument("webhook")
@json_option
@handles_errors
def webhooks_delete(webhook: str, as_json: bool) -> None:
    """Delete a webhook (its subscriptions go with it)."""
    with api() as client:
        checked(client.delete(f"/webhooks/{webhook}"))
    emit(as_json, {"deleted": webhook}, f"deleted {webhook}")


@webhooks.command("deliveries")
@click.argument("webhook")
@json_option
@handles_errors
def webhooks_deliveries(webhook: str, as_json: bool) -> None:
    """A webhook's deliveries, newest first, with their attempts."""
    with api() as client:
        deliveries = all_pages(client, f"/webhooks/{webhook}/deliveries")
    emit(as_json, {"data": deliveries}, "\n".join(map(delivery_line, deliveries)) or "no deliveries")


def delivery_line(d: dict[str, Any]) -> str:
    attempts = d["attempts"]
    last = attempts[-1] if attempts else None
    answer = "" if last is None else f"last answer {last['status'] or last.get('error') or 'none'}"
    retry = f"next attempt {readable_time(d['next_attempt_at'])}" if d.get("next_attempt_at") else ""
    return "  ".join(part for part in (
        readable_time(d["created_at_ms"]), d["id"], f"{d['status']:9}", d["event_id"],
        f"{len(attempts)} attempt{'s' if len(attempts) != 1 else ''}", answer, retry) if part)


@click.group()
def subscriptions() -> None:
    """Subscriptions: a listener receives an emitter's events on a channel."""


def emitter_id(client: httpx.Client, emitter: str) -> str:
    """An id, a glob (`dc_*`, `p_*`) or one of your sources' names."""
    return emitter if emitter.startswith(("dc_", "p_")) else resolve(client, emitter)


def listener_id(client: httpx.Client, listener: str) -> str:
    return listener if listener.startswith(LISTENER_PREFIXES) else resolve(client, listener)


def subscription_options(f: F) -> F:
    for option in reversed([
        click.option("--emitter", required=True, help="a source (id or name), a workflow p_ id, or dc_* / p_*"),
        click.option("--listener", required=True, help="a webhook wh_ id, a workflow p_ id, or a source"),
        click.option("--event-name", default=None, help="a channel: $errors, $logs or your own (default: events)"),
    ]):
        f = option(f)
    return f


def subscription_params(client: httpx.Client, emitter: str, listener: str, event_name: str | None) -> dict[str, str]:
    return {"emitter_id": emitter_id(client, emitter), "listener_id": listener_id(client, listener),
            **({"event_name": event_name} if event_name else {})}


@subscriptions.command("create")
@subscription_options
@click.option("--replay", "replay", flag_value="retained", default=None,
              help="a new subscription gets the emitter's retained events first, once and in order")
@json_option
@handles_errors
def subscriptions_create(emitter: str, listener: str, event_name: str | None, replay: str | None,
                         as_json: bool) -> None:
    """Subscribe a listener to an emitter's channel (again: no change)."""
    with api() as client:
        params = subscription_params(client, emitter, listener, event_name)
        sub = checked(client.post("/subscriptions", params={**params, **({"replay": replay} if replay else {})}))
    sub = sub["data"]
    emit(as_json, sub, f"{sub['id']}  {sub['emitter_id']} -> {sub['listener_id']}  {sub['event_name'] or 'events'}")


@subscriptions.command("list")
@json_option
@handles_errors
def subscriptions_list(as_json: bool) -> None:
    """Your subscriptions."""
    with api() as client:
        subs = checked(client.get("/users/me/subscriptions"))["data"]
    emit(as_json, {"data": subs}, "\n".join(
        f"{s['id']}  {s['emitter_id']} -> {s['listener_id']}  {s['event_name'] or 'events'}" for s in subs)
        or "no subscriptions")


@subscriptions.command("delete")
@subscription_options
@json_option
@handles_errors
def subscriptions_delete(emitter: str, listener: str, event_name: str | None, as_json: bool) -> None:
    """Remove a subscription."""
    with api() as client:
        params = subscription_params(client, emitter, listener, event_name)
        checked(client.delete("/subscriptions", params=params))
    emit(as_json, {"deleted": params}, f"unsubscribed {params['listener_id']} from {params['emitter_id']}")


COMMANDS = [webhooks, subscriptions]
