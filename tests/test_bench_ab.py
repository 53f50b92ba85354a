"""`bench/ab.py`: a build other than this working tree must really run its own code, or a before
and after would silently compare this tree with itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.ab import Build, checkout, scenarios, settings_of
from tests.conftest import ROOT


def test_a_checked_out_revision_runs_its_own_code_and_runner(tmp_path: Path) -> None:
    with checkout("HEAD", tmp_path) as root:
        assert root != ROOT
        env = {**os.environ, **Build("before", root, (("HEADWATER_TASK_WORKERS", "3"),)).env}
        found = subprocess.run(
            [sys.executable, "-c", "import headwater.settings as s; c = s.Settings(); "
             "print(s.__file__); print(c.runner_dir); print(c.node.is_file()); print(c.task_workers)"],
            env=env, capture_output=True, text=True, check=True, cwd=tmp_path).stdout.split()
        assert found == [str(root / "src" / "headwater" / "settings.py"), str(root / "layers" / "runner"), "True", "3"]
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert str(root) not in listed and not root.exists()


def test_this_working_tree_runs_as_it_is() -> None:
    assert Build("after", ROOT).env == {}


def test_scenarios_and_settings_are_checked() -> None:
    assert scenarios(["echo:10", "default:1"]) == [("echo", 10), ("default", 1)]
    assert settings_of(["HEADWATER_TASK_WORKERS=2"]) == [("HEADWATER_TASK_WORKERS", "2")]
    for bad in (["echo"], ["echo:x"], ["plain:1"]):
        with pytest.raises(SystemExit, match="expected default:C or echo:C"):
            scenarios(bad)
    for bad in (["TASK_WORKERS=2"], ["HEADWATER_TASK_WORKERS"]):
        with pytest.raises(SystemExit, match="expected HEADWATER_NAME=VALUE"):
            settings_of(bad)
