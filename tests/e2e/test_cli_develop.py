"""`init`, `run` and `dev` against a live service: a template as written deploys and runs, `run`
prints what a run did (exit 1 and the stack when it throws), and `dev` re-deploys on save under the
same source id with `this.db` kept. tests/cli/test_cli_develop_offline.py has them with no service."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.cli.test_cli_develop_offline import VERBS, hw
from tests.cli.test_cli_offline import one_error_line, saved_login
from tests.conftest import HEADWATER, Server, User, client_for, new_user
from tests.e2e.test_runs import wait_events


@pytest.fixture(scope="module")
def logged_in(server: Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[User, dict[str, str]]:
    """One paid user logged in for the module's tests (a login is two CLI starts: seconds on a busy machine)."""
    env = {**server.env, "HEADWATER_CONFIG": str(tmp_path_factory.mktemp("cli") / "config.json")}
    user = new_user(server, tier="paid")
    hw(env, "login", "--url", server.base_url, "--key", user.api_key)
    return user, env


@pytest.fixture
def env(logged_in: tuple[User, dict[str, str]]) -> dict[str, str]:
    return logged_in[1]


def test_an_http_source_from_init_runs_and_deploys_as_written(server: Server, logged_in: tuple[User, dict[str, str]],
                                                              env: dict[str, str],
                                                              tmp_path: Path) -> None:
    hw(env, "init", "source", "Orders hook", cwd=tmp_path)
    event = json.dumps({"method": "POST", "path": "/", "body": {"order": 7}})
    printed = hw(env, "run", "orders-hook.mjs", "--event", event, "--db", '{"count": 2}', cwd=tmp_path).stdout
    assert re.fullmatch(r"ran source 'Orders hook' in \d+ ms\n"
                        r'emit    \{"order": 7\}  summary "request 3"\n'
                        r"log     request 3: POST /\n"
                        r"db      count = 3\n", printed), printed

    source = json.loads(hw(env, "deploy", "orders-hook.mjs", "--json", cwd=tmp_path).stdout)
    assert httpx.post(source["configured_props"]["http"]["endpoint_url"], json={"order": 8}).status_code == 200
    with client_for(server, logged_in[0].api_key) as api:
        [item] = wait_events(api, source["id"], 1)
    assert (item["event"], item["metadata"]["summary"]) == ({"order": 8}, "request 1")


def test_an_action_and_a_timer_source_from_init_run_as_written(env: dict[str, str],
                                                               tmp_path: Path) -> None:
    hw(env, "init", "action", "Greet", cwd=tmp_path)
    ran = json.loads(hw(env, "run", "greet.mjs", "-p", "who=ada", "--json", cwd=tmp_path).stdout)
    assert (ran["return_value"], ran["exports"]) == ({"greeting": "hello ada"}, {"$summary": "hello ada"})
    hw(env, "init", "source", "Tick", "--timer", "--ts", cwd=tmp_path)
    printed = hw(env, "run", "tick.ts", cwd=tmp_path).stdout
    assert '  summary "run 1"  id "1"' in printed and "db      count = 1" in printed


THROWS = """export default {
  name: "Thrower", version: "1",
  async run(event) {
    console.log("about to fail");
    throw new Error(`no ${event.what}`);
  },
};
"""


def test_a_run_that_throws_exits_1_with_the_error_and_its_stack(env: dict[str, str],
                                                                tmp_path: Path) -> None:
    (tmp_path / "throws.mjs").write_text(THROWS)
    proc = hw(env, "run", "throws.mjs", "--event", '{"what": "luck"}', check=False, cwd=tmp_path)
    assert proc.returncode == 1 and "log     about to fail" in proc.stdout
    first, *stack = proc.stderr.strip().splitlines()
    assert first == "error: RUNTIME_ERROR: no luck" and stack[0] == "Error: no luck" and "at " in stack[1]
    as_json = hw(env, "run", "throws.mjs", "--json", check=False, cwd=tmp_path)
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["error"]["message"] == "no undefined"


def test_code_that_does_not_load_and_an_unknown_prop_are_one_line(env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    (tmp_path / "broken.mjs").write_text("export default {")
    assert one_error_line(hw(env, "run", "broken.mjs", check=False, cwd=tmp_path)).startswith("error: ")
    (tmp_path / "throws.mjs").write_text(THROWS)
    line = one_error_line(hw(env, "run", "throws.mjs", "-p", "colour=red", check=False, cwd=tmp_path))
    assert "colour: is not a prop of this component" in line


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v[0])
def test_run_and_dev_say_in_one_line_that_the_key_is_wrong(server: Server, tmp_path: Path, verb: list[str]) -> None:
    (tmp_path / "c.mjs").write_text(THROWS)
    env = {**server.env, "HEADWATER_CONFIG": str(tmp_path / "cli" / "config.json")}
    saved_login(env, server.base_url, "hw_" + "x" * 40)
    line = one_error_line(hw(env, *verb, check=False, cwd=tmp_path))
    assert "The API key is not valid." in line and "headwater login" in line


class Lines:
    """A process's output lines, awaited one matching line at a time (no sleeps)."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=lambda: [self.lines.put(line) for line in stream], daemon=True).start()

    def wait(self, matches: Callable[[str], bool], timeout_s: float = 60) -> str:
        while True:
            try:
                line = self.lines.get(timeout=timeout_s)
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout_s} s; saw {self.seen}") from None
            self.seen.append(line)
            if matches(line):
                return line


COUNTER = """export default {
  name: "Counter", version: "VERSION",
  props: { http: "$.interface.http", db: "$.service.db" },
  async run(event) {
    const n = (this.db.get("n") ?? 0) + 1;
    this.db.set("n", n);
    this.$emit({ version: "VERSION", n }, { summary: `VERSION #${n}` });
  },
};
"""


def test_dev_redeploys_on_save_with_the_same_source_and_its_state(env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    code = tmp_path / "counter.mjs"
    code.write_text(COUNTER.replace("VERSION", "one"))
    # started with SIGINT ignored, as a shell without job control starts a command run with `&`
    # (Python then installs no KeyboardInterrupt of its own): Ctrl-C still ends it
    dev = subprocess.Popen([*HEADWATER, "dev", "counter.mjs", "--json"], cwd=tmp_path, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert dev.stdout is not None and dev.stderr is not None
        out, err = Lines(dev.stdout), Lines(dev.stderr)
        deployed = json.loads(out.wait(lambda line: '"dev": "deployed"' in line))["source"]
        url = deployed["configured_props"]["http"]["endpoint_url"]
        err.wait(lambda line: line.startswith("watching "))
        assert httpx.post(url, json={}).status_code == 200
        first = json.loads(out.wait(lambda line: '"channel": "emit"' in line))
        assert first["event"] == {"version": "one", "n": 1}

        code.write_text("export default {")  # a save that does not deploy: said, and dev goes on
        assert "error" in json.loads(out.wait(lambda line: '"dev": "re-deploy failed"' in line))
        code.write_text(COUNTER.replace("VERSION", "two"))
        again = json.loads(out.wait(lambda line: '"dev": "re-deployed"' in line))["source"]
        assert again["id"] == deployed["id"]
        assert httpx.post(url, json={}).status_code == 200
        second = json.loads(out.wait(lambda line: '"channel": "emit"' in line))
        assert second["event"] == {"version": "two", "n": 2}  # new code, same source, this.db kept

        dev.send_signal(signal.SIGINT)
        assert dev.wait(timeout=30) == 0
        assert "stays deployed" in err.wait(lambda line: line.startswith("stopped"))
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()
    remembered = json.loads((tmp_path / ".headwater-dev.json").read_text())
    assert list(remembered.values()) == [{"counter.mjs": deployed["id"]}]
    # The next `dev` of this file updates the source it deployed: same id, same state.
    proc = subprocess.Popen([*HEADWATER, "dev", "counter.mjs"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        assert f"updated {deployed['id']} (counter)" in Lines(proc.stdout).wait(lambda line: "updated" in line)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
