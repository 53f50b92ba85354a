"""`headwater run FILE --event JSON`: a component run once without deploying it, on the server the
user is logged in to (`POST /v1/components/run`), its emits, logs, `this.db` writes, return value
and HTTP response printed; exit status 1 when the run threw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from headwater.cli.client import COMPONENT_SUFFIXES, api, checked, parse_props
from headwater.cli.output import Failure, handles_errors, json_option
from headwater.domain.file_names import of_path


def component_file(file: str) -> Path:
    """A component file, relative paths meaning the current directory."""
    path = Path(file).resolve()
    if not path.is_file():
        raise Failure(f"No component file {file}.")
    if path.suffix not in COMPONENT_SUFFIXES:
        raise Failure(f"{file} is not a component file (one of {', '.join(COMPONENT_SUFFIXES)}).")
    return path


def json_value(option: str, text: str | None) -> Any:
    """JSON given inline, or `@FILE` for a file holding it."""
    if text is None:
        return None
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as e:
            raise Failure(f"{option} {text}: cannot read the file ({e.strerror}).") from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise Failure(f"{option} is not valid JSON: {e}.") from None


def printed(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def outcome_lines(data: dict[str, Any]) -> list[str]:
    """What the run did, a line each, in the order a reader asks: emits, logs, db, answer."""
    lines = [f"ran {data['type']} {data['name']!r} in {data['duration_ms']:.0f} ms"]
    for emit in data["emits"]:
        meta = emit["metadata"]
        extra = "".join(f"  {key} {printed(meta[key])}" for key in ("summary", "name", "id") if key in meta)
        lines.append(f"emit    {printed(emit['event'])}{extra}")
    lines += [f"{log['level']:7} {log['message']}" for log in data["logs"]]
    lines += [f"db      {key} = {printed(value)}" for key, value in data["db_writes"].items()]
    if data.get("db_error"):
        lines.append(f"db      {data['db_error']}")
    if data["type"] == "action":
        lines.append(f"return  {printed(data.get('return_value'))}")
        lines += [f"export  {key} = {printed(value)}" for key, value in (data.get("exports") or {}).items()]
        lines += [f"send    {s.get('type')} {printed(s.get('config'))}" for s in data.get("sends") or []]
        if data.get("flow_exit"):
            lines.append(f"exit    {printed(data['flow_exit'].get('reason'))}")
    if data.get("response"):
        response = data["response"]
        lines.append(f"respond {response.get('status')} {response.get('body') or ''}".rstrip())
    if data.get("truncated"):
        lines.append(f"cut     {data['truncated']['message']}")
    return lines


@click.command("run")
@click.argument("file")
@click.option("--event", "event_json", help="the event, as JSON (or @FILE); default: a timer source's timer event, "
              "an HTTP source's empty GET / request, else {}")
@click.option("--prop", "-p", "props", multiple=True, help="a configured prop, name=value (repeatable)")
@click.option("--db", "db_json", help="this.db as the run starts, a JSON object (or @FILE)")
@json_option
@handles_errors
def run(file: str, event_json: str | None, props: tuple[str, ...], db_json: str | None, as_json: bool) -> None:
    """Run a component FILE once without deploying it, and print what it did."""
    path = component_file(file)
    body: dict[str, Any] = {"component_code": path.read_text(), "configured_props": parse_props(props),
                            **of_path(path.name)}
    event = json_value("--event", event_json)
    if event is not None:
        body["event"] = event
    db = json_value("--db", db_json)
    if db is not None:
        if not isinstance(db, dict):
            raise Failure("--db must be a JSON object.")
        body["db"] = db
    with api() as client:
        data = checked(client.post("/components/run", json=body))["data"]
    if as_json:
        click.echo(json.dumps(data))
    else:
        click.echo("\n".join(outcome_lines(data)))
    error = data.get("error")
    if error:
        if not as_json:
            click.echo(f"error: {error.get('code')}: {error.get('message')}", err=True)
            if error.get("stack"):
                click.echo(error["stack"], err=True)
        raise SystemExit(1)


COMMANDS = [run]
