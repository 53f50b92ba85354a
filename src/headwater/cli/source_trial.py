"""`headwater deploy FILE --to SOURCE [--try] [--yes]`: a new version for a deployed source.

Without `--try` the source is switched at once (PUT /v1/sources/{id}). With `--try` the version is
first tried on the source's recorded traffic (POST /v1/sources/{id}/trial), the diff printed run
by run, and the source switched only when the user says yes at the prompt, or `--yes` is given;
without a terminal to ask on and without `--yes` it is not switched (exit status 2)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from headwater.cli.output import Failure

if TYPE_CHECKING:
    import httpx

MAX_SHOWN = 200  # characters of an event in a diff line


def shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…"


def _where(item: dict[str, Any]) -> str:
    channel = f" [{item['channel']}]" if item.get("channel") else ""
    return f"{item.get('id') if item.get('id') is not None else '(no id)'}{channel}"


def diff_lines(data: dict[str, Any], source: str) -> list[str]:
    """The trial's answer as a reader checks it: a head, a line per run and per difference, totals."""
    state = "exact" if data["state_exact"] else f"approximate: {data['state_note']}"
    lines = [f"tried {data['name']} {data['version']} on the last {data['runs_tried']} runs of {source} "
             f"(this.db as before the first: {state})"]
    for run in data["runs"]:
        head = f"run {run['run_id']} {run['kind']}"
        if run.get("skipped"):
            lines.append(f"{head}: skipped, {run['skipped']}")
            continue
        counts = [f"{len(run[k])} {k}" for k in ("changed", "added", "removed", "unknown") if run[k]]
        lines.append(f"{head}: " + (", ".join(counts) if counts else f"same ({run['unchanged']} emits)"))
        lines += [f"  ~ {_where(c)}  {shown(c['live']['event'])} -> {shown(c['trial']['event'])}"
                  for c in run["changed"]]
        lines += [f"  + {_where(a)}  {shown(a['trial']['event'])}" for a in run["added"]]
        lines += [f"  - {_where(r)}  {shown(r['live']['event'])}" for r in run["removed"]]
        lines += [f"  ? live event {u['live_event_id'] or '(id not kept)'} no longer retained" for u in run["unknown"]]
        error = run["trial"]["error"]
        if error:
            lines.append(f"  ! {error.get('code')}: {error.get('message')}")
    t = data["totals"]
    lines.append(f"totals: {t['changed']} changed, {t['added']} added, {t['removed']} removed, {t['unchanged']} "
                 f"unchanged, {t['unknown']} unknown, {t['errors']} runs threw")
    if data.get("truncated"):
        lines.append(data["truncated"])
    return lines


def tried_then_switched(client: httpx.Client, source_id: str, body: dict[str, Any], runs: int, yes: bool,
                        as_json: bool, checked: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The trial's answer, and the source once switched (None when the user said no)."""
    trial_body = {k: body[k] for k in ("component_code", "component_id", "configured_props", "component_file")
                  if k in body}
    data = checked(client.post(f"/sources/{source_id}/trial", json={**trial_body, "runs": runs}))["data"]
    if not as_json:
        click.echo("\n".join(diff_lines(data, source_id)))
    if not yes:
        if not sys.stdin.isatty():
            if as_json:
                click.echo(json.dumps({"trial": data, "source": None}))
            raise Failure(f"Not switched: {source_id} keeps its version. Give --yes to switch without being asked.")
        if not click.confirm(f"Switch {source_id} to this version?", default=False, err=True):
            return data, None
    return data, checked(client.put(f"/sources/{source_id}", json=body))["data"]
