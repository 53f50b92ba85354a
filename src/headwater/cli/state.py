"""`headwater state SOURCE [get | set KEY VALUE | snapshots | restore SNAPSHOT_ID]`: a source's
`this.db` read and patched by its owner, its snapshots listed and one restored (issue 34)."""

from __future__ import annotations

import json
from typing import Any

import click

from headwater.cli.client import api, checked, readable_time, resolve
from headwater.cli.output import Failure, emit, handles_errors, json_option

ACTIONS = ("get", "set", "snapshots", "restore")


def value_of(text: str) -> Any:
    """VALUE as JSON when it is JSON (`42`, `true`, `{"a": 1}`, `null` to remove the key), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def db_lines(state: dict[str, Any]) -> list[str]:
    lines = [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in sorted(state["db"].items())]
    return [*lines, f"({len(state['db'])} keys, {state['size']} of {state['max_bytes']} bytes)"]


def snapshot_line(snapshot: dict[str, Any]) -> str:
    return (f"{snapshot['id']}  {readable_time(snapshot['created_at'] * 1000)}  {snapshot['reason']:8} "
            f"{snapshot['component_id']} v{snapshot['component_version']}  {snapshot['size']} bytes")


@click.command()
@click.argument("source")
@click.argument("action", type=click.Choice(ACTIONS), default="get")
@click.argument("args", nargs=-1)
@json_option
@handles_errors
def state(source: str, action: str, args: tuple[str, ...], as_json: bool) -> None:
    """A source's this.db: `get` its keys and values (the default), `set KEY VALUE` one key (VALUE
    as JSON when it parses, `null` removes the key), list its `snapshots` (one per deploy, update
    and restore), or `restore SNAPSHOT_ID` (an update: the hooks run; it prints the snapshot that
    undoes it)."""
    wanted = {"get": 0, "set": 2, "snapshots": 0, "restore": 1}[action]
    if len(args) != wanted:
        usage = {"set": "set KEY VALUE", "restore": "restore SNAPSHOT_ID"}.get(action, action)
        raise Failure(f"Usage: headwater state SOURCE {usage}")
    with api() as client:
        path = f"/sources/{resolve(client, source)}/state"
        if action == "get":
            found = checked(client.get(path))["data"]
            emit(as_json, found["db"], "\n".join(db_lines(found)))
        elif action == "set":
            key, value = args[0], value_of(args[1])
            found = checked(client.patch(path, json={key: value}))["data"]
            emit(as_json, found["db"], f"removed {key}" if value is None else f"set {key}")
        elif action == "snapshots":
            snapshots = checked(client.get(f"{path}/snapshots"))["data"]
            emit(as_json, snapshots, "\n".join(snapshot_line(s) for s in snapshots) or "no snapshots")
        else:
            found = checked(client.post(f"{path}/restore", json={"snapshot_id": args[0]}))["data"]
            emit(as_json, found, f"restored {args[0]} ({len(found['db'])} keys); to undo it: "
                 f"headwater state {source} restore {found['undo_snapshot_id']}")


COMMANDS = [state]
