"""SSE as the AWS deployment serves it, in-process over the fakes: a bounded stream
(`HEADWATER_SSE_MAX_S` > 0; API Gateway hands the client a Lambda's answer whole) ends once it has
events, else at its bound; either way its answer tells an EventSource client to reconnect soon and
where from, so that a client reconnecting after an empty answer skips nothing stored meanwhile."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from headwater.api.sse import RECONNECT_MS
from headwater.domain.events import Emit
from headwater.domain.runs import RunResult
from tests.api.conftest import App, running_app
from tests.api.test_events import deploy


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    yield from running_app(sse_max_s=0.3)


def blocks(text: str) -> list[dict[str, str]]:
    """The answer's blocks (an event, or fields alone), each as its fields; comments skipped."""
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            found.append(fields)
    return found


def run_emitting(app: App, api: httpx.Client, sid: str, n: int) -> None:
    app.world.runner.script = lambda instance, event: RunResult(emits=[Emit({"n": n}, {})])
    assert api.post(f"/sources/{sid}/run", json={}).status_code == 202
    app.world.queue.drain()


def test_an_answer_with_events_tells_the_client_to_reconnect_soon(app: App, api: httpx.Client) -> None:
    sid = deploy(api)
    run_emitting(app, api, sid, 1)
    answer = blocks(api.get(f"/sources/{sid}/sse", headers={"Last-Event-ID": "0-0"}).text)
    assert len(answer) == 1
    assert answer[0]["retry"] == str(RECONNECT_MS) and answer[0]["event"] == "emit"
    assert json.loads(answer[0]["data"])["event"] == {"n": 1}


def test_an_empty_answer_carries_its_cursor_so_a_reconnect_skips_nothing_stored_meanwhile(
        app: App, api: httpx.Client) -> None:
    """A client with no event yet (no Last-Event-ID) gets an answer with none at the bound; an
    event stored before it reconnects comes in its next answer. Without the cursor, the reconnect
    would start "from now" again, after that event."""
    sid = deploy(api)
    run_emitting(app, api, sid, 1)  # before the client came: not for it
    empty = blocks(api.get(f"/sources/{sid}/sse").text)
    assert [set(b) for b in empty] == [{"retry", "id"}]  # no data: EventSource dispatches nothing
    cursor = empty[0]["id"]
    run_emitting(app, api, sid, 2)  # while the client reconnects
    again = blocks(api.get(f"/sources/{sid}/sse", headers={"Last-Event-ID": cursor}).text)
    assert [json.loads(b["data"])["event"] for b in again] == [{"n": 2}]
    assert blocks(api.get(f"/sources/{sid}/sse").text)[0].keys() == {"retry", "id"}  # "from now" has missed it
