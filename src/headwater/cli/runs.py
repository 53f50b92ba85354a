"""`headwater runs SOURCE [-f]` and `headwater rerun SOURCE RUN_ID`: a source's (or a workflow's,
`p_...`) runs on record, one in full, and one run again."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from headwater.cli.client import api, checked, readable_time, resolve
from headwater.cli.output import Failure, emit, handles_errors, json_option

if TYPE_CHECKING:
    import httpx

FOLLOW_EVERY_S = 1.0  # runs have no stream of their own: the list is read again this often


def owner_path(client: httpx.Client, owner: str) -> str:
    """`/workflows/<id>` for a workflow id, else `/sources/<id>` for a source id, name or slug."""
    if owner.startswith("p_"):
        return f"/workflows/{owner}"
    return f"/sources/{resolve(client, owner)}"


def run_line(run: dict[str, Any]) -> str:
    kind = f"hook:{run['hook']}" if run.get("hook") else run["kind"]
    emitted = ", ".join(f"{name or 'default'} {entry['count']}" for name, entry in sorted(run["emitted"].items()))
    error = run.get("error")
    said = f"  {error['code']}: {error['message']}" if error else ""
    return (f"{readable_time(run['ended_at_ms'])}  {run['id']}  {kind:16} {run['outcome']:8} "
            f"{run['duration_ms']:8.1f} ms  emitted: {emitted or 'nothing'}{said}")


def detail_lines(run: dict[str, Any]) -> list[str]:
    trigger = json.dumps(run["trigger"]) if run["trigger_kept"] else f"(not kept: {run['trigger_bytes']} bytes)"
    lines = [run_line(run), f"trigger:  {trigger}"]
    if run.get("rerun_of"):
        lines.append(f"re-run of {run['rerun_of']}")
    if run.get("response_status") is not None:
        lines.append(f"answered: {run['response_status']}")
    if run["db_keys_written"]:
        lines.append(f"this.db:  wrote {', '.join(run['db_keys_written'])}")
    if run.get("error") and run["error"].get("stack"):
        lines += ["stack:", *("  " + line for line in run["error"]["stack"].splitlines())]
    for line in run["logs"]:
        lines.append(f"log {line['level']:5} {line['message']}")
    if run["logs_dropped"]:
        lines.append(f"({run['logs_dropped']} more log lines on the $logs channel)")
    return lines


@click.command()
@click.argument("source")
@click.argument("run_id", required=False)
@click.option("-n", "count", type=click.IntRange(1, 100), default=10, show_default=True, help="how many")
@click.option("-f", "--follow", is_flag=True, help="keep printing new runs as they are recorded")
@json_option
@handles_errors
def runs(source: str, run_id: str | None, count: int, follow: bool, as_json: bool) -> None:
    """A source's (or workflow's) newest runs, oldest first; with RUN_ID, that run in full."""
    with api() as client:
        path = owner_path(client, source)
        if run_id:
            run = checked(client.get(f"{path}/runs/{run_id}"))["data"]
            emit(as_json, run, "\n".join(detail_lines(run)))
            return
        page = checked(client.get(f"{path}/runs", params={"limit": count}))
        for run in page["data"][::-1]:
            click.echo(json.dumps(run) if as_json else run_line(run))
        if not follow:
            if not page["data"] and not as_json:
                click.echo("no runs on record", err=True)
            return
        click.echo(f"following the runs of {path.rsplit('/', 1)[1]} (Ctrl-C to stop)", err=True)
        newest = page["page_info"]["start_cursor"]
        try:
            while True:
                time.sleep(FOLLOW_EVERY_S)
                params: dict[str, Any] = {"limit": 100, **({"before": newest} if newest else {})}
                page = checked(client.get(f"{path}/runs", params=params))
                for run in page["data"][::-1]:
                    click.echo(json.dumps(run) if as_json else run_line(run))
                sys.stdout.flush()
                newest = page["page_info"]["start_cursor"] or newest
        except KeyboardInterrupt:
            return


@click.command()
@click.argument("source")
@click.argument("run_id")
@json_option
@handles_errors
def rerun(source: str, run_id: str, as_json: bool) -> None:
    """Runs a run's input again against the current code. RUN_ID `last`: the newest run that can be."""
    with api() as client:
        path = owner_path(client, source)
        if run_id == "last":
            newest = checked(client.get(f"{path}/runs", params={"limit": 100}))["data"]
            run_id = next((run["id"] for run in newest if run["rerunnable"]), "")
            if not run_id:
                raise Failure(f"{source} has no run on record that can be run again (hooks cannot).")
        checked(client.post(f"{path}/runs/{run_id}/rerun"))
        emit(as_json, {"rerun_of": run_id}, f"queued a re-run of {run_id}")


COMMANDS = [runs, rerun]
