"""More of the project's black-box tests, run here against the emulated AWS deployment only
(their local runs are in their own modules): event deletion, manual runs, the errors channel,
and SSE as API Gateway buffers it: an answer that ends as soon as it has events."""

from __future__ import annotations

import socket
import time
import uuid
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import Server
from tests.e2e.security.conftest import Account
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


def test_sse_ends_once_it_has_events_and_resumes_from_last_event_id(api: httpx.Client) -> None:
    """API Gateway buffers a Lambda's answer, so a stream (bounded by HEADWATER_SSE_MAX_S, 25 s in
    template.yaml) ends as soon as it has sent events, and the client resumes from its last id."""
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


def test_sse_delivers_an_event_sent_after_the_client_connected_long_before_the_bound(api: httpx.Client) -> None:
    """The client's request is sent (a socket of its own, so "connected" is a fact, not a guess),
    then an event is sent to the source: the answer with it arrives a few seconds later (the
    queue, the run, then the stream's one-second look), not at the 25 s bound."""
    source_id, endpoint = deploy(api, component("this.$emit(event, {summary: 'e'})"))
    assert httpx.post(endpoint, json={"n": 1}).status_code == 200
    seen = wait_events(api, source_id, 1)[0]["id"]
    url = urlsplit(str(api.base_url))
    request = (f"GET {url.path.rstrip('/')}/sources/{source_id}/sse HTTP/1.1\r\nHost: {url.netloc}\r\n"
               f"Authorization: {api.headers['authorization']}\r\nLast-Event-ID: {seen}\r\n"
               "Accept: text/event-stream\r\nConnection: close\r\n\r\n")
    with socket.create_connection((url.hostname, url.port), timeout=60) as client:
        client.sendall(request.encode())
        sent = time.monotonic()
        assert httpx.post(endpoint, json={"n": 2}).status_code == 200
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        arrived = time.monotonic() - sent
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b'"n":2' in body and b'"n":1' not in body, body
    assert arrived < 12, f"the event arrived {arrived:.1f} s after it was sent (the bound is 25 s)"


def test_each_account_is_a_tenant_of_the_runner_function_with_runner_processes_of_its_own(server: Server) -> None:
    """Lambda's tenant isolation mode, emulated (local_runner_function.py): every runner invoke names
    the run's account as its tenant, and a tenant's runs go to runner processes of its own. An
    account's runs find what its earlier runs left in their /tmp (a warm runner of its own); another
    account's run, on the same component, finds nothing of it."""
    name = f"secret-{uuid.uuid4().hex[:8]}"
    writer = Account(server).deploy("tmp_files.mjs")
    wrote = writer.run({"op": "write", "name": name, "secret": "the writer's secret"})
    assert wrote["readBack"] == "the writer's secret" and name in wrote["listing"], wrote
    other = Account(server).deploy("tmp_files.mjs").run({"op": "probe", "name": name})
    assert other["read"] == "ENOENT" and other["exclusiveCreate"] == "created", other
    again = writer.run({"op": "probe", "name": name})
    assert again["read"] == "the writer's secret" and again["exclusiveCreate"] == "EEXIST", again
