"""State that survives change (issue 34, item 2), end to end on both backends: `this.db` kept
across updates, read and patched by its owner within its bound, a snapshot at each deploy and
update, and a state restored after a bad update, from which runs go on.

Runs are asynchronous: each check polls the state until it is there (deadline, no fixed sleep)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

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
