"""The `pd`-style CLI against a live service: login, deploy, list, events (-f), logs, update, delete."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import COMPONENTS, HEADWATER, Server, User, free_port, new_user

SOURCE = """export default {
  name: "CLI source",
  version: "0.0.1",
  props: { http: "$.interface.http", greeting: { type: "string", default: "hi", optional: true } },
  async run(event) {
    console.log(`${this.greeting} ${event.body.n}`);
    this.$emit({ n: event.body.n, greeting: this.greeting });
  },
};
"""


@pytest.fixture
def env(server: Server, tmp_path: Path) -> Iterator[dict[str, str]]:
    yield {**server.env, "HEADWATER_CONFIG": str(tmp_path / "cli" / "config.json")}


def hw(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*HEADWATER, *args], capture_output=True, text=True, env=env, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"headwater {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


@pytest.fixture
def logged_in(server: Server, env: dict[str, str]) -> User:
    user = new_user(server, tier="paid")
    out = json.loads(hw(env, "login", "--url", server.base_url, "--key", user.api_key, "--json").stdout)
    assert out["user"] == user.id
    return user


def test_login_keeps_the_key_in_a_file_only_the_user_reads(logged_in: User, env: dict[str, str]) -> None:
    config = Path(env["HEADWATER_CONFIG"])
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text())["api_key"] == logged_in.api_key


def test_a_bad_key_or_no_login_is_a_clear_error(server: Server, env: dict[str, str]) -> None:
    proc = hw(env, "login", "--url", server.base_url, "--key", "hw_wrong", check=False)
    assert proc.returncode == 2 and "not valid" in proc.stderr
    proc = hw(env, "list", check=False)
    assert proc.returncode == 2 and "Not logged in" in proc.stderr


def test_deploy_list_events_logs_update_delete(logged_in: User, env: dict[str, str], tmp_path: Path) -> None:
    code = tmp_path / "source.mjs"
    code.write_text(SOURCE)
    source = json.loads(hw(env, "deploy", str(code), "--prop", "greeting=hello", "--name", "cli-one",
                           "--json").stdout)
    url = source["configured_props"]["http"]["endpoint_url"]
    listed = json.loads(hw(env, "list", "--json").stdout)["data"]
    assert [s["id"] for s in listed] == [source["id"]]

    follower = subprocess.Popen([*HEADWATER, "events", "cli-one", "-f", "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
    try:
        # Once it prints the "following" line on stderr, it is subscribed: an event sent now must show.
        assert follower.stderr is not None and follower.stdout is not None
        assert "following" in follower.stderr.readline()
        assert httpx.post(url, json={"n": 1}).status_code == 200
        item = json.loads(follower.stdout.readline())
        assert item["event"] == {"n": 1, "greeting": "hello"}
    finally:
        follower.terminate()
        follower.wait(timeout=10)

    printed = hw(env, "events", source["id"], "-n", "5").stdout
    assert '{"n": 1, "greeting": "hello"}' in printed
    assert "hello 1" in hw(env, "logs", "cli-one").stdout

    updated = json.loads(hw(env, "update", "cli-one", "--prop", "greeting=hey", "--json").stdout)
    assert updated["configured_props"]["greeting"] == "hey"
    httpx.post(url, json={"n": 2})
    inactive = json.loads(hw(env, "update", "cli-one", "--inactive", "--json").stdout)
    assert inactive["active"] is False and inactive["configured_props"]["greeting"] == "hey"
    assert json.loads(hw(env, "delete", "cli-one", "--json").stdout) == {"deleted": source["id"]}
    assert json.loads(hw(env, "list", "--json").stdout)["data"] == []
    proc = hw(env, "delete", "cli-one", check=False)
    assert proc.returncode == 2 and "No source named" in proc.stderr


def test_deploy_a_registry_component_and_a_bad_prop(logged_in: User, env: dict[str, str]) -> None:
    source = json.loads(hw(env, "deploy", "headwater-http", "--json").stdout)
    assert source["configured_props"]["http"]["endpoint_url"].startswith("http://")
    proc = hw(env, "deploy", "headwater-http", "--prop", "nonsense", check=False)
    assert proc.returncode == 2 and "name=value" in proc.stderr


def test_publish_reports_published_skipped_and_failed(server: Server, env: dict[str, str],
                                                      tmp_path: Path) -> None:
    folder = tmp_path / "app"
    (folder / "sources" / "ok").mkdir(parents=True)
    (folder / "sources" / "ok" / "ok.mjs").write_text(
        'export default {key: "cli-pub-ok", name: "OK", version: "1.0.0", props: {}, run() {}}')
    (folder / "sources" / "nokey").mkdir()
    (folder / "sources" / "nokey" / "nokey.mjs").write_text(
        'export default {name: "No key", version: "1.0.0", run() {}}')
    (folder / "sources" / "bad").mkdir()
    (folder / "sources" / "bad" / "bad.mjs").write_text("export default {")
    proc = hw(env, "publish", str(folder), "--data-dir", str(server.data_dir), "--json", check=False)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["published"], out["skipped"], out["failed"]) == (1, 1, 1)
    assert {r["file"]: r["status"] for r in out["results"]} == {
        "sources/ok/ok.mjs": "published", "sources/nokey/nokey.mjs": "skipped", "sources/bad/bad.mjs": "failed"}


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "headwater.cli", "--help"], capture_output=True, text=True,
                         env={**os.environ}, timeout=60).stdout
    for command in ("login", "deploy", "list", "events", "logs", "update", "delete", "publish", "serve", "users",
                    "workflows"):
        assert command in out
    assert COMPONENTS.is_dir()


# Each verb that talks to the service, with arguments that would work against a healthy one.
SOURCE_VERBS = [["list"], ["deploy", "headwater-http"], ["events", "dc_nosuchsource0000000000"],
                ["logs", "some-name"], ["update", "some-name", "--inactive"], ["delete", "dc_nosuchsource0000000000"]]


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


@pytest.mark.parametrize("verb", SOURCE_VERBS, ids=lambda v: v[0])
def test_every_verb_says_in_one_line_that_the_server_is_down(env: dict[str, str], verb: list[str]) -> None:
    saved_login(env, f"http://127.0.0.1:{free_port()}", "hw_whatever")
    line = one_error_line(hw(env, *verb, check=False))
    assert line.startswith("error: Cannot reach http://127.0.0.1:") and "connection refused" in line


def test_login_to_a_server_that_is_down_is_one_line(env: dict[str, str]) -> None:
    line = one_error_line(hw(env, "login", "--url", f"http://127.0.0.1:{free_port()}", "--key", "hw_x", check=False))
    assert "Cannot reach" in line


@pytest.mark.parametrize("verb", SOURCE_VERBS, ids=lambda v: v[0])
def test_every_verb_says_in_one_line_that_the_key_is_wrong(server: Server, env: dict[str, str],
                                                           verb: list[str]) -> None:
    saved_login(env, server.base_url, "hw_" + "x" * 40)
    line = one_error_line(hw(env, *verb, check=False))
    assert "The API key is not valid." in line and "headwater login" in line


@pytest.mark.parametrize("verb", [v for v in SOURCE_VERBS if v[0] not in ("list", "deploy")], ids=lambda v: v[0])
def test_every_verb_says_in_one_line_that_a_source_is_unknown(logged_in: User, env: dict[str, str],
                                                              verb: list[str]) -> None:
    line = one_error_line(hw(env, *verb, check=False))
    assert "No source" in line


def test_other_api_errors_print_the_services_sentence_and_fields(logged_in: User, env: dict[str, str]) -> None:
    line = one_error_line(hw(env, "deploy", "headwater-http", "--prop", "colour=red", check=False))
    assert line.startswith("error: ") and "colour: is not a prop of this component" in line
    as_json = json.loads(one_error_line(hw(env, "deploy", "headwater-http", "--prop", "colour=red", "--json",
                                            check=False)))
    assert as_json["details"] == {"colour": ["is not a prop of this component"]}
