"""State that survives change (issue 34, item 2), end to end on both backends: `this.db` kept
across updates, read and patched by its owner within its bound, a snapshot at each deploy and
update, and a state restored after a bad update, from which runs go on.

Runs are asynchronous: each check polls the state until it is there (deadline, no fixed sleep)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.test_cli_offline import hw_in_process
from tests.conftest import Server, new_user

pytestmark = pytest.mark.both_modes

DEADLINE_S = 60.0


def counter(version: str, run: str) -> str:
    """A timer-less source that counts its manual runs into `this.db`."""
    return f"""export default {{
  name: "Counter", key: "counter-{uuid.uuid4().hex[:8]}", version: "{version}", type: "source",
  props: {{ db: "$.service.db" }},
  hooks: {{ async activate() {{ this.db.set("activated", (this.db.get("activated") ?? 0) + 1); }} }},
  async run(event) {{
{run}
    this.$emit({{ count: this.db.get("count") }});
  }},
}};
"""


GOOD = counter("1.0.0", '    this.db.set("count", (this.db.get("count") ?? 0) + 1);')
BAD = counter("2.0.0", '    this.db.set("count", "corrupted");')


def state(api: httpx.Client, source_id: str) -> dict[str, Any]:
    r = api.get(f"/sources/{source_id}/state")
    assert r.status_code == 200, r.text
    return r.json()["data"]


def run_until(api: httpx.Client, source_id: str, count: Any) -> dict[str, Any]:
    """One manual run, then the state once its count is `count`."""
    assert api.post(f"/sources/{source_id}/run", json={}).status_code == 202
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        found = state(api, source_id)
        if found["db"].get("count") == count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"count never became {count!r}: {found}")


def update(api: httpx.Client, source_id: str, code: str) -> None:
    r = api.put(f"/sources/{source_id}", json={"component_code": code})
    assert r.status_code == 200, r.text


def snapshots(api: httpx.Client, source_id: str) -> list[dict[str, Any]]:
    r = api.get(f"/sources/{source_id}/state/snapshots")
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_a_state_restored_after_a_bad_update_and_runs_go_on_from_it(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": GOOD})
    assert r.status_code == 200, r.text
    source_id = r.json()["data"]["id"]
    for n in (1, 2, 3):
        run_until(api, source_id, n)
    update(api, source_id, BAD)  # this.db is kept across the update
    assert state(api, source_id)["db"] == {"count": 3, "activated": 2}
    run_until(api, source_id, "corrupted")
    update(api, source_id, GOOD)  # the code rolled back: its state is still corrupted
    assert state(api, source_id)["db"]["count"] == "corrupted"

    taken = snapshots(api, source_id)
    assert [(s["reason"], s["component_version"]) for s in taken] == [
        ("update", "2.0.0"), ("update", "1.0.0"), ("deploy", "1.0.0")]
    assert all(s["size"] > 0 and s["created_at"] > 0 for s in taken)
    good = taken[1]
    r = api.post(f"/sources/{source_id}/state/restore", json={"snapshot_id": good["id"]})
    assert r.status_code == 200, r.text
    restored = r.json()["data"]
    # the state before the bad update ({count: 3, activated: 1}); a restore is an update, so the activate hook
    # ran on it
    assert restored["db"] == {"count": 3, "activated": 2}
    run_until(api, source_id, 4)
    run_until(api, source_id, 5)
    after = snapshots(api, source_id)
    assert after[0]["id"] == restored["undo_snapshot_id"] and after[0]["reason"] == "restore"


def test_the_owner_patches_keys_within_the_bound(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": GOOD})
    assert r.status_code == 200, r.text
    source_id = r.json()["data"]["id"]
    run_until(api, source_id, 1)
    r = api.patch(f"/sources/{source_id}/state", json={"count": 10, "activated": None, "note": {"a": "<b>x</b>"}})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["db"] == {"count": 10, "note": {"a": "<b>x</b>"}}
    run_until(api, source_id, 11)  # the next run starts from the patched db
    limit = state(api, source_id)["max_bytes"]
    r = api.patch(f"/sources/{source_id}/state", json={"big": "x" * (limit + 1)})
    assert r.status_code in (413, 422), r.text  # 413 when the body itself is over the request bound
    assert state(api, source_id)["db"] == {"count": 11, "note": {"a": "<b>x</b>"}}
    r = api.post(f"/sources/{source_id}/state/restore", json={"snapshot_id": "ss_nonesuch"})
    assert r.status_code == 404, r.text


def test_headwater_state_gets_sets_lists_and_restores(server: Server, tmp_path: Path) -> None:
    env = {**server.env, "HEADWATER_CONFIG": str(tmp_path / "cli" / "config.json")}
    user = new_user(server)
    hw_in_process(env, "login", "--url", server.base_url, "--key", user.api_key)
    code = tmp_path / "counter.mjs"
    code.write_text(GOOD)
    hw_in_process(env, "deploy", str(code), "--name", "state-cli")
    assert hw_in_process(env, "state", "state-cli").stdout.splitlines()[0] == "activated = 1"
    assert hw_in_process(env, "state", "state-cli", "set", "count", "41").stdout.strip() == "set count"
    assert hw_in_process(env, "state", "state-cli", "set", "label", "plain text").stdout.strip() == "set label"
    assert json.loads(hw_in_process(env, "state", "state-cli", "get", "--json").stdout) == {
        "activated": 1, "count": 41, "label": "plain text"}
    hw_in_process(env, "update", "state-cli", "--inactive")  # an update: a snapshot of the state above
    [newest, deploy] = json.loads(hw_in_process(env, "state", "state-cli", "snapshots", "--json").stdout)
    assert (newest["reason"], deploy["reason"]) == ("update", "deploy")
    printed = hw_in_process(env, "state", "state-cli", "snapshots").stdout
    assert printed.splitlines()[0].startswith(f"{newest['id']}  ") and " update " in printed
    hw_in_process(env, "state", "state-cli", "set", "count", "null")
    out = hw_in_process(env, "state", "state-cli", "restore", newest["id"]).stdout
    assert out.startswith(f"restored {newest['id']}") and "to undo it: headwater state state-cli restore ss_" in out
    assert json.loads(hw_in_process(env, "state", "state-cli", "--json").stdout)["count"] == 41
    proc = hw_in_process(env, "state", "state-cli", "set", "only-a-key", check=False)
    assert proc.returncode != 0 and "Usage: headwater state SOURCE set KEY VALUE" in proc.stderr
