"""`$.send.email` and `$.send.s3` of workflows: through SMTP and S3 when the operator set them up,
a clear CONFIGURATION_ERROR when not. The SMTP server is a real one on loopback; S3 is moto (the
S3 adapter alone: tests/aws/test_s3_store.py)."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from email import message_from_bytes
from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, client_for, new_user, running_server
from tests.e2e.test_routing import EMITTER
from tests.e2e.test_runs import deploy
from tests.e2e.test_workflows import wait_for, write

MAILER = """export default {
  name: "Mail", key: "test-mail", version: "0.0.1", type: "action",
  async run({ $, steps }) { $.send.email({ subject: "New order " + steps.trigger.event.n, text: "see it" }); },
};"""
STORE = """export default {
  name: "Store", key: "test-store", version: "0.0.1", type: "action",
  async run({ $ }) { $.send.s3({ bucket: "orders", prefix: "in/", payload: { ok: true } }); },
};"""


class SmtpServer:
    """Just enough SMTP to receive one message at a time, on loopback."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.received = threading.Condition()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.wfile.write(b"220 test\r\n")
                data, in_data = b"", False
                for line in self.rfile:
                    if in_data:
                        if line == b".\r\n":
                            with outer.received:
                                outer.messages.append(data)
                                outer.received.notify_all()
                            in_data, data = False, b""
                            self.wfile.write(b"250 queued\r\n")
                        else:
                            data += line
                        continue
                    verb = line[:4].upper()
                    if verb == b"EHLO":
                        self.wfile.write(b"250 test\r\n")
                    elif verb == b"DATA":
                        in_data = True
                        self.wfile.write(b"354 go on\r\n")
                    elif verb == b"QUIT":
                        self.wfile.write(b"221 bye\r\n")
                        return
                    else:
                        self.wfile.write(b"250 ok\r\n")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count: int) -> list[bytes]:
        with self.received:
            assert self.received.wait_for(lambda: len(self.messages) >= count, timeout=60)
            return list(self.messages)


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer()
    yield server
    server.server.shutdown()


def test_send_email_goes_to_the_owner_through_smtp(tmp_path: Path, smtp: SmtpServer) -> None:
    (tmp_path / "mail.mjs").write_text(MAILER)
    (tmp_path / "data").mkdir()
    with running_server(tmp_path / "data", HEADWATER_SMTP_URL=f"smtp://127.0.0.1:{smtp.port}",
                        HEADWATER_EMAIL_FROM="bot@example.org") as srv:
        user = new_user(srv, tier="paid")
        with client_for(srv, user.api_key) as api:
            source_id, url = deploy(api, EMITTER)
            path = write(tmp_path, "mails", source_id, [{"name": "mail", "component": str(tmp_path / "mail.mjs")}])
            srv.cli("workflows", "deploy", str(path), "--user", user.id)
            httpx.post(url, json={"n": 5})
            [raw] = smtp.wait(1)
    message = message_from_bytes(raw)
    assert message["Subject"] == "New order 5" and message["From"] == "bot@example.org"
    assert message["To"] == f"{user.username}@example.com"


def test_unconfigured_destinations_fail_the_run_clearly(server: Server, tmp_path: Path) -> None:
    (tmp_path / "store.mjs").write_text(STORE)
    user = new_user(server, tier="paid")
    with client_for(server, user.api_key) as api:
        source_id, url = deploy(api, EMITTER)
        path = write(tmp_path, "stores", source_id, [{"name": "store", "component": str(tmp_path / "store.mjs")}])
        workflow_id = server.cli("workflows", "deploy", str(path), "--user", user.id)["id"]
        httpx.post(url, json={"n": 1})
        [error] = wait_for(api, workflow_id, errors=True)
    assert error["event"]["error"]["code"] == "CONFIGURATION_ERROR"
    assert "$.send.s3 is not set up" in error["event"]["error"]["message"]
    assert error["event"]["error"]["cellId"] == "store"
