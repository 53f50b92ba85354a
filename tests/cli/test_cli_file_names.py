"""`deploy`, `update --code`, `run` and `dev` send the component file's name with its code
(`component_file`: stacks then name it, tests/e2e/test_source_maps.py), and nothing for a name
the service would refuse. In-process, against a server that records what it is sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.cli.dev import Remembered, Session
from tests.cli.test_cli_develop_offline import hw
from tests.cli.test_cli_offline import saved_login

SOURCE = {"id": "dc_1", "name": "my-source", "active": True, "configured_props": {}, "component_id": "sc_1"}
RUN = {"type": "source", "name": "my-source", "event": {}, "emits": [], "logs": [], "db_writes": {}, "db": {},
       "response": None, "error": None, "duration_ms": 1.0}


class Recorder(BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, dict[str, Any]]] = []

    def answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        self.bodies.append((self.command, self.path, body))
        data = RUN if self.path.startswith("/v1/components/run") else SOURCE
        out = json.dumps({"data": data}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(env: dict[str, str]) -> Iterator[tuple[str, list[tuple[str, str, dict[str, Any]]]]]:
    recorder = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    Recorder.bodies = []
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    saved_login(env, url, "hw_x")
    try:
        yield url, Recorder.bodies
    finally:
        recorder.shutdown()


def sent(bodies: list[tuple[str, str, dict[str, Any]]], method: str) -> list[dict[str, Any]]:
    return [body for m, _, body in bodies if m == method and "component_code" in body]


def test_deploy_update_and_run_send_the_files_name(env: dict[str, str], server: Any,
                                                   tmp_path: Path) -> None:
    _, bodies = server
    (tmp_path / "my-source.mjs").write_text("export default {}")
    (tmp_path / "my source.mjs").write_text("export default {}")
    hw(env, "deploy", str(tmp_path / "my-source.mjs"))
    hw(env, "update", "dc_1", "--code", str(tmp_path / "my-source.mjs"))
    hw(env, "run", "my-source.mjs", cwd=tmp_path)
    hw(env, "deploy", str(tmp_path / "my source.mjs"))
    posted = sent(bodies, "POST")
    assert [b.get("component_file") for b in posted] == ["my-source.mjs", "my-source.mjs", None], bodies
    assert [b.get("component_file") for b in sent(bodies, "PUT")] == ["my-source.mjs"], bodies


def test_dev_sends_the_files_name_when_it_deploys_and_re_deploys(server: Any, tmp_path: Path) -> None:
    url, bodies = server
    path = tmp_path / "my-source.mjs"
    path.write_text("export default {}")
    with httpx.Client(base_url=f"{url}/v1") as client:
        session = Session(client, path, Remembered(path, url), {}, None, as_json=True)
        session.following = True  # nothing to follow here
        session.create()
        path.write_text("export default { v: 2 }")
        session.saved()
    assert [b.get("component_file") for b in sent(bodies, "POST") + sent(bodies, "PUT")] == \
        ["my-source.mjs", "my-source.mjs"], bodies
