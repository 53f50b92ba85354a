"""The CLI's verbs against the real app over the fakes, in this process: `hw_in_process` runs
`headwater.cli.main`, and every request it makes goes to the app `create_app` built over tests/fakes.py
(the TestClient's transport; no server, no Node, no socket), each answer checked against the app's
own OpenAPI document. Here are the CLI's rules on the service's answers: the one line that says the
key is wrong or a name or id is unknown (every verb), the service's sentence and fields, the saved
login, whoami and logout. What needs a running service (events -f, deliveries, publish into a data
directory, the entry point's exit codes) is tests/e2e/test_cli.py."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import headwater.cli.client as cli_client
from headwater.domain.runs import RunResult
from tests.api.conftest import BASE, App, running_app
from tests.cli.test_cli_offline import UNKNOWN_SOURCE, VERBS, hw_in_process, one_error_line, saved_login, verb_id

# What the runner's describe answers for the component the tests deploy (FakeRunner takes it as a literal).
GREETER = repr({"name": "CLI source", "version": "0.0.1", "type": "source",
                "configurable_props": [{"name": "http", "type": "$.interface.http"},
                                       {"name": "greeting", "type": "string", "optional": True, "default": "hi"}]})

UNKNOWN = [(["events", UNKNOWN_SOURCE], "No source"), (["logs", "some-name"], "No source named 'some-name'"),
           (["update", "some-name", "--inactive"], "No source named"), (["delete", UNKNOWN_SOURCE], "No source"),
           (["describe", "some-name"], "No source named"), (["describe", UNKNOWN_SOURCE], "No source"),
           (["webhooks", "delete", "wh_nosuchwebhook000000000"], "No webhook"),
           (["webhooks", "deliveries", "wh_nosuchwebhook000000000"], "No webhook"),
           (["subscriptions", "create", "--emitter", UNKNOWN_SOURCE, "--listener", "wh_nosuchwebhook000000000"], "No "),
           (["subscriptions", "delete", "--emitter", "some-name", "--listener", "wh_x"], "No source named"),
           (["accounts", "show", "apn_nosuchaccount00000000000"], "No account"),
           (["runs", UNKNOWN_SOURCE], "No source"), (["rerun", "some-name", "1-1"], "No source named")]


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    yield from running_app()


@pytest.fixture(autouse=True)
def cli_talks_to_the_app(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `httpx.Client` the CLI opens (headwater/cli/client.py's http_client opens them all) goes to the app."""
    transport = app.http._transport

    def client(**kwargs: Any) -> httpx.Client:
        return httpx.Client(transport=transport, event_hooks={"response": [app.conformance.check]}, **kwargs)

    monkeypatch.setattr(cli_client, "http_client", client)


@pytest.fixture
def key(app: App) -> str:
    name = f"cli{len(app.world.store.data.users)}"
    _, api_key = app.world.services.accounts.create_user(name, f"{name}@example.com", "paid")
    return api_key


@pytest.fixture
def logged_in(env: dict[str, str], key: str) -> dict[str, Any]:
    out = json.loads(hw_in_process(env, "login", "--url", BASE, "--key", key, "--json").stdout)
    assert out["user"] and out["username"]
    return out


def test_login_keeps_the_key_in_a_file_only_the_user_reads(logged_in: dict[str, Any], env: dict[str, str],
                                                           key: str) -> None:
    config = Path(env["HEADWATER_CONFIG"])
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text()) == {"url": BASE, "api_key": key}


def test_a_bad_key_at_login_saves_nothing(env: dict[str, str]) -> None:
    line = one_error_line(hw_in_process(env, "login", "--url", BASE, "--key", "hw_wrong", check=False))
    assert "not valid" in line
    assert not Path(env["HEADWATER_CONFIG"]).exists()


@pytest.mark.parametrize("verb", VERBS, ids=verb_id)
def test_every_verb_says_in_one_line_that_the_key_is_wrong(env: dict[str, str], verb: list[str]) -> None:
    saved_login(env, BASE, "hw_" + "x" * 40)
    line = one_error_line(hw_in_process(env, *verb, check=False))
    assert "The API key is not valid." in line and "headwater login" in line


@pytest.mark.parametrize(("verb", "expected"), UNKNOWN, ids=[verb_id(v) for v, _ in UNKNOWN])
def test_every_verb_says_in_one_line_that_a_name_or_id_is_unknown(logged_in: dict[str, Any], env: dict[str, str],
                                                                  verb: list[str], expected: str) -> None:
    line = one_error_line(hw_in_process(env, *verb, check=False))
    assert line.startswith("error: ") and expected in line


def test_other_api_errors_print_the_services_sentence_and_fields(logged_in: dict[str, Any], env: dict[str, str],
                                                                 tmp_path: Path) -> None:
    code = tmp_path / "source.mjs"
    code.write_text(GREETER)
    line = one_error_line(hw_in_process(env, "deploy", str(code), "--prop", "colour=red", check=False))
    assert line.startswith("error: ") and "colour: is not a prop of this component" in line
    as_json = json.loads(one_error_line(hw_in_process(env, "deploy", str(code), "--prop", "colour=red", "--json",
                                                      check=False)))
    assert as_json["details"] == {"colour": ["is not a prop of this component"]}
    line = one_error_line(hw_in_process(env, "deploy", str(code), "--prop", "nonsense", check=False))
    assert "name=value" in line


def test_whoami_then_logout(app: App, logged_in: dict[str, Any], env: dict[str, str]) -> None:
    checked = app.conformance.checked
    me = json.loads(hw_in_process(env, "whoami", "--json").stdout)
    assert app.conformance.checked > checked  # the CLI's answers are checked against /openapi.json
    assert (me["id"], me["username"], me["url"]) == (logged_in["user"], logged_in["username"], BASE)
    assert hw_in_process(env, "whoami").stdout.startswith(f"{logged_in['username']} ({logged_in['user']}, ")
    assert json.loads(hw_in_process(env, "logout", "--json").stdout)["logged_out"] is True
    assert not Path(env["HEADWATER_CONFIG"]).exists()
    assert "not logged in" in hw_in_process(env, "logout").stdout
    assert "Not logged in" in one_error_line(hw_in_process(env, "whoami", check=False))
    assert "Not logged in" in one_error_line(hw_in_process(env, "list", check=False))


def test_deploy_update_and_describe_a_file(logged_in: dict[str, Any], env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "source.mjs").write_text(GREETER)
    source = json.loads(hw_in_process(env, "deploy", "source.mjs", "--prop", "greeting=hello", "--name", "described",
                                      "--json", cwd=tmp_path).stdout)
    url = source["configured_props"]["http"]["endpoint_url"]
    assert source["configured_props"]["greeting"] == "hello"
    listed = hw_in_process(env, "list").stdout
    assert f"{source['id']}  described" in listed and url in listed
    text = hw_in_process(env, "describe", "described").stdout
    assert f"endpoint   {url}" in text and "component  CLI source 0.0.1" in text
    assert '  greeting = "hello"' in text and "inactive" not in text
    described = json.loads(hw_in_process(env, "describe", source["id"], "--json").stdout)
    assert described["component"]["name"] == "CLI source" and described["configured_props"]["greeting"] == "hello"
    assert "code" not in described["component"]
    assert hw_in_process(env, "describe", "described", "--code").stdout == GREETER

    updated = json.loads(hw_in_process(env, "update", "described", "--prop", "greeting=hey", "--json").stdout)
    assert updated["configured_props"]["greeting"] == "hey"
    inactive = json.loads(hw_in_process(env, "update", "described", "--inactive", "--json").stdout)
    assert inactive["active"] is False and inactive["configured_props"]["greeting"] == "hey"
    (tmp_path / "v2.mjs").write_text(GREETER.replace("0.0.1", "0.0.2"))
    hw_in_process(env, "update", "described", "--code", "v2.mjs", cwd=tmp_path)
    assert "CLI source 0.0.2" in hw_in_process(env, "describe", source["id"]).stdout
    assert json.loads(hw_in_process(env, "delete", "described", "--json").stdout) == {"deleted": source["id"]}
    assert json.loads(hw_in_process(env, "list", "--json").stdout)["data"] == []


def test_runs_lists_shows_one_and_reruns(app: App, key: str, logged_in: dict[str, Any], env: dict[str, str],
                                         tmp_path: Path) -> None:
    (tmp_path / "source.mjs").write_text(GREETER)
    source = json.loads(hw_in_process(env, "deploy", "source.mjs", "--name", "recorded", "--json",
                                      cwd=tmp_path).stdout)
    app.world.runner.script = lambda instance, event: RunResult(
        logs=[{"level": "log", "message": f"got {event}", "ts": 1}], db_writes={"seen": 1})
    assert "no runs on record" in hw_in_process(env, "runs", "recorded").stderr
    for n in (1, 2):
        r = app.http.post(f"/v1/sources/{source['id']}/run", json={"n": n}, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 202, r.text
    app.world.queue.drain()
    lines = hw_in_process(env, "runs", "recorded").stdout.splitlines()
    assert len(lines) == 2 and all(" manual " in line and " success " in line for line in lines)
    newest = json.loads(hw_in_process(env, "runs", "recorded", "-n", "1", "--json").stdout)
    detail = hw_in_process(env, "runs", "recorded", newest["id"]).stdout
    assert 'trigger:  {"n": 2}' in detail and "this.db:  wrote seen" in detail and "log log   got" in detail
    assert f"queued a re-run of {newest['id']}" in hw_in_process(env, "rerun", "recorded", newest["id"]).stdout
    app.world.queue.drain()
    again = json.loads(hw_in_process(env, "runs", source["id"], "-n", "1", "--json").stdout)
    assert again["kind"] == "rerun" and again["rerun_of"] == newest["id"]
    bad = one_error_line(hw_in_process(env, "runs", "recorded", "1-999", check=False))
    assert "No run 1-999" in bad


def test_health_settings_on_deploy_and_update_and_describe_shows_the_health(
        logged_in: dict[str, Any], env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "source.mjs").write_text(GREETER)
    source = json.loads(hw_in_process(env, "deploy", "source.mjs", "--name", "watched", "--expect-events-within",
                                      "3600", "--catch-up", "all", "--json", cwd=tmp_path).stdout)
    assert (source["expect_events_within"], source["catch_up"]) == (3600, "all")
    text = hw_in_process(env, "describe", "watched").stdout
    assert "health     ok" in text and "last run   never" in text and "expects    an event within 3600 s" in text
    assert "last hour  0 runs, 0 events, 0 errors, 0 ticks skipped" in text
    described = json.loads(hw_in_process(env, "describe", "watched", "--json").stdout)
    assert described["health"]["stalled"] is False and len(described["health"]["series"]["hours"]) == 24
    updated = json.loads(hw_in_process(env, "update", "watched", "--expect-events-within", "off", "--json").stdout)
    assert (updated["expect_events_within"], updated["catch_up"]) == (None, "all")
    bad = one_error_line(hw_in_process(env, "update", "watched", "--expect-events-within", "soon", check=False))
    assert "--expect-events-within" in bad and "'soon'" in bad
    refused = one_error_line(hw_in_process(env, "update", "watched", "--expect-events-within", "0", check=False))
    assert "expect_events_within" in refused
    hw_in_process(env, "delete", "watched")


def test_subscriptions_create_replay_queues_the_backfill_once(app: App, logged_in: dict[str, Any],
                                                              env: dict[str, str], tmp_path: Path) -> None:
    from headwater.domain.commands import BackfillWebhook

    (tmp_path / "source.mjs").write_text(GREETER)
    source = json.loads(hw_in_process(env, "deploy", "source.mjs", "--name", "replayed", "--json", cwd=tmp_path).stdout)
    hook = json.loads(hw_in_process(env, "webhooks", "create", "--url", "https://example.com/late", "--json").stdout)
    before = len(app.world.queue.of(BackfillWebhook))
    for _ in range(2):  # the second is the same subscription: no second backfill
        sub = json.loads(hw_in_process(env, "subscriptions", "create", "--emitter", "replayed", "--listener",
                                       hook["id"], "--replay", "--json").stdout)
        assert sub["emitter_id"] == source["id"] and sub["listener_id"] == hook["id"]
    [backfill] = app.world.queue.of(BackfillWebhook)[before:]
    assert backfill.subscription_id == sub["id"] and backfill.events == ()
