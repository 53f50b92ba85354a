"""`this.db` of one source is bounded (DECISIONS, Limits; docs/security.md, "this.db is bounded").

A run (or a hook, or one run of a batch) whose writes would make the source's db more than
HEADWATER_DB_MAX_BYTES of JSON has none of its writes applied and leaves a `$errors` event
DB_TOO_LARGE; its emits and logs still stand. The rule is applied where run outcomes are committed
(domain.runs.record), so both backends get it: service tests on the in-memory fakes, then black-box
on the local service and the emulated AWS deployment at the default limit (1 MB). The service
tests are tests/services/test_db_bound.py; here, the black-box ones.
"""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.test_runs import component, post, wait_events

pytestmark = pytest.mark.both_modes

# end to end, both backends, at the default bound


BIG_WRITER = component("""
    if (event.body.size) this.db.set(event.body.key, "x".repeat(event.body.size));
    this.$emit({ step: event.body.key, sizes: Object.fromEntries(
      ["small", "big"].map((k) => [k, (this.db.get(k) ?? "").length])) });
""")


def test_a_run_that_would_store_past_1_mb_has_its_writes_dropped(paid_api: httpx.Client) -> None:
    source_id, url = deploy_http(paid_api)
    for body, count in (({"key": "small", "size": 10}, 1), ({"key": "big", "size": 1_200_000}, 2),
                        ({"key": "after"}, 3)):
        assert post(url, body).status_code == 200
        items = wait_events(paid_api, source_id, count)
    events = [i["event"] for i in reversed(items)]
    assert events[1]["step"] == "big"  # the run's emit is stored (it saw its own write)...
    assert events[2] == {"step": "after", "sizes": {"small": 10, "big": 0}}  # ...but the write was not kept
    errors = wait_events(paid_api, source_id, 1, event_name="$errors")
    error = errors[0]["event"]["error"]
    assert error["code"] == "DB_TOO_LARGE"
    assert "1048576 bytes" in error["message"]


def deploy_http(api: httpx.Client) -> tuple[str, str]:
    r = api.post("/sources", json={"component_code": BIG_WRITER, "configured_props": {}})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    return data["id"], data["configured_props"]["http"]["endpoint_url"]
