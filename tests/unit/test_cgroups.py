"""The runner cgroups a dead service left behind (adapters/local/cgroups.py): what is still inside
is killed before the cgroups go, since a frozen runner would never die of its parent's death."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from headwater.adapters.local.cgroups import _sweep_stale


def test_a_dead_services_runners_are_killed_and_their_cgroups_removed(tmp_path: Path) -> None:
    orphan = subprocess.Popen(["sleep", "60"])
    dead_service = 2**22 + 7  # above the kernel's default pid_max: no such process
    runner = tmp_path / f"headwater-{dead_service}" / "runner-1"
    runner.mkdir(parents=True)
    (runner / "cgroup.procs").write_text(f"{orphan.pid}\n")
    try:
        _sweep_stale(tmp_path)
        assert orphan.wait(timeout=30) == -9
    finally:
        orphan.kill()


def test_a_living_services_cgroups_are_left_alone(tmp_path: Path) -> None:
    runner = tmp_path / f"headwater-{os.getpid()}" / "runner-1"
    runner.mkdir(parents=True)
    _sweep_stale(tmp_path)
    assert runner.is_dir()
