"""Threat 8: a service where no sandbox is available refuses to start, unless told it is unsafe."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx

from tests.conftest import HEADWATER, make_server, running_server


def test_without_bubblewrap_the_service_refuses_to_start(tmp_path: Path) -> None:
    server = make_server(tmp_path, PATH="/nonexistent")  # no bwrap to be found
    proc = subprocess.run([*HEADWATER, "serve"], env=server.env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "bubblewrap" in output and "HEADWATER_UNSAFE_NO_SANDBOX=1" in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]  # a clear message, not a crash


def test_the_operator_may_run_without_a_sandbox_with_a_loud_warning(tmp_path: Path) -> None:
    with running_server(tmp_path, PATH="/nonexistent", HEADWATER_UNSAFE_NO_SANDBOX="1") as server:
        assert httpx.get(server.base_url + "/healthz", timeout=10).status_code == 200
        deadline = time.monotonic() + 30
        while "WITHOUT a sandbox" not in (log := (tmp_path / "server.log").read_text()):
            assert time.monotonic() < deadline, log[-2000:]
            time.sleep(0.05)
