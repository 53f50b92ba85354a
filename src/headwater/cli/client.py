"""Commands that drive a running service over its HTTP API, in the spirit of Pipedream's `pd`:
`login` once, then deploy, list, follow events and logs, update and delete sources."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from headwater.cli.output import Failure, emit, handles_errors, json_option
from headwater.cli.source_trial import tried_then_switched
from headwater.domain.events import EventId
from headwater.domain.file_names import of_path

if TYPE_CHECKING:
    import httpx

COMPONENT_SUFFIXES = (".mjs", ".js", ".cjs", ".ts", ".mts")


def config_path() -> Path:
    """`HEADWATER_CONFIG`, else the user's config folder (XDG)."""
    if os.environ.get("HEADWATER_CONFIG"):
        return Path(os.environ["HEADWATER_CONFIG"])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "headwater" / "config.json"


def load_config() -> dict[str, str]:
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise Failure(f"Not logged in: run `headwater login --url URL --key KEY` first (no {path}).") from None
    except ValueError:
        raise Failure(f"{path} is not valid JSON: run `headwater login` again.") from None
    if not isinstance(data, dict) or not data.get("url") or not data.get("api_key"):
        raise Failure(f"{path} lacks `url` or `api_key`: run `headwater login` again.")
    return data


def api_base(url: str) -> str:
    """The /v1 address of a service URL, or a Failure saying what is wrong with the URL."""
    import httpx  # here, not at the top: only the commands that reach a server pay for its import

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as e:
        raise Failure(f"{url!r} is not a valid URL: {e}.") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise Failure(f"{url!r} is not an http(s) URL: give it as http://HOST:PORT.")
    return url.rstrip("/") + "/v1"


def http_client(**kwargs: Any) -> httpx.Client:
    """Every client the commands open to a service (the tests' in-process app replaces this)."""
    import httpx

    return httpx.Client(**kwargs)


def api() -> httpx.Client:
    config = load_config()
    return http_client(base_url=api_base(config["url"]), timeout=120,
                       headers={"Authorization": f"Bearer {config['api_key']}"})


def checked(response: httpx.Response) -> Any:
    """The response's JSON, or a Failure carrying the service's error body."""
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = {}
        message = body.get("error") if isinstance(body, dict) else None
        message = message or f"The service answered {response.status_code} {response.reason_phrase}."
        if response.status_code == 401:
            message += " Run `headwater login --url URL --key KEY` with a valid key."
        raise Failure(message, body.get("details") if isinstance(body, dict) else None)
    try:
        return response.json() if response.content else None
    except ValueError:
        raise Failure(f"The service at {response.url} answered {response.status_code} with a body that is not "
                      "JSON: is the configured URL a Headwater server?") from None


def parse_props(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`--prop k=v`: v is read as JSON when it is JSON (numbers, objects, true), else as a string."""
    props: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise Failure(f"--prop {pair!r} is not of the form name=value")
        try:
            props[name] = json.loads(value)
        except ValueError:
            props[name] = value
    return props


def all_pages(client: httpx.Client, path: str) -> list[dict[str, Any]]:
    """Every item of a paginated list, newest first."""
    items: list[dict[str, Any]] = []
    after = None
    while True:
        page = checked(client.get(path, params={"limit": 100, **({"after": after} if after else {})}))
        items += page["data"]
        after = page["page_info"]["end_cursor"]
        if len(page["data"]) < 100 or not after:
            return items


def all_sources(client: httpx.Client) -> list[dict[str, Any]]:
    return all_pages(client, "/users/me/sources")


def resolve(client: httpx.Client, source: str) -> str:
    """A source given by id, name or name slug."""
    if source.startswith("dc_"):
        return source
    matches = [s["id"] for s in all_sources(client) if source in (s["name"], s["name_slug"])]
    if not matches:
        raise Failure(f"No source named {source!r}.")
    return matches[0]


@click.command()
@click.option("--url", required=True, help="the service's address, e.g. http://127.0.0.1:8000")
@click.option("--key", "api_key", required=True, help="your API key (hw_...)")
@json_option
@handles_errors
def login(url: str, api_key: str, as_json: bool) -> None:
    """Check a key against a service and remember both (in a file only you can read)."""
    with http_client(base_url=api_base(url), headers={"Authorization": f"Bearer {api_key}"}, timeout=30) as client:
        me = checked(client.get("/users/me"))["data"]
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as f:
        json.dump({"url": url, "api_key": api_key}, f)
    os.chmod(path, 0o600)
    emit(as_json, {"user": me["id"], "username": me["username"], "config": str(path)},
         f"logged in to {url} as {me['username']} ({me['id']}); saved to {path}")


def health_options(f: Any) -> Any:
    """--expect-events-within and --catch-up (docs/health.md)."""
    f = click.option("--catch-up", type=click.Choice(["skip", "all"]), default=None,
                     help="ticks missed while the service was down: skip (the default: one run now) or all")(f)
    return click.option("--expect-events-within", "expect", metavar="SECONDS|off", default=None,
                        help="stalled when nothing is emitted for this long (off: no expectation)")(f)


def health_body(expect: str | None, catch_up: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if expect is not None:
        if expect == "off":
            body["expect_events_within"] = None
        elif expect.isascii() and expect.isdigit():
            body["expect_events_within"] = int(expect)
        else:
            raise Failure(f"--expect-events-within {expect!r} is not a whole number of seconds nor `off`.")
    if catch_up is not None:
        body["catch_up"] = catch_up
    return body


@click.command()
@click.argument("component")
@click.option("--prop", "-p", "props", multiple=True, help="a configured prop, name=value (repeatable)")
@click.option("--name", help="the source's name (default: the component's)")
@click.option("--to", "to", metavar="SOURCE", help="a deployed source (id or name) to switch to this version")
@click.option("--try", "try_first", is_flag=True, help="with --to: try the version on the source's recorded runs "
              "first, print the diff and ask before switching (docs/trials.md)")
@click.option("--runs", type=click.IntRange(1, 100), default=10, show_default=True,
              help="with --try: how many of the newest runs to try it on")
@click.option("--yes", "-y", is_flag=True, help="with --try: switch without asking (for scripts)")
@health_options
@json_option
@handles_errors
def deploy(component: str, props: tuple[str, ...], name: str | None, to: str | None, try_first: bool, runs: int,
           yes: bool, expect: str | None, catch_up: str | None, as_json: bool) -> None:
    """Deploy a source from a component FILE, a registry KEY, or a saved sc_ id (--to: as a new
    version of a deployed source; --try: tried on its recorded runs first)."""
    if (try_first or yes) and not to:
        raise Failure("--try and --yes go with --to SOURCE (the source the version is for).")
    body: dict[str, Any] = {"configured_props": parse_props(props), **({"name": name} if name else {}),
                            **health_body(expect, catch_up)}
    path = Path(component)
    if path.suffix in COMPONENT_SUFFIXES and path.is_file():
        body["component_code"] = path.read_text()
        body.update(of_path(path.name))
    elif component.startswith("sc_"):
        body["component_id"] = component
    else:
        body["component_key"] = component
    with api() as client:
        if to:
            _deploy_to(client, to, body, props, try_first, runs, yes, as_json)
            return
        source = checked(client.post("/sources", json=body))["data"]
    endpoint = endpoint_of(source)
    text = f"deployed {source['id']} ({source['name']})" + (f"\nendpoint {endpoint}" if endpoint else "")
    emit(as_json, source, text)


def _deploy_to(client: httpx.Client, to: str, body: dict[str, Any], props: tuple[str, ...], try_first: bool,
               runs: int, yes: bool, as_json: bool) -> None:
    """A new version of a deployed source: its props kept but those given (masked secrets mean keep)."""
    if "component_key" in body:
        raise Failure("--to takes a component FILE or a saved sc_ id.")
    source_id = resolve(client, to)
    current = checked(client.get(f"/sources/{source_id}"))["data"]
    body = {**{k: v for k, v in body.items() if k != "configured_props"}, "active": current["active"]}
    if props:
        body["configured_props"] = {**request_form(current["configured_props"]), **parse_props(props)}
    if not try_first:
        updated = checked(client.put(f"/sources/{source_id}", json=body))["data"]
        emit(as_json, updated, f"updated {updated['id']} ({updated['name']})")
        return
    trial, updated = tried_then_switched(client, source_id, body, runs, yes, as_json, checked)
    if as_json:
        click.echo(json.dumps({"trial": trial, "source": updated}))
    elif updated is None:
        click.echo(f"not switched: {source_id} keeps its version")
    else:
        click.echo(f"updated {updated['id']} ({updated['name']})")


def endpoint_of(source: dict[str, Any]) -> str | None:
    """The URL of a source's HTTP interface, if it has one."""
    return next((v["endpoint_url"] for v in source.get("configured_props", {}).values()
                 if isinstance(v, dict) and "endpoint_url" in v), None)


def schedule_of(source: dict[str, Any]) -> str | None:
    """A timer source's schedule in words, if it has a timer."""
    for value in source.get("configured_props", {}).values():
        if isinstance(value, dict) and "interval_seconds" in value:
            return f"cron {value['cron']}" if value.get("cron") else f"every {value['interval_seconds']} s"
    return None


@click.command("list")
@json_option
@handles_errors
def list_sources(as_json: bool) -> None:
    """Your sources, with each one's endpoint (or timer)."""
    with api() as client:
        sources = all_sources(client)
    emit(as_json, {"data": sources}, "\n".join(
        f"{s['id']}  {s['name']:30}  {'active' if s['active'] else 'inactive':8}  "
        f"{endpoint_of(s) or schedule_of(s) or ''}".rstrip() for s in sources) or "no sources")


def readable_time(ms: int) -> str:
    """Milliseconds since the epoch as local date and time, to the second."""
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _print_event(item: dict[str, Any], as_json: bool, logs: bool) -> None:
    if as_json:
        click.echo(json.dumps(item))
        return
    when = readable_time(item["indexed_at_ms"])
    event = item["event"]
    if logs:
        click.echo(f"{when}  {event.get('level', 'log'):5}  {event.get('message', '')}")
        return
    summary = item.get("metadata", {}).get("summary")
    click.echo(f"{when}  {item['id']}  " + (f"{summary}  " if summary else "") + json.dumps(event))


def _follow(client: httpx.Client, source_id: str, channel: str, last: str) -> Iterator[dict[str, Any]]:
    """The source's SSE stream after event `last`, reconnecting with Last-Event-ID when cut."""
    import httpx

    while True:
        headers = {"Last-Event-ID": last}
        try:
            with client.stream("GET", f"/sources/{source_id}/sse", params={"event_name": channel},
                               headers=headers, timeout=httpx.Timeout(30, read=60)) as response:
                if response.status_code >= 400:
                    response.read()
                    checked(response)
                data = None
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        data = line[6:]
                    elif line == "" and data is not None:
                        item = json.loads(data)
                        last = item["id"]
                        yield item
                        data = None
        except (httpx.ReadTimeout, httpx.RemoteProtocolError):
            continue
        except httpx.ConnectError:
            time.sleep(1)  # the server restarts: try again, without spinning on a closed port


def _events(source: str, count: int, follow: bool, as_json: bool, channel: str) -> None:
    logs = channel == "$logs"
    with api() as client:
        source_id = resolve(client, source)
        page = checked(client.get(f"/sources/{source_id}/event_summaries",
                                  params={"limit": count, "expand": "event", "event_name": channel}))
        items = page["data"][::-1]  # oldest first, like a log
        for item in items:
            _print_event(item, as_json, logs)
        if follow:
            # Replay from the newest event printed (or from the start): nothing between the listing
            # and the stream's start is missed.
            newest = max((EventId.parse(i["id"]) for i in items), default=EventId(0, 0))
            click.echo(f"following {source_id} {channel or 'events'} (Ctrl-C to stop)", err=True)
            try:
                for item in _follow(client, source_id, channel, str(newest)):
                    _print_event(item, as_json, logs)
                    sys.stdout.flush()
            except KeyboardInterrupt:
                return
        elif not as_json and not items:
            click.echo("no events", err=True)


@click.command()
@click.argument("source")
@click.option("-n", "count", type=click.IntRange(1, 100), default=10, show_default=True, help="how many")
@click.option("-f", "--follow", is_flag=True, help="keep printing new events as they arrive")
@click.option("--channel", default="", help="a channel name ($errors, or your own)")
@json_option
@handles_errors
def events(source: str, count: int, follow: bool, channel: str, as_json: bool) -> None:
    """A source's newest events (one JSON line each with --json)."""
    _events(source, count, follow, as_json, channel)


@click.command()
@click.argument("source")
@click.option("-n", "count", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="keep printing new log lines")
@json_option
@handles_errors
def logs(source: str, count: int, follow: bool, as_json: bool) -> None:
    """A source's console output (its $logs channel)."""
    _events(source, count, follow, as_json, "$logs")


@click.command()
@click.argument("source")
@click.option("--prop", "-p", "props", multiple=True, help="a configured prop, name=value (repeatable)")
@click.option("--name")
@click.option("--code", "code_file", type=click.Path(exists=True, dir_okay=False, resolve_path=True),
              help="new component code")
@click.option("--active/--inactive", default=None)
@health_options
@json_option
@handles_errors
def update(source: str, props: tuple[str, ...], name: str | None, code_file: str | None, active: bool | None,
           expect: str | None, catch_up: str | None, as_json: bool) -> None:
    """Change a source's props, name, code, state or health settings (what is not given is kept)."""
    with api() as client:
        source_id = resolve(client, source)
        current = checked(client.get(f"/sources/{source_id}"))["data"]
        body: dict[str, Any] = {"active": current["active"] if active is None else active,
                                **health_body(expect, catch_up)}
        if props:  # else the service keeps every configured value as it is
            body["configured_props"] = {**request_form(current["configured_props"]), **parse_props(props)}
        if name:
            body["name"] = name
        if code_file:
            body["component_code"] = Path(code_file).read_text()
            body.update(of_path(Path(code_file).name))
        updated = checked(client.put(f"/sources/{source_id}", json=body))["data"]
    emit(as_json, updated, f"updated {updated['id']} ({updated['name']})")


def request_form(configured: dict[str, Any]) -> dict[str, Any]:
    """Configured props as a PUT takes them back: no endpoint objects, timers in request form
    (masked secrets are sent back masked, which the service reads as 'keep')."""
    out: dict[str, Any] = {}
    for name, value in configured.items():
        if isinstance(value, dict) and "endpoint_url" in value:
            continue
        if isinstance(value, dict) and "interval_seconds" in value:
            value = {"cron": value["cron"]} if value.get("cron") else {"intervalSeconds": value["interval_seconds"]}
        out[name] = value
    return out


@click.command()
@click.argument("source")
@json_option
@handles_errors
def delete(source: str, as_json: bool) -> None:
    """Delete a source."""
    with api() as client:
        source_id = resolve(client, source)
        checked(client.delete(f"/sources/{source_id}"))
    emit(as_json, {"deleted": source_id}, f"deleted {source_id}")


@click.command()
@json_option
@handles_errors
def whoami(as_json: bool) -> None:
    """The user the saved key belongs to, and the server it is for."""
    config = load_config()
    with api() as client:
        me = checked(client.get("/users/me"))["data"]
    orgs = ", ".join(o["orgname"] for o in me.get("orgs", []))
    emit(as_json, {**me, "url": config["url"]},
         f"{me['username']} ({me['id']}, {me['email']}) on {config['url']}" + (f"\norgs {orgs}" if orgs else ""))


@click.command()
@json_option
@handles_errors
def logout(as_json: bool) -> None:
    """Forget the saved server and key."""
    path = config_path()
    try:
        path.unlink()
    except FileNotFoundError:
        emit(as_json, {"logged_out": False, "config": str(path)}, f"not logged in (no {path})")
        return
    emit(as_json, {"logged_out": True, "config": str(path)}, f"logged out (removed {path})")


COMPONENT_FIELDS = ("id", "key", "name", "version", "type", "description", "configurable_props")


@click.command()
@click.argument("source")
@click.option("--code", "show_code", is_flag=True, help="print the component's code instead")
@json_option
@handles_errors
def describe(source: str, show_code: bool, as_json: bool) -> None:
    """A source's state, endpoint or schedule, configuration (secrets masked), component and health."""
    with api() as client:
        found = checked(client.get(f"/sources/{resolve(client, source)}"))["data"]
        component = checked(client.get(f"/components/{found['component_id']}"))["data"]
        health = None if show_code else checked(client.get(f"/sources/{found['id']}/health"))["data"]
    if show_code or health is None:
        click.echo(component["code"], nl=False)
        return
    emit(as_json, {**found, "component": {k: component.get(k) for k in COMPONENT_FIELDS}, "health": health},
         "\n".join([*description_lines(found, component), *health_lines(health)]))


def _when(ts: int | None) -> str:
    return readable_time(ts * 1000) if ts else "never"


def health_lines(health: dict[str, Any]) -> list[str]:
    """GET /sources/{id}/health, readably."""
    if health["stalled"]:
        what = "its timer has not run" if health["stalled_why"] == "timer" else "nothing emitted"
        status = f"STALLED since {_when(health['stalled_since'])} ({what})"
    else:
        status = "ok"
    hour, day = health["last_hour"], health["last_day"]
    lines = [f"health     {status}",
             f"last run   {_when(health['last_run_at'])}",
             f"last event {_when(health['last_event_at'])}"]
    if health["next_tick_at"] or health["last_tick_at"]:
        lines.append(f"ticks      last {_when(health['last_tick_at'])}, next {_when(health['next_tick_at'])}, "
                     f"{health['skipped_ticks']} skipped in all (catch-up: {health['catch_up']})")
    lines += [f"last hour  {hour['runs']} runs, {hour['events']} events, {hour['errors']} errors, "
              f"{hour['skipped_ticks']} ticks skipped",
              f"last day   {day['runs']} runs, {day['events']} events, {day['errors']} errors, "
              f"{day['skipped_ticks']} ticks skipped"]
    if health["expect_events_within"]:
        lines.append(f"expects    an event within {health['expect_events_within']} s")
    return lines


def description_lines(source: dict[str, Any], component: dict[str, Any]) -> list[str]:
    lines = [f"{source['id']}  {source['name']}  {'active' if source['active'] else 'inactive'}",
             "component  " + " ".join(part for part in (component["name"], component.get("key"), component["version"],
                                                         f"({component['id']})") if part)]
    if component.get("description"):
        lines.append(f"           {component['description']}")
    if endpoint_of(source):
        lines.append(f"endpoint   {endpoint_of(source)}")
    if schedule_of(source):
        lines.append(f"timer      {schedule_of(source)}")
    shown = {k: v for k, v in source["configured_props"].items()
             if not (isinstance(v, dict) and ("endpoint_url" in v or "interval_seconds" in v))}
    lines += ["props"] + [f"  {k} = {json.dumps(v)}" for k, v in shown.items()] if shown else ["props      none"]
    lines.append(f"created    {readable_time(source['created_at'] * 1000)}, "
                 f"updated {readable_time(source['updated_at'] * 1000)}")
    return lines


COMMANDS = [login, logout, whoami, deploy, list_sources, describe, events, logs, update, delete]
