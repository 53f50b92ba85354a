"""The `pd`-style CLI against a live service: login, deploy, list, events (-f), logs, update, delete.
What the CLI does with no service to talk to is tests/cli/test_cli_offline.py. Most commands run
`headwater.cli.main` in this process (`hw_in_process`); the real `headwater` process runs where the
process is the point: exit codes through the entry point, `events -f`, and the verbs that open the
service's data directory themselves (publish, workflows deploy). The CLI's rules on the service's
answers (each verb's line for a wrong key or an unknown name or id, the service's sentence and fields,
the saved login, whoami, logout, describe) run against the app over the fakes in
tests/cli/test_cli_api.py; here one of each."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli_offline import hw, hw_in_process, one_error_line, saved_login
from tests.conftest import COMPONENTS, HEADWATER, Server, User, client_for, new_user
from tests.e2e.test_routing import Receiver, wait_delivery

SOURCE = """export default {
  name: "CLI source",
  version: "0.0.1",
  props: { http: "$.interface.http", greeting: { type: "string", default: "hi", optional: true } },
  async run(event) {
    console.log(`${this.greeting} ${event.body.n}`);
    this.$emit({ n: event.body.n, greeting: this.greeting }, { summary: `number ${event.body.n}` });
  },
};
"""


@pytest.fixture
def env(server: Server, tmp_path: Path) -> Iterator[dict[str, str]]:
    yield {**server.env, "HEADWATER_CONFIG": str(tmp_path / "cli" / "config.json")}


@pytest.fixture
def logged_in(server: Server, env: dict[str, str]) -> User:
    user = new_user(server, tier="paid")
    out = json.loads(hw_in_process(env, "login", "--url", server.base_url, "--key", user.api_key, "--json").stdout)
    assert out["user"] == user.id
    return user


def test_a_bad_key_or_no_login_is_a_clear_error(server: Server, env: dict[str, str]) -> None:
    proc = hw(env, "login", "--url", server.base_url, "--key", "hw_wrong", check=False)
    assert proc.returncode == 2 and "not valid" in proc.stderr
    proc = hw(env, "list", check=False)
    assert proc.returncode == 2 and "Not logged in" in proc.stderr


def test_deploy_list_events_logs_update_delete(logged_in: User, env: dict[str, str], tmp_path: Path) -> None:
    code = tmp_path / "source.mjs"
    code.write_text(SOURCE)
    source = json.loads(hw_in_process(env, "deploy", str(code), "--prop", "greeting=hello", "--name", "cli-one",
                           "--json").stdout)
    url = source["configured_props"]["http"]["endpoint_url"]
    listed = json.loads(hw_in_process(env, "list", "--json").stdout)["data"]
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

    printed = hw_in_process(env, "events", source["id"], "-n", "5").stdout
    # A readable local time, the id, the summary, then the event.
    assert re.fullmatch(r'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  \d+-\d+  number 1  \{"n": 1, "greeting": "hello"\}\n',
                        printed), printed
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  log    hello 1\n",
                        hw_in_process(env, "logs", "cli-one").stdout)

    runs = subprocess.Popen([*HEADWATER, "runs", "cli-one", "-f", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:  # the runs on record first (the request above), then each new one as it is recorded
        assert runs.stderr is not None and runs.stdout is not None
        first = json.loads(runs.stdout.readline())
        assert (first["kind"], first["outcome"]) == ("http", "success")
        assert "following" in runs.stderr.readline()
        assert httpx.post(url, json={"n": 3}).status_code == 200
        newer = json.loads(runs.stdout.readline())
        assert newer["kind"] == "http" and newer["id"] != first["id"]
    finally:
        runs.terminate()
        runs.wait(timeout=10)

    updated = json.loads(hw_in_process(env, "update", "cli-one", "--prop", "greeting=hey", "--json").stdout)
    assert updated["configured_props"]["greeting"] == "hey"
    httpx.post(url, json={"n": 2})
    inactive = json.loads(hw_in_process(env, "update", "cli-one", "--inactive", "--json").stdout)
    assert inactive["active"] is False and inactive["configured_props"]["greeting"] == "hey"
    assert json.loads(hw_in_process(env, "delete", "cli-one", "--json").stdout) == {"deleted": source["id"]}
    assert json.loads(hw_in_process(env, "list", "--json").stdout)["data"] == []
    proc = hw_in_process(env, "delete", "cli-one", check=False)
    assert proc.returncode == 2 and "No source named" in proc.stderr


def test_deploy_a_registry_component_and_a_bad_prop(logged_in: User, env: dict[str, str]) -> None:
    source = json.loads(hw_in_process(env, "deploy", "headwater-http", "--json").stdout)
    assert source["configured_props"]["http"]["endpoint_url"].startswith("http://")
    proc = hw_in_process(env, "deploy", "headwater-http", "--prop", "nonsense", check=False)
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


def test_a_saved_wrong_key_or_an_unknown_id_is_one_line(server: Server, env: dict[str, str]) -> None:
    # One of each through a running service; every verb's line is tests/cli/test_cli_api.py.
    saved_login(env, server.base_url, "hw_" + "x" * 40)
    line = one_error_line(hw_in_process(env, "list", check=False))
    assert "The API key is not valid." in line and "headwater login" in line
    user = new_user(server)
    saved_login(env, server.base_url, user.api_key)
    line = one_error_line(hw_in_process(env, "webhooks", "deliveries", "wh_nosuchwebhook000000000", check=False))
    assert line.startswith("error: ") and "No webhook" in line


def test_webhooks_and_subscriptions(server: Server, logged_in: User, env: dict[str, str]) -> None:
    receiver = Receiver()
    try:
        source = json.loads(hw_in_process(env, "deploy", "headwater-http", "--name", "hooked", "--json").stdout)
        hook = json.loads(hw_in_process(env, "webhooks", "create", "--url", receiver.url, "--name", "mine",
                                        "--json").stdout)
        assert hook["signing_secret"].startswith("whsec_")
        assert f"{hook['id']}  {receiver.url}  active  mine" in hw_in_process(env, "webhooks", "list").stdout
        sub = json.loads(hw_in_process(env, "subscriptions", "create", "--emitter", "hooked", "--listener", hook["id"],
                            "--json").stdout)
        assert (sub["emitter_id"], sub["listener_id"]) == (source["id"], hook["id"])
        assert f"{source['id']} -> {hook['id']}  events" in hw_in_process(env, "subscriptions", "list").stdout

        httpx.post(source["configured_props"]["http"]["endpoint_url"], json={"n": 1})
        receiver.wait(1)
        with client_for(server, logged_in.api_key) as api:
            [delivery] = wait_delivery(api, hook["id"], lambda d: d["status"] == "succeeded")
        listed = hw_in_process(env, "webhooks", "deliveries", hook["id"]).stdout
        assert f"{delivery['id']}  succeeded" in listed and "1 attempt  last answer 200" in listed
        as_json = hw_in_process(env, "webhooks", "deliveries", hook["id"], "--json").stdout
        assert json.loads(as_json)["data"] == [delivery]

        hw_in_process(env, "subscriptions", "delete", "--emitter", "hooked", "--listener", hook["id"])
        assert json.loads(hw_in_process(env, "subscriptions", "list", "--json").stdout)["data"] == []
        deleted = hw_in_process(env, "webhooks", "delete", hook["id"], "--json").stdout
        assert json.loads(deleted) == {"deleted": hook["id"]}
        assert hw_in_process(env, "webhooks", "list").stdout == "no webhooks\n"
    finally:
        receiver.close()



@pytest.mark.parametrize("verb", [["publish"], ["registry", "publish"]], ids=" ".join)
def test_a_relative_folder_is_published_from_the_current_directory(server: Server, env: dict[str, str],
                                                                     tmp_path: Path, verb: list[str]) -> None:
    key = f"cli-relative-{tmp_path.name[-12:]}-{len(verb)}"
    (tmp_path / "app" / "sources").mkdir(parents=True)
    (tmp_path / "app" / "sources" / "rel.mjs").write_text(
        f'export default {{key: "{key}", name: "Relative", version: "1.0.0", props: {{}}, run() {{}}}}')
    out = json.loads(hw(env, *verb, "app", "--data-dir", str(server.data_dir), "--json", cwd=tmp_path).stdout)
    assert [(r["file"], r["status"]) for r in out["results"]] == [("sources/rel.mjs", "published")]


def test_relative_files_mean_the_current_directory(server: Server, logged_in: User, env: dict[str, str],
                                                   tmp_path: Path) -> None:
    # A relative source file (deploy, update --code) is tests/cli/test_cli_api.py; a workflow's files here.
    (tmp_path / "flows" / "steps").mkdir(parents=True)
    (tmp_path / "flows" / "steps" / "double.mjs").write_text((COMPONENTS / "workflow" / "double.mjs").read_text())
    (tmp_path / "flows" / "flow.yaml").write_text(json.dumps({"name": f"relative-{logged_in.id}", "steps": [
        {"name": "double", "component": "steps/double.mjs", "props": {"n": 1}}]}))
    deployed = json.loads(hw(env, "workflows", "deploy", "flows/flow.yaml", "--user", logged_in.id,
                             "--data-dir", str(server.data_dir), "--json", cwd=tmp_path).stdout)
    assert deployed["id"].startswith("p_")
