"""More of the project's black-box tests, run here against the emulated AWS deployment only
(their local runs are in their own modules): event deletion, manual runs, the errors channel,
and an SSE stream bounded as API Gateway buffers it."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import Server
from tests.e2e.test_runs import (  # noqa: F401 - collected here, against this module's server
    component,
    deploy,
    test_delete_all_events,
    test_delete_without_event_name_clears_every_channel,
    wait_events,
)
from tests.e2e.test_sources_api import (  # noqa: F401
    test_manual_run_emits_body,
    test_run_error_goes_to_errors_channel,
)


@pytest.fixture(scope="session")
def server(aws_server: Server) -> Server:
    return aws_server


def test_sse_ends_after_its_bound_and_resumes_from_last_event_id(api: httpx.Client) -> None:
    """API Gateway buffers a Lambda's answer, so a stream ends after HEADWATER_SSE_MAX_S (25 s in
    template.yaml, 3 s for this server) with what it had, and the client resumes from its last id."""
    source_id, endpoint = deploy(api, component("this.$emit(event, {summary: 'e'})"))
    assert httpx.post(endpoint, json={"n": 1}).status_code == 200
    first = wait_events(api, source_id, 1)[0]
    started = time.monotonic()
    response = api.get(f"/sources/{source_id}/sse", headers={"Last-Event-ID": "0-0"}, timeout=30)
    assert response.status_code == 200 and time.monotonic() - started < 20
    assert f"id: {first['id']}" in response.text and '"n":1' in response.text
    assert httpx.post(endpoint, json={"n": 2}).status_code == 200
    wait_events(api, source_id, 2)
    again = api.get(f"/sources/{source_id}/sse", headers={"Last-Event-ID": first["id"]}, timeout=30)
    assert '"n":2' in again.text and '"n":1' not in again.text
