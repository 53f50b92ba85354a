"""The CLI with no Headwater service behind it: its help and version, and one error line (no
traceback) when the saved URL is not one, nothing listens there, or what answers is not Headwater.
`hw` runs the real `headwater` command in a process of its own; `hw_in_process` runs the same
`headwater.cli.main` in this one, for the many error-message cases (a new interpreter and its imports
cost about a second of a core each). tests/e2e/test_cli.py runs it against a live service."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from headwater.cli import main
from tests.conftest import COMPONENTS, HEADWATER, free_port


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    yield {**{k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")},
           "HEADWATER_CONFIG": str(tmp_path / "cli" / "config.json")}


def hw(env: dict[str, str], *args: str, check: bool = True,
       cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*HEADWATER, *args], capture_output=True, text=True, env=env, timeout=120, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"headwater {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def hw_in_process(env: dict[str, str], *args: str, check: bool = True,
                  cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`hw` without the process: `headwater.cli.main(args)` with `env` as the whole environment, `cwd`
    as the current directory, and what it prints (its log lines too, as `main` configures them in a
    process of its own) captured. For verbs that end by themselves: not `serve`, `events -f` or `dev`."""
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    root = logging.getLogger()
    log_handler = logging.StreamHandler(err)
    log_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    saved_level = root.level
    os.environ.clear()
    os.environ.update(env)
    try:
        if cwd is not None:
            os.chdir(cwd)
        root.addHandler(log_handler)
        root.setLevel(logging.INFO)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            returncode = main(list(args))
    finally:
        root.removeHandler(log_handler)
        root.setLevel(saved_level)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    proc = subprocess.CompletedProcess(["headwater", *args], returncode, out.getvalue(), err.getvalue())
    if check and returncode != 0:
        raise AssertionError(f"headwater {' '.join(args)} exited {returncode}: {proc.stderr[-2000:]}")
    return proc


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "headwater.cli", "--help"], capture_output=True, text=True,
                         env={**os.environ}, timeout=60).stdout
    for command in ("login", "logout", "whoami", "deploy", "list", "describe", "events", "logs", "update", "delete",
                    "webhooks", "subscriptions", "publish", "serve", "users", "workflows", "runs", "rerun"):
        assert command in out
    assert COMPONENTS.is_dir()


# Each verb that talks to the service, with arguments that would work against a healthy one.
UNKNOWN_SOURCE = "dc_nosuchsource0000000000"
VERBS = [["list"], ["deploy", "headwater-http"], ["events", UNKNOWN_SOURCE], ["logs", "some-name"],
         ["update", "some-name", "--inactive"], ["delete", UNKNOWN_SOURCE], ["whoami"], ["describe", "some-name"],
         ["webhooks", "create", "--url", "http://127.0.0.1:9/hook"], ["webhooks", "list"],
         ["webhooks", "delete", "wh_nosuchwebhook000000000"], ["webhooks", "deliveries", "wh_nosuchwebhook000000000"],
         ["subscriptions", "create", "--emitter", UNKNOWN_SOURCE, "--listener", "wh_nosuchwebhook000000000"],
         ["subscriptions", "list"],
         ["subscriptions", "delete", "--emitter", "some-name", "--listener", "wh_nosuchwebhook000000000"],
         ["accounts", "list"], ["accounts", "show", "apn_nosuchaccount00000000000"],
         ["accounts", "connect", "slack", "--no-wait"], ["workflows", "list"], ["workflows", "delete", "p_nosuch"],
         ["runs", UNKNOWN_SOURCE], ["rerun", UNKNOWN_SOURCE, "1-1"]]
def verb_id(verb: list[str]) -> str:
    return "-".join(word for word in verb[:2] if not word.startswith(("-", "dc_", "wh_")))


def saved_login(env: dict[str, str], url: str, key: str) -> None:
    """A login as `headwater login` saves it, without asking the service."""
    config = Path(env["HEADWATER_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"url": url, "api_key": key}))


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("verb", VERBS, ids=verb_id)
def test_every_verb_says_in_one_line_that_the_server_is_down(env: dict[str, str], verb: list[str]) -> None:
    saved_login(env, f"http://127.0.0.1:{free_port()}", "hw_whatever")
    line = one_error_line(hw_in_process(env, *verb, check=False))
    assert line.startswith("error: Cannot reach http://127.0.0.1:") and "connection refused" in line


@pytest.mark.parametrize("url", ["localhost:8000", "http://256.1.1.1:8000", "ftp://127.0.0.1/"])
def test_a_url_that_is_not_one_is_one_line(env: dict[str, str], url: str) -> None:
    login = hw_in_process(env, "login", "--url", url, "--key", "hw_x", check=False)
    assert f"error: {url!r} is not" in one_error_line(login)
    saved_login(env, url, "hw_x")
    assert f"error: {url!r} is not" in one_error_line(hw_in_process(env, "list", check=False))


def test_an_answer_the_cli_does_not_expect_is_still_one_line(env: dict[str, str]) -> None:
    class Anything(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    not_headwater = ThreadingHTTPServer(("127.0.0.1", 0), Anything)
    threading.Thread(target=not_headwater.serve_forever, daemon=True).start()
    try:
        saved_login(env, f"http://127.0.0.1:{not_headwater.server_address[1]}", "hw_x")
        proc = hw_in_process(env, "list", check=False)
        assert proc.returncode == 3 and "Traceback" not in proc.stderr
        assert proc.stderr.startswith("error: unexpected KeyError: 'data' (HEADWATER_DEBUG=1 shows the traceback)")
        assert len(proc.stderr.strip().splitlines()) == 1
    finally:
        not_headwater.shutdown()


def test_login_to_a_server_that_is_down_is_one_line(env: dict[str, str]) -> None:
    line = one_error_line(hw(env, "login", "--url", f"http://127.0.0.1:{free_port()}", "--key", "hw_x", check=False))
    assert "Cannot reach" in line


def test_version() -> None:
    proc = subprocess.run([*HEADWATER, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and re.fullmatch(r"headwater \d+\.\d+\.\d+\n", proc.stdout)


@pytest.mark.parametrize(("setting", "message"), [
    ({"HEADWATER_INGEST_RATE": "fast"},
     "error: HEADWATER_INGEST_RATE must be a whole number of 0 or more, not 'fast'."),
    ({"HEADWATER_INGEST_RATE": "300"},
     "error: HEADWATER_INGEST_BURST (200) must be at least HEADWATER_INGEST_RATE (300)"),
    ({"HEADWATER_METRICS_TOKEN": "secret"}, "error: HEADWATER_METRICS_TOKEN must be at least 16 printable"),
])
def test_a_bad_setting_is_one_line_naming_the_variable(env: dict[str, str], tmp_path: Path, setting: dict[str, str],
                                                       message: str) -> None:
    proc = hw({**env, **setting, "HEADWATER_DATA_DIR": str(tmp_path / "data")}, "serve", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert one_error_line(proc).startswith(message)
