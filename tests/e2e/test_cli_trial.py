"""`headwater deploy FILE --to SOURCE --try` against a live service (docs/trials.md): the diff is
printed run by run; without a terminal and without `--yes` the source is not switched; `--yes`
switches it; on a terminal the user is asked, and "n" leaves it, "y" switches it."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import httpx

from tests.cli.test_cli_offline import hw_in_process
from tests.conftest import HEADWATER, Server, User, client_for
from tests.e2e.test_cli import env, logged_in  # noqa: F401 - the fixtures
from tests.e2e.test_run_records import wait_runs
from tests.e2e.test_source_trials import LIVE, SECRET, TRIED

ASKED = "Switch"


def version(server: Server, user: User, source_id: str) -> str:
    with client_for(server, user.api_key) as api:
        component_id = api.get(f"/sources/{source_id}").json()["data"]["component_id"]
        return str(api.get(f"/components/{component_id}").json()["data"]["version"])


def on_a_terminal(cli_env: dict[str, str], args: list[str], answer: str) -> str:
    """Runs the real `headwater` with a terminal for stdin, answers its question, returns its output."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*HEADWATER, *args], stdin=follower, stdout=follower, stderr=follower, env=cli_env)
    os.close(follower)
    out = b""
    try:
        while ASKED.encode() not in out:
            chunk = os.read(leader, 65536)
            if not chunk:
                break
            out += chunk
        os.write(leader, answer.encode() + b"\n")
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            out += chunk
    finally:
        assert proc.wait(timeout=120) == 0, out.decode(errors="replace")
        os.close(leader)
    return out.decode(errors="replace")


def test_deploy_to_a_source_with_try_prints_the_diff_and_asks(server: Server, logged_in: User,  # noqa: F811
                                                              env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    live, tried = tmp_path / "live.mjs", tmp_path / "tried.mjs"
    live.write_text(LIVE)
    tried.write_text(TRIED)
    source = json.loads(hw_in_process(env, "deploy", str(live), "-p", f"token={SECRET}", "--name", "orders",
                                      "--json").stdout)
    url = source["configured_props"]["http"]["endpoint_url"]
    with client_for(server, logged_in.api_key) as api:
        for n, order in enumerate(({"id": 1, "total": 5}, {"id": 2, "total": 7}), 1):
            assert httpx.post(url, json=order, timeout=60).status_code == 200
            wait_runs(api, f"/sources/{source['id']}", lambda runs, want=n: len(runs) == want, "the runs")

    refused = hw_in_process(env, "deploy", str(tried), "--to", "orders", "--try", check=False)
    assert refused.returncode == 2 and "Give --yes" in refused.stderr
    lines = refused.stdout.splitlines()
    assert lines[0].startswith("tried Orders 2.0.0 on the last 2 runs") and "exact" in lines[0]
    assert lines[1].endswith(": 1 changed, 1 added")
    assert lines[2] == '  ~ o-1  {"order":1,"total":5,"n":1} -> {"order":1,"total":500,"n":1}'
    assert lines[3] == '  + a-1 [audit]  {"audit":1,"token":"[secret]"}'
    assert lines[4].endswith(": 1 removed") and lines[5].startswith("  - o-2  ")
    assert SECRET not in refused.stdout
    assert version(server, logged_in, source["id"]) == "1.0.0"

    said_no = on_a_terminal(env, ["deploy", str(tried), "--to", "orders", "--try"], "n")
    assert "~ o-1" in said_no and "not switched" in said_no
    assert version(server, logged_in, source["id"]) == "1.0.0"
    said_yes = on_a_terminal(env, ["deploy", str(tried), "--to", "orders", "--try"], "y")
    assert f"updated {source['id']}" in said_yes
    assert version(server, logged_in, source["id"]) == "2.0.0"

    out = json.loads(hw_in_process(env, "deploy", str(live), "--to", source["id"], "--try", "--yes",
                                   "--json").stdout)
    assert out["trial"]["version"] == "1.0.0" and out["source"]["id"] == source["id"]
    assert version(server, logged_in, source["id"]) == "1.0.0"
