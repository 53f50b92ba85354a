"""`headwater workflows` with the logged-in key (no `--user`, no data dir): what works against a
remote server. The operator's form (`--user`) is in tests/e2e/test_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli_develop_offline import WORKFLOW_VERBS, hw
from tests.cli.test_cli_offline import one_error_line, saved_login
from tests.conftest import COMPONENTS, Server, new_user


def test_deploy_list_and_delete_a_workflow_with_the_logged_in_key(server: Server, tmp_path: Path) -> None:
    env = {**server.env, "HEADWATER_CONFIG": str(tmp_path / "cli" / "config.json")}
    env.pop("HEADWATER_DATA_DIR")  # nothing of the server's store: the key alone
    hw(env, "login", "--url", server.base_url, "--key", new_user(server, tier="paid").api_key)
    (tmp_path / "flows" / "steps").mkdir(parents=True)
    (tmp_path / "flows" / "steps" / "double.mjs").write_text((COMPONENTS / "workflow" / "double.mjs").read_text())
    (tmp_path / "flows" / "flow.yaml").write_text(
        "name: doubler\nsteps:\n  - name: double\n    component: steps/double.mjs\n    props: {n: 2}\n")
    deployed = json.loads(hw(env, "workflows", "deploy", "flows/flow.yaml", "--json", cwd=tmp_path).stdout)
    assert deployed["id"].startswith("p_") and deployed["deployment_id"].startswith("d_")
    assert hw(env, "workflows", "list").stdout.startswith(f"{deployed['id']} doubler (")
    assert "No workflow named 'other'" in one_error_line(hw(env, "workflows", "delete", "other", check=False))
    assert json.loads(hw(env, "workflows", "delete", "doubler", "--json").stdout) == {"deleted": deployed["id"]}
    assert hw(env, "workflows", "list").stdout == "no workflows\n"
    line = one_error_line(hw(env, "workflows", "delete", deployed["id"], check=False))
    assert line == f"error: No workflow {deployed['id']}."


@pytest.mark.parametrize("verb", WORKFLOW_VERBS, ids=lambda v: v[1])
def test_workflow_verbs_say_in_one_line_that_the_key_is_wrong(server: Server, tmp_path: Path,
                                                             verb: list[str]) -> None:
    env = {**server.env, "HEADWATER_CONFIG": str(tmp_path / "cli" / "config.json")}
    (tmp_path / "flow.yaml").write_text("name: flow\nsteps: [{name: a, component: headwater-emit}]\n")
    saved_login(env, server.base_url, "hw_" + "x" * 40)
    line = one_error_line(hw(env, *verb, check=False, cwd=tmp_path))
    assert "The API key is not valid." in line and "headwater login" in line
