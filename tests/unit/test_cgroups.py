"""The runner cgroups a stopped service process left behind (adapters/local/cgroups.py): a start
ends and removes the subtrees its data directory's claims name when no live process holds the
claim (a frozen runner would never die of its parent's death), and leaves a live sibling's alone.
Real cgroups (v1 freezer and pids), made under a parent of the test's own."""

from __future__ import annotations

import fcntl
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.adapters.local.cgroups import MOUNT, CgroupRoot, CgroupUnavailable, end_cgroups, reclaim

CONTROLLERS = ("freezer", "pids")

pytestmark = pytest.mark.skipif(not all(os.access(MOUNT / c, os.W_OK) for c in CONTROLLERS),
                                reason="needs writable cgroup v1 freezer and pids hierarchies (root)")


@pytest.fixture
def parents() -> Iterator[list[Path]]:
    made = [MOUNT / c / f"headwater-test-{uuid.uuid4().hex[:8]}" for c in CONTROLLERS]
    for directory in made:
        directory.mkdir()
    yield made
    for directory in made:
        end_cgroups([child for child in directory.iterdir() if child.is_dir()], timeout_s=10)
        directory.rmdir()


def left_subtree(parents: list[Path], run_dir: Path, name: str) -> tuple[subprocess.Popen, list[Path], Path]:
    """A service process's subtree as it left it: a frozen runner inside, its claim in run_dir."""
    subtrees = [parent / name for parent in parents]
    runner = subprocess.Popen(["sleep", "600"])
    for subtree in subtrees:
        (subtree / "runner-1").mkdir(parents=True)
        (subtree / "runner-1" / "cgroup.procs").write_text(str(runner.pid))
    (subtrees[0] / "runner-1" / "freezer.state").write_text("FROZEN")
    claim = run_dir / f"cgroup-{name}.lock"
    claim.write_text("".join(f"{subtree}\n" for subtree in subtrees))
    return runner, subtrees, claim


def test_a_gone_processs_frozen_runners_are_ended_and_their_cgroups_removed(parents: list[Path],
                                                                            tmp_path: Path) -> None:
    runner, subtrees, claim = left_subtree(parents, tmp_path, "headwater-4242-0a0b0c0d")
    foreign = parents[0] / "headwater-99-not-named"
    foreign.mkdir()
    with claim.open("a") as f:  # a claim names only its own subtree: anything else it says is ignored
        f.write(f"{foreign}\n{MOUNT}\n")
    try:
        reclaim(tmp_path)
        assert runner.wait(timeout=30) == -9
        assert [d for d in subtrees if d.exists()] == []
        assert not claim.exists()
        assert foreign.is_dir()
    finally:
        runner.kill()


def test_a_live_siblings_subtree_is_left_alone(parents: list[Path], tmp_path: Path) -> None:
    runner, subtrees, claim = left_subtree(parents, tmp_path, "headwater-4243-0a0b0c0d")
    held = os.open(claim, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # as the sibling holds it as long as it lives
    try:
        reclaim(tmp_path)
        assert runner.poll() is None
        assert all((d / "runner-1").is_dir() for d in subtrees)
        assert claim.exists()
    finally:
        os.close(held)
        runner.kill()


def test_a_service_process_claims_its_subtree_and_removes_it_at_close(tmp_path: Path) -> None:
    try:
        root = CgroupRoot.create(tmp_path)
    except CgroupUnavailable as e:
        pytest.skip(str(e))
    claims = list(tmp_path.glob("cgroup-*.lock"))
    assert len(claims) == 1 and all(d.is_dir() for d in root.dirs.values())
    assert claims[0].read_text().split() == [str(d) for d in root.dirs.values()]
    reclaim(tmp_path)  # a sibling starting now: the claim is held
    assert all(d.is_dir() for d in root.dirs.values())
    cgroup = root.runner(memory_mb=64, max_tasks=16)
    sleeper = subprocess.Popen(["sleep", "600"], preexec_fn=cgroup.enter)
    cgroup.freeze()
    root.close()
    assert sleeper.wait(timeout=30) == -9
    assert [d for d in [*root.dirs.values(), *cgroup.dirs.values()] if d.exists()] == []
    assert list(tmp_path.glob("cgroup-*.lock")) == []


def test_a_runner_cgroups_cpu_is_read_again_on_each_call(tmp_path: Path) -> None:
    """cpu_ns keeps cpuacct.usage open and reads it at offset 0 each time (the kernel makes the text
    anew): a busy process inside moves it, and remove() lets the file go."""
    try:
        root = CgroupRoot.create(tmp_path)
    except CgroupUnavailable as e:
        pytest.skip(str(e))
    try:
        cgroup = root.runner(memory_mb=64, max_tasks=16)
        if "cpuacct" not in cgroup.dirs:
            pytest.skip("no cpuacct controller")
        first = cgroup.cpu_ns()
        busy = subprocess.run(["sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"],
                              preexec_fn=cgroup.enter, check=True)
        assert busy.returncode == 0
        second = cgroup.cpu_ns()
        assert first is not None and second is not None and second > first
        assert cgroup.cpu_ns() == second  # read again, not a stale buffer or the end of the file
        cgroup.remove()
        assert cgroup._cpu_fd is None
    finally:
        root.close()
