"""The HTTP interface of sources end to end (2 of 2): the event given to run(), body limits,
inactive/deleted sources, the free-tier quota and a custom response's run time limit (a private
service with small limits). Throughput, order and custom responses: test_http_interface.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import Server, client_for, new_user, running_server
from tests.e2e.test_runs import component, deploy, summaries, wait_events

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
def limited_paid(limited: Server) -> Iterator[httpx.Client]:
    with client_for(limited, new_user(limited, tier="paid").api_key) as client:
        yield client

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


def test_any_method_reaches_the_source(shape: tuple[httpx.Client, str, str]) -> None:
    """Each method in-process is tests/api/test_http_interface.py; here the three together."""
    api, sid, url = shape
    for method in ("DELETE", "OPTIONS", "HEAD"):
        assert httpx.request(method, url + "/" + method.lower()).status_code == 200, method
    events = [i["event"] for i in wait_events(api, sid, 3)]
    assert sorted((e["method"], e["path"]) for e in events) == [("DELETE", "/delete"), ("HEAD", "/head"),
                                                                ("OPTIONS", "/options")]


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


def test_the_endpoints_errors_once_per_deployment(server: Server, api: httpx.Client) -> None:
    """An unknown endpoint, an inactive and a deleted source's are 404, a body over the default limit
    (512 KiB) 413; each in-process with its cases is tests/api/test_http_interface.py."""
    r = httpx.post(server.base_url + "/http/en_doesnotexist000000000000/sub", json={})
    assert r.status_code == 404 and "error" in r.json()
    sid, url = deploy(api, component("this.$emit({ size: event.bodyRaw.length });"))
    r = httpx.post(url, content=b"a" * (512 * 1024 + 1), headers={"content-type": "text/plain"})
    assert r.status_code == 413 and "error" in r.json()
    assert httpx.post(url, content=b"a" * (512 * 1024), headers={"content-type": "text/plain"}).status_code == 200
    assert [i["event"] for i in wait_events(api, sid, 1)] == [{"size": 512 * 1024}]
    assert api.put(f"/sources/{sid}", json={"active": False}).status_code == 200
    assert httpx.post(url, json={}).status_code == 404
    assert api.delete(f"/sources/{sid}").status_code == 204
    assert httpx.post(url, json={}).status_code == 404


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
