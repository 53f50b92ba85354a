"""`headwater dev FILE`: deploy a component, follow its events, logs and errors, and re-deploy it on
every save, as Pipedream's `pd dev` does.

The source it deploys is remembered in `.headwater-dev.json` next to the file (by server and file
name), so the next `dev` of the same file updates that source: same id, same endpoint, `this.db`
kept. Re-deploys are updates (PUT), so the state is kept across saves too. A save that does not
deploy (a syntax error, a prop that no longer fits) prints the error and waits for the next save.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from headwater.cli.client import (
    _follow,
    api,
    checked,
    endpoint_of,
    load_config,
    parse_props,
    readable_time,
    request_form,
)
from headwater.cli.output import Failure, handles_errors, json_option, one_line
from headwater.cli.trial import component_file
from headwater.domain.events import EventId
from headwater.domain.file_names import of_path

if TYPE_CHECKING:
    import httpx

STATE_FILE = ".headwater-dev.json"
CHANNELS = ("", "$logs", "$errors")
_print_lock = threading.Lock()


def say(text: str, err: bool = False) -> None:
    """One line from any thread, whole and at once (a reader of the pipe sees it without delay)."""
    with _print_lock:
        click.echo(text, err=err)
        (sys.stderr if err else sys.stdout).flush()


class Remembered:
    """The source each component file was deployed as, per server, in a file next to the components."""

    def __init__(self, component: Path, server: str) -> None:
        self.path = component.parent / STATE_FILE
        self.server = server.rstrip("/")
        self.name = component.name

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self) -> str | None:
        found = self._read().get(self.server, {}).get(self.name)
        return found if isinstance(found, str) else None

    def set(self, source_id: str | None) -> None:
        data = self._read()
        sources = data.setdefault(self.server, {})
        if source_id:
            sources[self.name] = source_id
        else:
            sources.pop(self.name, None)
        self.path.write_text(json.dumps(data, indent=2) + "\n")


def digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def newest(client: httpx.Client, source_id: str, channel: str) -> str:
    """The id of the channel's newest event (or 0-0): following starts after it."""
    page = checked(client.get(f"/sources/{source_id}/event_summaries", params={"limit": 1, "event_name": channel}))
    return page["data"][0]["id"] if page["data"] else str(EventId(0, 0))


def event_line(channel: str, item: dict[str, Any]) -> str:
    when = readable_time(item["indexed_at_ms"])[11:]
    event = item["event"]
    if channel == "$logs":
        return f"{when}  {event.get('level', 'log'):5}  {event.get('message', '')}"
    if channel == "$errors":
        error = event.get("error") or {}
        stack = "\n".join("           " + line for line in str(error.get("stack") or "").splitlines()[1:])
        return f"{when}  error  {error.get('code', '')}: {error.get('message', '')}" + (f"\n{stack}" if stack else "")
    summary = item.get("metadata", {}).get("summary")
    return f"{when}  event  " + (f"{summary}  " if summary else "") + json.dumps(event)


def follow(source_id: str, channel: str, after: str, as_json: bool) -> None:
    """Prints the channel's new events until the process ends (a daemon thread)."""
    import httpx

    try:
        with api() as client:
            for item in _follow(client, source_id, channel, after):
                say(json.dumps({"channel": channel or "emit", **item}) if as_json else event_line(channel, item))
    except (Failure, httpx.HTTPError) as e:
        say(f"stopped following {channel or 'events'}: {e}", err=True)


class Session:
    """One `dev`: the source it deploys and updates, and the code deployed last."""

    def __init__(self, client: httpx.Client, path: Path, remembered: Remembered, props: dict[str, Any],
                 name: str | None, as_json: bool) -> None:
        self.client = client
        self.path = path
        self.remembered = remembered
        self.props = props
        self.name = name
        self.as_json = as_json
        self.source_id: str | None = None
        self.deployed: str | None = None  # digest of the code deployed last
        self.following = False

    def report(self, what: str, source: dict[str, Any] | None = None, error: str | None = None) -> None:
        if self.as_json:
            say(json.dumps({"dev": what, **({"source": source} if source else {}),
                            **({"error": error} if error else {})}))
        elif error:
            say(f"{clock()}  {what}: {error}")
        elif source:
            endpoint = endpoint_of(source)
            say(f"{clock()}  {what} {source['id']} ({source['name']})"
                + (f"  {endpoint}" if endpoint else ""))

    def start(self) -> None:
        """Updates the source this file was deployed as before, else deploys a new one."""
        remembered = self.remembered.get()
        if remembered:
            try:
                current = checked(self.client.get(f"/sources/{remembered}"))["data"]
            except Failure:  # deleted since (or not the caller's): deploy anew
                self.remembered.set(None)
            else:
                self.source_id = current["id"]
                self.update("updated", "update failed", current)
                return
        self.create()

    def create(self) -> None:
        code = self.path.read_text()
        body: dict[str, Any] = {"component_code": code, "configured_props": self.props,
                                **({"name": self.name} if self.name else {}), **of_path(self.path.name)}
        try:
            source = checked(self.client.post("/sources", json=body))["data"]
        except Failure as e:
            self.deployed = digest(code)  # not again until it changes
            self.report("deploy failed", error=one_line(e.message, e.details))
            return
        self.source_id = source["id"]
        self.remembered.set(source["id"])
        self.deployed = digest(code)
        self.listen()
        self.report("deployed", source)

    def update(self, what: str, failed: str, current: dict[str, Any] | None = None) -> None:
        self.listen()  # the source exists: its events show even while its new code does not deploy
        code = self.path.read_text()
        body: dict[str, Any] = {"component_code": code, "active": True, **({"name": self.name} if self.name else {}),
                                **of_path(self.path.name)}
        if self.props and current is not None:  # else every configured value stays as it is
            body["configured_props"] = {**request_form(current["configured_props"]), **self.props}
        self.deployed = digest(code)
        try:
            source = checked(self.client.put(f"/sources/{self.source_id}", json=body))["data"]
        except Failure as e:
            self.report(failed, error=one_line(e.message, e.details))
            return
        self.report(what, source)

    def listen(self) -> None:
        """Follows the source's events, logs and errors from now on (once)."""
        if self.following or self.source_id is None:
            return
        for channel in CHANNELS:
            after = newest(self.client, self.source_id, channel)
            threading.Thread(target=follow, args=(self.source_id, channel, after, self.as_json), daemon=True,
                             name=f"follow{channel or ' events'}").start()
        self.following = True

    def saved(self) -> None:
        """After a change in the folder (or a quiet second): re-deploys when the code changed."""
        try:
            code = self.path.read_text()
        except OSError:  # an editor replacing the file: the next change has it
            return
        if digest(code) == self.deployed:
            return
        if self.source_id is None:
            self.create()
        else:
            self.update("re-deployed", "re-deploy failed")


def clock() -> str:
    return readable_time(int(time.time() * 1000))[11:]


def watch(path: Path, on_tick: Callable[[], None]) -> None:
    """Calls `on_tick` after each change in the file's folder and each quiet second (a save the
    watcher missed, while it started, is still seen), until Ctrl-C."""
    import watchfiles  # here: the other commands do not need it

    for _ in watchfiles.watch(path.parent, debounce=200, rust_timeout=1000, yield_on_timeout=True, recursive=False,
                              watch_filter=lambda change, changed: Path(changed).name == path.name):
        on_tick()


@click.command("dev")
@click.argument("file")
@click.option("--prop", "-p", "props", multiple=True, help="a configured prop, name=value (repeatable)")
@click.option("--name", help="the source's name (default: the component's)")
@json_option
@handles_errors
def dev(file: str, props: tuple[str, ...], name: str | None, as_json: bool) -> None:
    """Deploy FILE, follow its events and logs, and re-deploy it on every save (Ctrl-C ends)."""
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # its line per change says what ours say
    # Ctrl-C ends it even when it was started with SIGINT ignored (a shell without job control does
    # that to a command run with `&`, and so may whatever started it): Python then installs no handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    path = component_file(file)
    configured = parse_props(props)
    config = load_config()
    with api() as client:
        checked(client.get("/users/me"))  # a server that is down, or a wrong key, ends here
        session = Session(client, path, Remembered(path, config["url"]), configured, name, as_json)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the source stays, as deployed last
            session.start()
            say(f"watching {path} (Ctrl-C to stop)", err=True)
            watch(path, session.saved)
    kept = f"; {session.source_id} stays deployed (`headwater delete {session.source_id}` removes it)" \
        if session.source_id else ""
    say(f"stopped{kept}", err=True)


COMMANDS = [dev]
