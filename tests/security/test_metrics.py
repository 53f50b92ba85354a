"""Issue 31: `/metrics` names no tenant. Unauthenticated, by default, it carries no source, user,
org, workflow, webhook (or any other) id of any account; per-source labels are the operator's
choice (HEADWATER_METRICS_SOURCES > 0), and HEADWATER_METRICS_TOKEN puts the page behind a token."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from headwater.domain.ids import API_KEY_PREFIX, PREFIXES
from tests.conftest import Server, client_for, free_port, new_user, running_server
from tests.e2e.test_runs import wait_events
from tests.e2e.test_sse import deploy
from tests.e2e.test_workflows import wait_for

# Any id Headwater makes: a prefix, then the random part (ids.new_id), not inside a longer word.
PREFIX = "|".join(re.escape(p) for p in [*PREFIXES.values(), API_KEY_PREFIX])
AN_ID = re.compile(rf"(?<![A-Za-z0-9_])(?:{PREFIX})[A-Za-z0-9_-]{{16,}}")
TOKEN = "metrics-token-0123456789abcdef"


def tenant_activity(server: Server) -> list[str]:
    """A user and their org run sources, a workflow and a webhook delivery; the ids involved."""
    user = new_user(server, tier="paid")
    org = server.cli("orgs", "create", "--name", "Metered", "--owner", user.id)["id"]
    with client_for(server, user.api_key) as api:
        source_id, url = deploy(api)
        org_source = api.post("/sources", params={"org_id": org}, json={
            "component_code": "export default {name: 'org emitter', version: '1', props: {http: '$.interface.http'},"
                              " run(e) { this.$emit(e.body) }}"}).json()["data"]
        r = api.post("/workflows", json={"name": "metered", "trigger": source_id, "steps": [
            {"name": "emit", "component": "headwater-emit", "props": {"event": "{{steps.trigger.event}}"}}]})
        assert r.status_code == 200, r.text
        workflow_id = r.json()["data"]["id"]
        webhook = api.post("/webhooks", params={"url": f"http://127.0.0.1:{free_port()}/hook"}).json()["data"]["id"]
        assert api.post("/subscriptions", params={"emitter_id": source_id, "listener_id": webhook}).status_code < 300
        for n in range(3):
            assert httpx.post(url, json={"n": n}).status_code == 200
        assert httpx.post(org_source["configured_props"]["http"]["endpoint_url"], json={"n": 9}).status_code == 200
        wait_events(api, source_id, 3)
        wait_events(api, org_source["id"], 1)
        wait_for(api, workflow_id)
    return [user.id, org, source_id, org_source["id"], workflow_id, webhook]


def test_the_unauthenticated_metrics_page_names_no_tenant(local_server: Server) -> None:
    """On the unchanged code (HEADWATER_METRICS_SOURCES=50 by default) the page listed the source
    ids with their runs, errors and emits."""
    ids = tenant_activity(local_server)
    r = httpx.get(local_server.base_url + "/metrics")
    assert r.status_code == 200
    assert not [i for i in ids if i in r.text], [i for i in ids if i in r.text]
    assert not AN_ID.findall(r.text), sorted(set(AN_ID.findall(r.text)))[:10]
    assert 'source="other"' in r.text  # the runs are counted, under `other`


@pytest.fixture(scope="module")
def guarded_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("metrics-token")
    with running_server(data, HEADWATER_METRICS_SOURCES="5", HEADWATER_METRICS_TOKEN=TOKEN) as srv:
        yield srv


def test_with_a_token_set_metrics_need_it_and_per_source_labels_are_the_operators_choice(
        guarded_metrics: Server) -> None:
    """On the unchanged code the token was ignored: every request was a 200."""
    ids = tenant_activity(guarded_metrics)
    url = guarded_metrics.base_url + "/metrics"
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789abcdef"}, {"Authorization": TOKEN},
                    {"Authorization": f"Basic {TOKEN}"}, {"Authorization": f"Bearer {TOKEN}x"}):
        refused = httpx.get(url, headers=headers)
        assert refused.status_code == 401, (headers, refused.status_code)
        assert refused.headers["www-authenticate"] == "Bearer" and "headwater_" not in refused.text
    r = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    source_ids = [i for i in ids if i.startswith("dc_")]
    assert all(f'source="{s}"' in r.text for s in source_ids), source_ids  # METRICS_SOURCES=5: their own
    assert not [i for i in ids if i in r.text and not i.startswith("dc_")]
