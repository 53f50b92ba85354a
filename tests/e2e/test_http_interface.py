"""The HTTP interface of sources end to end: throughput and order, custom responses, the event
shape, body limits, inactive/deleted sources and the free-tier quota.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import Server, client_for, new_user, running_server
from tests.e2e.test_runs import (
    assert_newest_first,
    component,
    deploy,
    id_key,
    summaries,
    wait_events,
    wait_until,
)

pytestmark = pytest.mark.both_modes

CUSTOM = '{ type: "$.interface.http", customResponse: true }'
EMIT_EVENT = component("this.$emit(event);")


SLOW_FREE = """export default {
  name: "Slow free", version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) {
    await new Promise((done) => setTimeout(done, 200));
    this.$emit(event.body);
  },
};
"""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A private service with a short HTTP run limit, a small body limit and a tiny free quota."""
    with running_server(
        tmp_path_factory.mktemp("limited"),
        HEADWATER_HTTP_TIMEOUT_MS="3000",
        HEADWATER_HTTP_MAX_BODY_BYTES="2048",
        HEADWATER_FREE_DAILY_INVOCATIONS="5",
    ) as srv:
        yield srv


@pytest.fixture
def paid_api(server: Server) -> Iterator[httpx.Client]:
    """A paid-tier caller on the shared service (no daily invocation cap)."""
    with client_for(server, new_user(server, tier="paid").api_key) as client:
        yield client


@pytest.fixture
def limited_paid(limited: Server) -> Iterator[httpx.Client]:
    with client_for(limited, new_user(limited, tier="paid").api_key) as client:
        yield client


# 1. throughput and order


NUMBERED = component("""
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    this.$emit({ n: event.body.n }, { id: event.body.n, summary: `run ${count}` });
""")


@pytest.mark.local_only("a load test; SQS consumers run one message per idempotent record (docs/aws.md)")
def test_500_concurrent_requests_all_run_and_newest_100_are_kept(paid_api: httpx.Client) -> None:
    sid, url = deploy(paid_api, NUMBERED)
    with httpx.Client(timeout=60, limits=httpx.Limits(max_connections=8)) as http, \
            ThreadPoolExecutor(max_workers=8) as pool:
        def send(n: int) -> int:
            return http.post(url, json={"n": n}).status_code

        # 0..399 are all queued (answered) before 400..499 are sent, so 400..499 are the newest 100
        assert set(pool.map(send, range(400))) == {200}
        assert set(pool.map(send, range(400, 500))) == {200}
    items = wait_until(paid_api, sid, lambda items: bool(items) and items[0]["metadata"]["summary"] == "run 500",
                       "the 500th run", deadline_s=90)
    page = summaries(paid_api, sid, expand="event")
    assert page["page_info"]["total_count"] == 100
    assert page["page_info"]["count"] == 100
    items = page["data"]
    assert sorted(i["event"]["n"] for i in items) == list(range(400, 500))
    # every run emitted exactly once, in run order: runs 500 down to 401 are retained
    assert [i["metadata"]["summary"] for i in items] == [f"run {c}" for c in range(500, 400, -1)]
    keys = [id_key(i["id"]) for i in items]
    assert all(a > b for a, b in zip(keys, keys[1:], strict=False))
    assert len(set(i["id"] for i in items)) == 100


def test_concurrent_custom_responses_of_one_source_each_get_their_own_answer(paid_api: httpx.Client) -> None:
    """Queued runs of one source go to the runner together: each request still gets the answer of
    its own run, and each run sees the `this.db` the one before it wrote."""
    sid, url = deploy(paid_api, component("""
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    this.http.respond({ status: 200, body: { n: event.body.n, count } });
    this.$emit({ n: event.body.n, count });
""", http=CUSTOM))
    with httpx.Client(timeout=60, limits=httpx.Limits(max_connections=8)) as http, \
            ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda n: http.post(url, json={"n": n}), range(80)))
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers if r.status_code != 200][:3]
    assert [r.json()["n"] for r in answers] == list(range(80))
    assert sorted(r.json()["count"] for r in answers) == list(range(1, 81))
    events = {e["event"]["n"]: e["event"]["count"] for e in wait_events(paid_api, sid, 80)}
    assert events == {r.json()["n"]: r.json()["count"] for r in answers}


def test_sequential_requests_run_in_send_order(paid_api: httpx.Client) -> None:
    """Each request is answered at once and run later: the runs still come in the order sent, one
    at a time (each sees the count the one before it wrote). On AWS: the FIFO run queue, grouped
    by source id (docs/aws.md, Queues)."""
    sid, url = deploy(paid_api, NUMBERED)
    with httpx.Client(timeout=60) as http:
        for n in range(20):
            assert http.post(url, json={"n": n}).status_code == 200
    items = wait_events(paid_api, sid, 20)
    assert [i["event"]["n"] for i in items] == list(range(19, -1, -1))
    assert [i["metadata"]["summary"] for i in items] == [f"run {c}" for c in range(20, 0, -1)]
    assert_newest_first(items)


def test_plain_endpoint_answers_success_before_the_run(api: httpx.Client) -> None:
    sid, url = deploy(api, component("""
    await new Promise((resolve) => setTimeout(resolve, 10000));
    this.$emit({ done: true });
"""))
    started = time.monotonic()
    r = httpx.post(url, json={})
    assert r.status_code == 200
    assert r.json() == {"success": True}
    assert time.monotonic() - started < 8  # answered once queued, not after the 10 s run (a busy machine's margin)
    wait_events(api, sid, 1)


# 2. custom responses


def test_custom_response_echo(api: httpx.Client) -> None:
    sid, url = deploy(api, component("""
    await this.http.respond({ status: 201, headers: { "x-echo": "yes", "content-type": "text/plain" },
                              body: event.bodyRaw });
    this.$emit({ answered: true });
""", http=CUSTOM))
    r = httpx.post(url, content=b"hello, echo", headers={"content-type": "text/plain"}, timeout=30)
    assert r.status_code == 201, r.text
    assert r.headers["x-echo"] == "yes"
    assert r.content == b"hello, echo"
    assert wait_events(api, sid, 1)[0]["event"] == {"answered": True}


def test_custom_response_object_body_is_json(api: httpx.Client) -> None:
    _, url = deploy(api, component("""
    await this.http.respond({ status: 200, body: { got: event.body, path: event.path } });
""", http=CUSTOM))
    r = httpx.post(url + "/x/y", json={"a": [1, 2]}, timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {"got": {"a": [1, 2]}, "path": "/x/y"}


def test_custom_response_binary_body_is_byte_exact(api: httpx.Client) -> None:
    _, url = deploy(api, component("""
    await this.http.respond({ status: 200, headers: { "content-type": "application/octet-stream" },
                              body: Buffer.from(event.body.b64, "base64") });
""", http=CUSTOM))
    payload = bytes(range(256)) + os.urandom(4096)
    r = httpx.post(url, json={"b64": base64.b64encode(payload).decode()}, timeout=30)
    assert r.status_code == 200
    assert r.content == payload
    assert r.headers["content-type"] == "application/octet-stream"


def test_custom_response_status_as_numeric_string(api: httpx.Client) -> None:
    _, url = deploy(api, component('await this.http.respond({ status: "202", body: "accepted" });', http=CUSTOM))
    r = httpx.get(url, timeout=30)
    assert r.status_code == 202
    assert r.text == "accepted"


@pytest.mark.parametrize("status", ["99", "600", '"abc"'])
def test_custom_response_invalid_status_is_502_and_an_error(api: httpx.Client, status: str) -> None:
    sid, url = deploy(api, component(f'await this.http.respond({{ status: {status}, body: "no" }});', http=CUSTOM))
    r = httpx.post(url, json={}, timeout=30)
    assert r.status_code == 502, r.text
    assert "error" in r.json()
    errors = wait_events(api, sid, 1, event_name="$errors")
    assert errors[0]["event"]["error"]["code"] == "RUNTIME_ERROR"
    assert "status" in errors[0]["event"]["error"]["message"]


def test_custom_response_never_responding_is_502(api: httpx.Client) -> None:
    sid, url = deploy(api, component("this.$emit({ ran: true });", http=CUSTOM))
    r = httpx.post(url, json={}, timeout=30)
    assert r.status_code == 502
    assert "error" in r.json()
    assert wait_events(api, sid, 1)[0]["event"] == {"ran": True}


def test_custom_response_throwing_before_responding_is_502(api: httpx.Client) -> None:
    sid, url = deploy(api, component('throw new Error("nope");', http=CUSTOM))
    r = httpx.post(url, json={}, timeout=30)
    assert r.status_code == 502
    assert wait_events(api, sid, 1, event_name="$errors")[0]["event"]["error"]["code"] == "RUNTIME_ERROR"


@pytest.mark.local_only("a Lambda answers API Gateway when it returns: the response waits for the run's end")
def test_custom_response_first_respond_wins_and_answers_before_the_run_ends(api: httpx.Client) -> None:
    sid, url = deploy(api, component("""
    await this.http.respond({ status: 200, body: "first" });
    await this.http.respond({ status: 500, body: "second" });
    await new Promise((resolve) => setTimeout(resolve, 10000));
    this.$emit({ finished: true });
""", http=CUSTOM))
    started = time.monotonic()
    r = httpx.post(url, json={}, timeout=30)
    assert (r.status_code, r.text) == (200, "first")
    assert time.monotonic() - started < 8  # answered at respond(), not after the 10 s run (a busy machine's margin)
    wait_events(api, sid, 1)


def test_custom_response_hanging_run_is_504(limited: Server, limited_paid: httpx.Client) -> None:
    sid, url = deploy(limited_paid, component(
        "await new Promise((resolve) => setTimeout(resolve, 600000));", http=CUSTOM))
    started = time.monotonic()
    r = httpx.post(url, json={}, timeout=60)
    assert r.status_code == 504
    assert "error" in r.json()
    assert time.monotonic() - started < 15
    assert wait_events(limited_paid, sid, 1, event_name="$errors")[0]["event"]["error"]["code"] == "TIMEOUT"
    assert httpx.get(limited.base_url + "/healthz").status_code == 200


# 3. the event given to run()


@pytest.fixture
def shape(api: httpx.Client) -> tuple[httpx.Client, str, str]:
    sid, url = deploy(api, EMIT_EVENT)
    return api, sid, url


def test_event_shape_get_with_query_and_headers(shape: tuple[httpx.Client, str, str]) -> None:
    api, sid, url = shape
    r = httpx.get(url, params={"a": "1", "b": "two words"}, headers={"X-Custom-Header": "Value"})
    assert r.status_code == 200
    assert r.json() == {"success": True}
    event = wait_events(api, sid, 1)[0]["event"]
    assert set(event) >= {"method", "path", "query", "headers", "bodyRaw", "body"}
    assert event["method"] == "GET"
    assert event["path"] == "/"
    assert event["query"] == {"a": "1", "b": "two words"}
    assert event["headers"]["x-custom-header"] == "Value"
    assert all(name == name.lower() for name in event["headers"])
    assert event["bodyRaw"] == ""


def test_event_shape_json_body_and_sub_path(shape: tuple[httpx.Client, str, str]) -> None:
    api, sid, url = shape
    httpx.post(url + "/orders/42/items", json={"x": [1, {"y": None}]})
    event = wait_events(api, sid, 1)[0]["event"]
    assert event["method"] == "POST"
    assert event["path"] == "/orders/42/items"
    assert event["query"] == {}
    assert event["headers"]["content-type"] == "application/json"
    assert event["body"] == {"x": [1, {"y": None}]}
    assert isinstance(event["bodyRaw"], str)
    assert json.loads(event["bodyRaw"]) == {"x": [1, {"y": None}]}


def test_event_shape_form_body(shape: tuple[httpx.Client, str, str]) -> None:
    api, sid, url = shape
    httpx.put(url, data={"name": "Ada Lovelace", "empty": ""})
    event = wait_events(api, sid, 1)[0]["event"]
    assert event["method"] == "PUT"
    assert event["body"] == {"name": "Ada Lovelace", "empty": ""}
    assert event["bodyRaw"] == "name=Ada+Lovelace&empty="


def test_event_shape_raw_text_body(shape: tuple[httpx.Client, str, str]) -> None:
    api, sid, url = shape
    httpx.patch(url + "/t", content=b"just some text", headers={"content-type": "text/plain"})
    httpx.post(url, content=b"{not json", headers={"content-type": "application/json"})
    items = wait_events(api, sid, 2)
    text, broken = items[1]["event"], items[0]["event"]
    assert (text["method"], text["path"], text["body"], text["bodyRaw"]) == ("PATCH", "/t", "just some text",
                                                                              "just some text")
    assert (broken["body"], broken["bodyRaw"]) == ("{not json", "{not json")


@pytest.mark.parametrize("method", ["DELETE", "OPTIONS", "HEAD"])
def test_any_method_reaches_the_source(shape: tuple[httpx.Client, str, str], method: str) -> None:
    api, sid, url = shape
    assert httpx.request(method, url + "/m").status_code == 200
    event = wait_events(api, sid, 1)[0]["event"]
    assert (event["method"], event["path"]) == (method, "/m")


def test_repeated_query_and_header_values(shape: tuple[httpx.Client, str, str]) -> None:
    api, sid, url = shape
    httpx.get(url + "?tag=a&tag=b&single=1")
    event = wait_events(api, sid, 1)[0]["event"]
    assert event["query"]["single"] == "1"
    assert event["query"]["tag"] in ("b", ["a", "b"], "a,b", "a")


# 9. errors of the HTTP interface


def test_body_over_the_limit_is_413(limited: Server, limited_paid: httpx.Client) -> None:
    sid, url = deploy(limited_paid, component("this.$emit({ size: event.bodyRaw.length });"))
    assert httpx.post(url, content=b"a" * 2049, headers={"content-type": "text/plain"}).status_code == 413

    def chunks() -> Iterator[bytes]:
        for _ in range(5):
            yield b"b" * 1000

    # without a content-length the limit still applies
    assert httpx.post(url, content=chunks(), headers={"content-type": "text/plain"}).status_code == 413
    r = httpx.post(url, content=b"c" * 2048, headers={"content-type": "text/plain"})
    assert r.status_code == 200
    assert [i["event"] for i in wait_events(limited_paid, sid, 1)] == [{"size": 2048}]


def test_default_body_limit_is_512_kb(server: Server, api: httpx.Client) -> None:
    sid, url = deploy(api, component("this.$emit({ size: event.bodyRaw.length });"))
    r = httpx.post(url, content=b"a" * (512 * 1024 + 1), headers={"content-type": "text/plain"})
    assert r.status_code == 413
    assert "error" in r.json()
    assert httpx.post(url, content=b"a" * (512 * 1024), headers={"content-type": "text/plain"}).status_code == 200
    assert [i["event"] for i in wait_events(api, sid, 1)] == [{"size": 512 * 1024}]


def test_unknown_endpoint_is_404(server: Server) -> None:
    for path in ("/http/en_doesnotexist000000000000", "/http/en_doesnotexist000000000000/sub"):
        r = httpx.post(server.base_url + path, json={})
        assert r.status_code == 404
        assert "error" in r.json()


def test_inactive_source_is_404_until_reactivated(api: httpx.Client) -> None:
    sid, url = deploy(api, component("this.$emit({ n: event.body.n });"))
    r = api.put(f"/sources/{sid}", json={"active": False})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["active"] is False
    assert httpx.post(url, json={"n": 1}).status_code == 404
    assert httpx.get(url + "/sub").status_code == 404
    assert api.put(f"/sources/{sid}", json={"active": True}).status_code == 200
    assert httpx.post(url, json={"n": 2}).status_code == 200
    assert [i["event"] for i in wait_events(api, sid, 1)] == [{"n": 2}]


def test_deleted_source_is_404(api: httpx.Client) -> None:
    sid, url = deploy(api, EMIT_EVENT)
    assert api.delete(f"/sources/{sid}").status_code == 204
    assert httpx.post(url, json={}).status_code == 404
    assert api.get(f"/sources/{sid}/event_summaries").status_code == 404


def use_up_quota(limited: Server, api: httpx.Client) -> tuple[str, str]:
    """Deploys a source for a free user of `limited` and spends the 5 daily invocations on it."""
    sid, url = deploy(api, component("this.$emit({ n: event.body.n });"))
    for n in range(5):
        assert httpx.post(url, json={"n": n}).status_code == 200
        wait_events(api, sid, n + 1)  # each run is counted once it has run
    return sid, url


def test_free_daily_invocation_quota_answers_429(limited: Server) -> None:
    owner = new_user(limited)
    with client_for(limited, owner.api_key) as api:
        sid, url = use_up_quota(limited, api)
        for n in (5, 6):
            r = httpx.post(url, json={"n": n})
            assert r.status_code == 429, r.text
            assert "error" in r.json()
            retry_after = int(r.headers["retry-after"])
            assert 1 <= retry_after <= 86400
        me = api.get("/users/me").json()["data"]
        assert me["daily_invocations_quota"] == 5
        assert me["daily_invocations_used"] == 5
        # negative check: give a refused request time to (wrongly) run; nothing more is emitted
        time.sleep(0.5)
        assert summaries(api, sid)["page_info"]["total_count"] == 5
        assert api.get("/users/me").json()["data"]["daily_invocations_used"] == 5
    # another user's sources are not affected
    with client_for(limited, new_user(limited).api_key) as other:
        sid2, url2 = deploy(other, component("this.$emit({ ok: 1 });"))
        assert httpx.post(url2, json={}).status_code == 200
        wait_events(other, sid2, 1)


def test_refused_invocation_is_a_quota_exceeded_error_event(limited: Server) -> None:
    with client_for(limited, new_user(limited).api_key) as api:
        sid, url = use_up_quota(limited, api)
        assert httpx.post(url, json={"n": 5}).status_code == 429
        errors = wait_events(api, sid, 1, event_name="$errors")
        error = errors[0]["event"]
        assert error["error"]["code"] == "QUOTA_EXCEEDED"
        assert error["original_context"]["source_id"] == sid


def test_free_quota_counts_requests_still_queued(limited: Server) -> None:
    """Eight requests at once against a cap of 5: five are admitted, three refused with 429."""
    owner = new_user(limited)
    with client_for(limited, owner.api_key) as api:
        source = api.post("/sources", json={"component_code": SLOW_FREE}).json()["data"]
        url = source["configured_props"]["http"]["endpoint_url"]
        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = sorted(r.status_code for r in pool.map(lambda n: httpx.post(url, json={"n": n}), range(8)))
        assert statuses == [200] * 5 + [429] * 3
