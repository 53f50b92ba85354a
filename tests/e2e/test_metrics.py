"""`GET /metrics`: Prometheus text with requests by route, ingest, runs, the queue and the runners."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Server
from tests.e2e.test_runs import component, deploy, wait_events


def scrape(server: Server) -> dict[str, list[tuple[dict[str, str], float]]]:
    r = httpx.get(server.base_url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def value(metrics: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for got, v in metrics.get(name, []) if all(got.get(k) == want for k, want in labels.items()))


def test_metrics_count_requests_ingest_runs_and_show_the_queue_and_runners(server: Server,
                                                                          api: httpx.Client) -> None:
    source_id, url = deploy(api, component("this.$emit(event.body)"))
    before = scrape(server)
    assert httpx.post(url, json={"n": 1}).status_code == 200
    assert httpx.post(url.rsplit("/", 1)[0] + "/en_unknown", json={}).status_code == 404
    wait_events(api, source_id, 1)
    api.get(f"/sources/{source_id}")
    after = scrape(server)
    assert value(after, "headwater_ingest_requests_total", outcome="accepted") > \
        value(before, "headwater_ingest_requests_total", outcome="accepted")
    assert value(after, "headwater_ingest_requests_total", outcome="refused", status="404") >= 1
    assert value(after, "headwater_http_requests_total", route="/v1/sources/{source_id}", method="GET",
                 status="200") >= 1
    assert value(after, "headwater_runs_total", outcome="ok") >= 1
    assert value(after, "headwater_run_seconds_count") >= 1
    assert "headwater_queue_depth" in after and "headwater_queue_oldest_seconds" in after
    assert value(after, "headwater_runner_processes") >= 1
    assert value(after, "headwater_runner_memory_bytes") > 10_000_000
    # per source (source_metrics.py): by default (HEADWATER_METRICS_SOURCES=0) every source counts
    # under `other`, so the page names none (tests/security/test_metrics.py sets it to get labels)
    assert value(after, "headwater_source_runs_total", source="other", outcome="ok") > \
        value(before, "headwater_source_runs_total", source="other", outcome="ok")
    assert value(after, "headwater_source_events_emitted_total", source="other") >= 1
    assert value(after, "headwater_source_run_seconds_count", source="other") >= 1
    labels = {got["source"] for got, _ in after.get("headwater_source_runs_total", [])}
    assert labels == {"other"}, labels
