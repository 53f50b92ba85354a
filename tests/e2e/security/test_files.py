"""Threat 1: host files read into a bundle (imports) or at run time (`fs`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from headwater.adapters.local.bundler import npm_env
from headwater.adapters.local.sandbox import RUNNER, Bind, find_sandbox
from headwater.settings import Settings
from tests.conftest import Server
from tests.e2e.security.conftest import Account, assert_healthy, source_code


@pytest.mark.parametrize(("component", "named"), [
    ("import_secret_text.mjs", "/secret.key"),
    ("import_secret_bytes.mjs", "/headwater.db"),
    ("import_parent_escape.mjs", "../../../../../../../../etc/passwd"),
    ("require_shadow.mjs", "/etc/shadow"),
])
def test_imports_of_host_files_are_refused_naming_the_import(guarded: Server, component: str, named: str) -> None:
    account = Account(guarded)
    code = source_code(component, __DATA_DIR__=str(guarded.data_dir))
    r = account.api.post("/sources", json={"component_code": code})
    assert r.status_code == 422, r.text
    assert named in r.json()["error"], r.json()
    assert "not allowed" in r.json()["error"]
    secret = (guarded.data_dir / "secret.key").read_text().strip()
    assert secret not in r.text
    assert_healthy(guarded)


def test_the_bundler_sandbox_sees_none_of_the_hosts_files(guarded: Server, tmp_path: Path) -> None:
    """Below the import rule, the OS: the bundler's sandbox holds the runner code, the work dir,
    the npm cache and the output dir, and none of the service's data or the system's secrets."""
    settings = Settings(data_dir=guarded.data_dir)
    sandbox = find_sandbox(settings.runner_dir, settings.node)
    work = tmp_path / "work"
    work.mkdir()
    probe = ("const fs = require('fs'); const out = {};"
             "for (const p of process.argv.slice(1)) { try { fs.readFileSync(p); out[p] = 'READ' }"
             " catch (e) { out[p] = e.code } } console.log(JSON.stringify(out))")
    targets = [str(guarded.data_dir / "secret.key"), str(guarded.data_dir / "headwater.db"), "/etc/shadow",
               "/root/.bash_history", "/work/package.json"]
    (work / "package.json").write_text("{}")
    node = f"{RUNNER}/{settings.node.relative_to(settings.runner_dir)}"
    command = sandbox.bundler(settings.runner_dir, [Bind(work, "/work", True)], npm_env(),
                              [node, "-e", probe, *targets])
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen.pop("/work/package.json") == "READ"  # its own work dir is there
    assert set(seen.values()) == {"ENOENT"}, seen
    assert_healthy(guarded)


def test_component_cannot_read_the_service_files_with_fs(guarded: Server) -> None:
    source = Account(guarded).deploy("fs_reads.mjs")
    paths = [str(guarded.data_dir / "headwater.db"), str(guarded.data_dir / "secret.key"), "/etc/shadow",
             "/etc/passwd", "/proc/1/environ", "/proc/self/environ"]
    seen = source.run({"paths": paths})
    assert all(not outcome["ok"] for outcome in seen.values()), seen
    assert_healthy(guarded)
