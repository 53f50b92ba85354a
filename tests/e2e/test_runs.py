"""Runs of HTTP sources end to end: dedupe, this.db, $logs/$errors, event deletion, summaries.

Real service, real SQLite, real Node runner. Runs are asynchronous, so every check of what a run
did polls the event summaries until the expected events appear (deadline, never a fixed sleep).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.conftest import Server, client_for, new_user, running_server

DEADLINE_S = 60.0
POLL_S = 0.05


# helpers (also used by tests/e2e/test_http_interface.py and test_http_requests.py)


def component(run: str, *, dedupe: str | None = None, http: str = '"$.interface.http"', name: str = "Run") -> str:
    """Code of an HTTP source whose `run(event)` body is `run`."""
    key = f"runs-{uuid.uuid4().hex[:10]}"
    dedupe_line = f'dedupe: "{dedupe}",' if dedupe else ""
    return f"""export default {{
  name: "{name} {key}",
  key: "{key}",
  version: "0.0.1",
  type: "source",
  {dedupe_line}
  props: {{ http: {http}, db: "$.service.db" }},
  async run(event) {{
{run}
  }},
}};
"""


def deploy(api: httpx.Client, code: str, configured_props: dict | None = None) -> tuple[str, str]:
    """Deploys a source; returns (source id, endpoint URL)."""
    r = api.post("/sources", json={"component_code": code, "configured_props": configured_props or {}})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["id"].startswith("dc_")
    return data["id"], data["configured_props"]["http"]["endpoint_url"]


def summaries(api: httpx.Client, source_id: str, **params: Any) -> dict:
    r = api.get(f"/sources/{source_id}/event_summaries", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def wait_until(
    api: httpx.Client,
    source_id: str,
    done: Callable[[list[dict]], bool],
    what: str,
    deadline_s: float = DEADLINE_S,
    **params: Any,
) -> list[dict]:
    """Polls event summaries (expand=event) until `done(items)`; returns the items, newest first."""
    params = {"expand": "event", **params}
    end = time.monotonic() + deadline_s
    items: list[dict] = []
    while time.monotonic() < end:
        items = summaries(api, source_id, **params)["data"]
        if done(items):
            return items
        time.sleep(POLL_S)
    raise AssertionError(f"timed out waiting for {what}; last items: {json.dumps(items)[:3000]}")


def wait_events(api: httpx.Client, source_id: str, count: int, event_name: str = "", **kw: Any) -> list[dict]:
    """Waits until at least `count` events are on the channel; returns them newest first."""
    return wait_until(api, source_id, lambda items: len(items) >= count,
                      f"{count} events on {event_name!r}", event_name=event_name, **kw)


def id_key(event_id: str) -> tuple[int, int]:
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


def assert_newest_first(items: list[dict]) -> None:
    keys = [id_key(i["id"]) for i in items]
    assert all(a > b for a, b in zip(keys, keys[1:], strict=False)), keys


def post(url: str, body: Any, **kw: Any) -> httpx.Response:
    r = httpx.post(url, json=body, timeout=60, **kw)
    return r


def healthy_and_running(server: Server, api: httpx.Client) -> None:
    """The service still answers and a fresh source on it still runs correctly."""
    assert httpx.get(server.base_url + "/healthz", timeout=10).status_code == 200
    sid, url = deploy(api, component("this.$emit({ echoed: event.body.v });"))
    assert post(url, {"v": 7}).status_code == 200
    items = wait_events(api, sid, 1)
    assert items[0]["event"] == {"echoed": 7}


BATCH = component("""
    for (const e of event.body.events) this.$emit(e, { id: e.id, ts: e.ts });
    console.log(`done ${event.body.tag}`);
""")


def batch_source(api: httpx.Client, dedupe: str | None) -> tuple[str, Callable[[list[dict], str], None]]:
    """A source whose run emits the batch of its request body and then logs `done <tag>`.

    Returns (source id, send) where send(events, tag) posts the batch and waits for its run to end.
    """
    code = BATCH.replace('type: "source",', f'type: "source", dedupe: "{dedupe}",') if dedupe else BATCH
    sid, url = deploy(api, code)

    def send(events: list[dict], tag: str) -> None:
        assert post(url, {"events": events, "tag": tag}).status_code == 200
        wait_until(api, sid, lambda logs: any(i["event"]["message"] == f"done {tag}" for i in logs),
                   f"run {tag}", event_name="$logs")

    return sid, send


def emitted_ids(api: httpx.Client, source_id: str) -> list[Any]:
    """Dedupe ids of the default channel, oldest first."""
    items = summaries(api, source_id, expand="event")["data"]
    return [i["metadata"]["id"] for i in reversed(items)]


# 4. dedupe strategies


def test_dedupe_unique_within_and_across_runs(api: httpx.Client) -> None:
    sid, send = batch_source(api, "unique")
    send([{"id": "a"}, {"id": "b"}, {"id": "a"}], "1")
    assert emitted_ids(api, sid) == ["a", "b"]
    send([{"id": "b"}, {"id": "c"}, {"id": "c"}, {"id": "a"}], "2")
    assert emitted_ids(api, sid) == ["a", "b", "c"]
    # 1 and "1" are distinct ids to the component
    send([{"id": 1}, {"id": "1"}], "3")
    assert emitted_ids(api, sid) == ["a", "b", "c", 1, "1"]


def test_dedupe_unique_cache_holds_100_ids(api: httpx.Client) -> None:
    sid, send = batch_source(api, "unique")
    send([{"id": n} for n in range(101)], "fill")
    ids = emitted_ids(api, sid)
    assert ids == list(range(1, 101))  # 101 emitted, the newest 100 retained
    # id 0 fell out of the 100-id cache, so it is new again; 100 is still cached
    send([{"id": 100}, {"id": 0}], "again")
    ids = emitted_ids(api, sid)
    assert ids[-2:] == [100, 0]
    assert len(ids) == 100
    # now 0 is cached again while 1 fell out
    send([{"id": 0}, {"id": 1}], "third")
    assert emitted_ids(api, sid)[-3:] == [100, 0, 1]


def test_dedupe_greatest(api: httpx.Client) -> None:
    sid, send = batch_source(api, "greatest")
    send([{"id": 1}, {"id": 5}, {"id": 3}, {"id": 5}], "1")
    assert emitted_ids(api, sid) == [1, 5]
    send([{"id": 4}, {"id": 6}, {"id": 2}, {"id": 10}], "2")
    assert emitted_ids(api, sid) == [1, 5, 6, 10]
    send([{"id": 10}, {"id": 9}], "3")
    assert emitted_ids(api, sid) == [1, 5, 6, 10]


def test_dedupe_last(api: httpx.Client) -> None:
    sid, send = batch_source(api, "last")
    send([{"id": "a"}, {"id": "b"}, {"id": "c"}], "1")
    assert emitted_ids(api, sid) == ["a", "b", "c"]
    # only the events after the cached id "c"
    send([{"id": "b"}, {"id": "c"}, {"id": "d"}, {"id": "e"}], "2")
    assert emitted_ids(api, sid) == ["a", "b", "c", "d", "e"]
    # nothing after the cached id: nothing emitted
    send([{"id": "d"}, {"id": "e"}], "3")
    assert emitted_ids(api, sid) == ["a", "b", "c", "d", "e"]
    # no id matches the cached "e": all are emitted
    send([{"id": "x"}, {"id": "y"}], "4")
    assert emitted_ids(api, sid) == ["a", "b", "c", "d", "e", "x", "y"]


def test_ts_orders_a_batch_oldest_to_newest(api: httpx.Client) -> None:
    sid, send = batch_source(api, None)
    send([{"id": "c", "ts": 3000}, {"id": "a", "ts": 1000}, {"id": "d", "ts": 4000}, {"id": "b", "ts": 2000}], "1")
    items = summaries(api, sid, expand="event")["data"]
    assert [i["metadata"]["id"] for i in items] == ["d", "c", "b", "a"]  # newest first
    assert [i["metadata"]["ts"] for i in items] == [4000, 3000, 2000, 1000]
    assert_newest_first(items)


def test_ts_ordering_applies_before_unique_dedupe(api: httpx.Client) -> None:
    sid, send = batch_source(api, "unique")
    send([{"id": "late", "ts": 2000, "v": 1}, {"id": "early", "ts": 1000}, {"id": "late", "ts": 500, "v": 2}], "1")
    items = summaries(api, sid, expand="event")["data"]
    # oldest first: late(500), early(1000), late(2000) -> the second "late" is a repeat
    assert [(i["metadata"]["id"], i["metadata"]["ts"]) for i in reversed(items)] == [("late", 500), ("early", 1000)]


# 5. this.db


COUNTER = component("""
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    const seen = this.db.get("seen") ?? [];
    seen.push(event.body.tag);
    this.db.set("seen", seen);
    this.$emit({ count, seen });
""")


def test_db_persists_across_runs(api: httpx.Client) -> None:
    sid, url = deploy(api, COUNTER)
    for n in range(1, 4):
        assert post(url, {"tag": f"t{n}"}).status_code == 200
        items = wait_events(api, sid, n)
        assert items[0]["event"] == {"count": n, "seen": [f"t{i}" for i in range(1, n + 1)]}


def test_db_is_scoped_to_the_source(api: httpx.Client) -> None:
    first, url1 = deploy(api, COUNTER)
    second, url2 = deploy(api, COUNTER)
    post(url1, {"tag": "a"})
    wait_events(api, first, 1)
    post(url1, {"tag": "b"})
    wait_events(api, first, 2)
    post(url2, {"tag": "z"})
    assert wait_events(api, second, 1)[0]["event"] == {"count": 1, "seen": ["z"]}


def test_runs_of_one_source_are_serialized_and_sources_run_concurrently(api: httpx.Client) -> None:
    slow, slow_url = deploy(api, component("""
    const n = this.db.get("n") || 0;
    await new Promise((done) => setTimeout(done, 300));
    this.db.set("n", n + 1);
    this.$emit({ n: n + 1, at: Date.now() });
"""))
    fast, fast_url = deploy(api, component("this.$emit({ at: Date.now() });"))
    with ThreadPoolExecutor(max_workers=5) as pool:
        assert all(r.status_code == 200 for r in pool.map(lambda _: post(slow_url, {}), range(5)))
    assert post(fast_url, {}).status_code == 200
    fast_done = wait_events(api, fast, 1)[0]["event"]["at"]
    slow_events = wait_events(api, slow, 5)[::-1]
    # Overlapping runs would read the same counter and lose updates: serialized, they count 1..5.
    assert [e["event"]["n"] for e in slow_events] == [1, 2, 3, 4, 5]
    assert fast_done < slow_events[-1]["event"]["at"], "the fast source waited for the slow one"


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("restart")) as srv:
        yield srv


def test_db_persists_across_restart(restartable: Server) -> None:
    owner = new_user(restartable)
    with client_for(restartable, owner.api_key) as api:
        sid, url = deploy(api, COUNTER)
        for n in (1, 2):
            post(url, {"tag": f"t{n}"})
            wait_events(api, sid, n)
    restartable.stop()
    restartable.start()
    with client_for(restartable, owner.api_key) as api:
        assert post(url, {"tag": "after"}).status_code == 200
        items = wait_events(api, sid, 3)
        assert items[0]["event"] == {"count": 3, "seen": ["t1", "t2", "after"]}
        assert summaries(api, sid)["page_info"]["total_count"] == 3


def test_answered_request_survives_a_crash(restartable: Server) -> None:
    """200 means durably queued: a run cut short by a crash runs again, once, after a restart."""
    owner = new_user(restartable)
    with client_for(restartable, owner.api_key) as api:
        sid, url = deploy(api, component("""
    await new Promise((resolve) => setTimeout(resolve, 3000));
    this.$emit({ n: event.body.n });
"""))
        assert post(url, {"n": 1}).status_code == 200
    restartable.stop(kill=True)  # the run is still sleeping: nothing of it is committed yet
    restartable.start()
    with client_for(restartable, owner.api_key) as api:
        assert [i["event"] for i in wait_events(api, sid, 1)] == [{"n": 1}]
        # negative check: a short fixed wait in which no second copy of the run may appear
        time.sleep(4)
        assert summaries(api, sid)["page_info"]["total_count"] == 1


# 6. $logs and $errors


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A private service with a short run time limit and a small memory limit."""
    with running_server(tmp_path_factory.mktemp("strict"), HEADWATER_HTTP_TIMEOUT_MS="2000",
                        HEADWATER_TIMER_TIMEOUT_MS="2000", HEADWATER_RUN_MEMORY_MB="64") as srv:
        yield srv


@pytest.fixture
def strict_api(strict: Server) -> Iterator[httpx.Client]:
    with client_for(strict, new_user(strict).api_key) as client:
        yield client


def test_console_calls_become_logs(api: httpx.Client) -> None:
    sid, url = deploy(api, component("""
    console.log("hello %s", "world", 42);
    console.info("info line");
    console.warn("n=%d", 5);
    console.error("bad", { a: 1 });
    console.debug("dbg");
    this.$emit({ ok: true });
"""))
    assert post(url, {}).status_code == 200
    logs = wait_events(api, sid, 5, event_name="$logs")
    assert [(i["event"]["level"], i["event"]["message"]) for i in reversed(logs)] == [
        ("log", "hello world 42"),
        ("info", "info line"),
        ("warn", "n=5"),
        ("error", "bad { a: 1 }"),
        ("debug", "dbg"),
    ]
    for item in logs:
        assert isinstance(item["event"]["ts"], int)
        assert item["metadata"]["name"] == "$logs"
        assert item["metadata"]["emitter_id"] == sid
    assert_newest_first(logs)
    assert wait_events(api, sid, 1)[0]["event"] == {"ok": True}
    # logs stay off the default channel
    assert summaries(api, sid)["page_info"]["total_count"] == 1


def test_throwing_run_is_a_runtime_error(api: httpx.Client, server: Server) -> None:
    sid, url = deploy(api, component("""
    console.log("before");
    this.$emit({ step: 1 });
    throw new Error("boom 123");
"""))
    assert post(url, {"k": "v"}, params={"q": "1"}).status_code == 200
    errors = wait_events(api, sid, 1, event_name="$errors")
    assert len(errors) == 1
    item = errors[0]
    assert item["metadata"]["name"] == "$errors"
    error = item["event"]["error"]
    assert error["code"] == "RUNTIME_ERROR"
    assert "boom 123" in error["message"]
    assert "boom 123" in error["stack"]
    assert isinstance(error["ts"], int)
    assert "cellId" in error
    original = item["event"]["original_event"]
    assert original["method"] == "POST"
    assert original["body"] == {"k": "v"}
    assert original["query"] == {"q": "1"}
    context = item["event"]["original_context"]
    assert context["source_id"] == sid
    # what it did before throwing is kept
    assert wait_events(api, sid, 1)[0]["event"] == {"step": 1}
    assert wait_events(api, sid, 1, event_name="$logs")[0]["event"]["message"] == "before"
    healthy_and_running(server, api)


def test_hanging_run_times_out(strict: Server, strict_api: httpx.Client) -> None:
    sid, url = deploy(strict_api, component("""
    this.$emit({ started: true });
    await new Promise((resolve) => setTimeout(resolve, 600000));
    this.$emit({ finished: true });
"""))
    started = time.monotonic()
    assert post(url, {}).status_code == 200
    errors = wait_events(strict_api, sid, 1, event_name="$errors")
    assert errors[0]["event"]["error"]["code"] == "TIMEOUT"
    assert time.monotonic() - started < 15
    assert errors[0]["event"]["original_context"]["source_id"] == sid
    assert [i["event"] for i in summaries(strict_api, sid, expand="event")["data"]] == [{"started": True}]
    healthy_and_running(strict, strict_api)
    # the same source runs again after its worker was terminated
    assert post(url, {}).status_code == 200
    wait_events(strict_api, sid, 2, event_name="$errors")


def test_busy_loop_times_out(strict: Server, strict_api: httpx.Client) -> None:
    sid, url = deploy(strict_api, component("while (true) {}"))
    assert post(url, {}).status_code == 200
    errors = wait_events(strict_api, sid, 1, event_name="$errors")
    assert errors[0]["event"]["error"]["code"] == "TIMEOUT"
    healthy_and_running(strict, strict_api)


def test_memory_hungry_run_is_out_of_memory(strict: Server, strict_api: httpx.Client) -> None:
    sid, url = deploy(strict_api, component("""
    const hoard = [];
    while (true) hoard.push(new Array(100000).fill(hoard.length));
"""))
    assert post(url, {}).status_code == 200
    errors = wait_events(strict_api, sid, 1, event_name="$errors")
    assert errors[0]["event"]["error"]["code"] == "OUT_OF_MEMORY"
    assert errors[0]["event"]["original_context"]["source_id"] == sid
    healthy_and_running(strict, strict_api)


# 7. deleting events (every range and channel, and bad ids, are tests/api/test_events.py on the
# fakes and tests/contract/test_store_events.py on each store; here all of them and every channel,
# after real runs, also against the AWS deployment in tests/e2e/aws/test_black_box.py)


def ten_events(api: httpx.Client) -> tuple[str, list[str]]:
    """A source with ten default-channel events; returns (source id, event ids oldest first)."""
    sid, url = deploy(api, component("for (let n = 0; n < 10; n++) this.$emit({ n }, { id: n });"))
    assert post(url, {}).status_code == 200
    items = wait_events(api, sid, 10)
    assert [i["event"]["n"] for i in items] == list(range(9, -1, -1))
    return sid, [i["id"] for i in reversed(items)]


def delete_and_wait(api: httpx.Client, sid: str, expected: list[str], **params: str) -> None:
    r = api.delete(f"/sources/{sid}/events", params=params)
    assert r.status_code == 202, r.text
    assert r.content == b""
    wait_until(api, sid, lambda items: [i["id"] for i in reversed(items)] == expected,
               f"remaining ids {expected}")


def test_delete_all_events(api: httpx.Client) -> None:
    sid, _ = ten_events(api)
    delete_and_wait(api, sid, [])
    assert summaries(api, sid)["page_info"]["total_count"] == 0


def three_channels(api: httpx.Client) -> str:
    """A source with one event on each of the default channel, "alerts" and "$logs"."""
    sid, url = deploy(api, component("""
    this.$emit({ n: 1 });
    this.$emit({ n: 2 }, { name: "alerts" });
    console.log("logged");
"""))
    post(url, {})
    wait_events(api, sid, 1, event_name="alerts")
    wait_events(api, sid, 1, event_name="$logs")
    return sid


def test_delete_without_event_name_clears_every_channel(api: httpx.Client) -> None:
    sid = three_channels(api)
    assert api.delete(f"/sources/{sid}/events").status_code == 202
    for channel in ("", "alerts", "$logs"):
        wait_until(api, sid, lambda items: items == [], f"{channel!r} cleared", event_name=channel)


# 8. summaries: truncation, limit, channels and an item's shape are tests/api/test_events.py
