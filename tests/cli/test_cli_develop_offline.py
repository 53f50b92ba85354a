"""`init`, `run`, `dev` and the keyed `workflows` verbs with no service behind them: the templates
`init` writes (and never over an existing file), and one error line when nothing listens or a file
is not there. In-process (click's runner: a CLI start is seconds on a busy machine); the real
command's output is tests/cli/test_cli_offline.py's, and tests/e2e/test_cli_develop.py runs the
written templates, `run` and `dev` against a live service."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from headwater.cli import cli
from tests.cli.test_cli_offline import one_error_line, saved_login
from tests.conftest import free_port


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def hw(env: dict[str, str], *args: str, check: bool = True, cwd: Path | None = None) -> Result:
    """`headwater ARGS` in this process, in `cwd`."""
    previous = Path.cwd()
    os.chdir(cwd or previous)
    try:
        result = CliRunner().invoke(cli, list(args), env=env)
    finally:
        os.chdir(previous)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = Result(result.exit_code, result.stdout, result.stderr)
    if check and out.returncode != 0:
        raise AssertionError(f"headwater {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}")
    return out


@pytest.mark.parametrize(("args", "file", "marks"), [
    (["source", "My Hook"], "my-hook.mjs", ['key: "my-hook"', 'name: "My Hook"', '"$.interface.http"', "this.$emit"]),
    (["source", "Ticker", "--timer", "--interval", "30"], "ticker.mjs",
     ['"$.interface.timer"', "intervalSeconds: 30"]),
    (["action", "Greet"], "greet.mjs", ['type: "action"', "async run({ $ })", "return { greeting }"]),
    (["source", "typed", "--ts"], "typed.ts", ['import { defineSource } from "@pipedream/types";',
                                               "export default defineSource({", "run(event: any)"]),
], ids=["http", "timer", "action", "ts"])
def test_init_writes_a_template_in_the_current_directory(env: dict[str, str], tmp_path: Path, args: list[str],
                                                         file: str, marks: list[str]) -> None:
    out = json.loads(hw(env, "init", *args, "--json", cwd=tmp_path).stdout)
    assert out["file"] == str(tmp_path / file)
    code = (tmp_path / file).read_text()
    for mark in marks:
        assert mark in code


def test_init_never_replaces_a_file(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "mine.mjs").write_text("my own work")
    line = one_error_line(hw(env, "init", "source", "mine", check=False, cwd=tmp_path))
    assert "exists already" in line and "nothing was written" in line
    assert (tmp_path / "mine.mjs").read_text() == "my own work"
    assert "--output" in one_error_line(hw(env, "init", "action", "x", "-o", "mine.mjs", check=False, cwd=tmp_path))


VERBS = [["run", "c.mjs", "--event", '{"n": 1}'], ["dev", "c.mjs"]]


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v[0])
def test_run_and_dev_say_in_one_line_that_the_server_is_down(env: dict[str, str], tmp_path: Path,
                                                             verb: list[str]) -> None:
    (tmp_path / "c.mjs").write_text('export default {name: "c", version: "1", run() {}}')
    saved_login(env, f"http://127.0.0.1:{free_port()}", "hw_whatever")
    line = one_error_line(hw(env, *verb, check=False, cwd=tmp_path))
    assert line.startswith("error: Cannot reach http://127.0.0.1:") and "connection refused" in line


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v[0])
def test_run_and_dev_name_a_file_that_is_not_there(env: dict[str, str], tmp_path: Path, verb: list[str]) -> None:
    saved_login(env, f"http://127.0.0.1:{free_port()}", "hw_whatever")
    assert one_error_line(hw(env, *verb, check=False, cwd=tmp_path)) == "error: No component file c.mjs."


def test_run_says_which_option_is_not_json(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "c.mjs").write_text('export default {name: "c", version: "1", run() {}}')
    saved_login(env, f"http://127.0.0.1:{free_port()}", "hw_whatever")
    assert "--event is not valid JSON" in one_error_line(hw(env, "run", "c.mjs", "--event", "{n: 1}", check=False,
                                                            cwd=tmp_path))
    assert "--db must be a JSON object" in one_error_line(hw(env, "run", "c.mjs", "--db", "[1]", check=False,
                                                             cwd=tmp_path))
    assert "cannot read the file" in one_error_line(hw(env, "run", "c.mjs", "--event", "@nope.json", check=False,
                                                       cwd=tmp_path))


def test_help_lists_init_run_and_dev(env: dict[str, str]) -> None:
    out = hw(env, "--help").stdout
    for command in ("init", "run", "dev"):
        assert re.search(rf"^  {command} ", out, re.MULTILINE), out


WORKFLOW_VERBS = [["workflows", "deploy", "flow.yaml"], ["workflows", "list"], ["workflows", "delete", "flow"]]


@pytest.mark.parametrize("verb", WORKFLOW_VERBS, ids=lambda v: v[1])
def test_workflow_verbs_with_the_key_say_in_one_line_that_the_server_is_down(env: dict[str, str], tmp_path: Path,
                                                                            verb: list[str]) -> None:
    (tmp_path / "flow.yaml").write_text("name: flow\nsteps: [{name: a, component: headwater-emit}]\n")
    saved_login(env, f"http://127.0.0.1:{free_port()}", "hw_whatever")
    line = one_error_line(hw(env, *verb, check=False, cwd=tmp_path))
    assert line.startswith("error: Cannot reach http://127.0.0.1:") and "connection refused" in line


def test_a_workflow_file_that_is_not_there_or_not_yaml_is_one_line(env: dict[str, str], tmp_path: Path) -> None:
    saved_login(env, f"http://127.0.0.1:{free_port()}", "hw_whatever")
    assert one_error_line(hw(env, "workflows", "deploy", "none.yaml", check=False, cwd=tmp_path)) == \
        f"error: No workflow file {tmp_path / 'none.yaml'}."
    (tmp_path / "bad.yaml").write_text("name: [\n")
    assert "is not valid YAML" in one_error_line(hw(env, "workflows", "deploy", "bad.yaml", check=False,
                                                      cwd=tmp_path))
    (tmp_path / "flow.yaml").write_text("name: flow\nsteps: [{name: a, component: steps/a.mjs}]\n")
    assert "no component file steps/a.mjs" in one_error_line(hw(env, "workflows", "deploy", "flow.yaml",
                                                                 check=False, cwd=tmp_path))
