"""`bench/public_tree.py`'s own logic on a tiny tree of ours (3 app folders): laying out from a
git dir or a folder, sampling, the data dir's disk by part, outcome counts and failure classes.
No publish runs here (the full tree is the lead's run)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bench.public_tree import (
    Sampler,
    app_folders,
    choose,
    components_dir,
    disk_by_part,
    failure_class,
    lay_out,
    outcome_counts,
    per_folder,
)

COMPONENT = "export default { key: '{app}-new-thing', type: 'source', props: {}, async run() {} }\n"


def _tree(root: Path) -> Path:
    for app in ("alpha", "beta", "gamma"):
        folder = root / "components" / app / "sources" / "new-thing"
        folder.mkdir(parents=True)
        (folder / "new-thing.mjs").write_text(COMPONENT.replace("{app}", app))
        (root / "components" / app / "common").mkdir()
        (root / "components" / app / "common" / "utils.mjs").write_text("export const x = 1\n")
    return root


def test_a_git_dir_is_archived_and_a_sample_is_copied(tmp_path: Path) -> None:
    work = _tree(tmp_path / "checkout")
    (work / "README.md").write_text("not a component\n")
    git = ["git", "-C", str(work), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)

    components = components_dir(bare, tmp_path / "out" / "src")
    assert components == tmp_path / "out" / "src" / "components"
    assert app_folders(components) == ["alpha", "beta", "gamma"]
    assert not (tmp_path / "out" / "src" / "README.md").exists()  # only components/

    chosen = choose(app_folders(components), None, 2, seed=7)
    assert chosen == choose(app_folders(components), None, 2, seed=7) and len(chosen) == 2  # seeded
    assert choose(app_folders(components), 1, None, 0) == ["alpha"]
    tree = lay_out(components, chosen, tmp_path / "out" / "tree")
    assert sorted(p.name for p in tree.iterdir()) == chosen
    assert (tree / chosen[0] / "common" / "utils.mjs").is_file()
    # every folder chosen: the archived folder itself, no copy
    assert lay_out(components, app_folders(components), tmp_path / "out" / "all") == components
    # a plain directory holding components/ is used as it is
    assert components_dir(work, tmp_path / "unused") == work / "components"


def test_disk_is_split_by_part_and_hard_links_count_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for part, size in (("bundles", 40_000), ("npm-store", 80_000), ("npm-cache", 12_000), ("pkg-store", 8_000)):
        (data / part).mkdir(parents=True)
        (data / part / "f").write_bytes(b"x" * size)
    os.link(data / "npm-store" / "f", data / "npm-store" / "g")
    (data / "headwater.db").write_bytes(b"x" * 20_000)
    (data / "headwater.db-wal").write_bytes(b"x" * 4_000)
    (data / "registry-publish.json").write_text("{}")
    parts = disk_by_part(data)
    assert parts["bundles"] >= 40_000 and parts["npm store"] >= 80_000 and parts["npm cache"] >= 12_000
    assert parts["npm store"] < 2 * 80_000  # the hard link is not counted twice
    assert parts["database"] >= 24_000 and parts["pkg-store"] >= 8_000
    assert parts["total"] == sum(v for k, v in parts.items() if k != "total")
    assert disk_by_part(tmp_path / "none")["total"] == 0


def test_outcomes_are_counted_and_failures_classed() -> None:
    results = [
        {"status": "published"}, {"status": "published"}, {"status": "helper"},
        {"status": "unchanged"}, {"status": "skipped"},
        {"status": "failed", "reason": "Top-level await is currently not supported with the \"cjs\" output format",
         "remembered": True},
        {"status": "failed", "reason": "The runner ran out of memory (ERR_WORKER_OUT_OF_MEMORY)"},
        {"status": "failed", "reason": "process.binding is not supported"},
        {"status": "failed", "reason": "something new"},
    ]
    counts = outcome_counts(results)
    by_status = [counts[s] for s in ("published", "helper", "unchanged", "skipped", "failed")]
    assert by_status == [2, 1, 1, 1, 4]
    assert counts["remembered"] == 1
    assert counts["failed_by_class"] == {"other": 1, "out of memory": 1, "process.binding": 1, "top-level await": 1}
    assert failure_class("npm error E404 Not Found - GET https://registry.npmjs.org/x") == "package not on npm"
    assert failure_class(None) == "other"


def test_per_folder_figures_extrapolate_linearly() -> None:
    figures = per_folder({"cpu_s": 300.0, "wall_s": 150.0}, 150, 2116)
    assert figures == {"cpu_s_per_folder": 2.0, "wall_s_per_folder": 1.0,
                       "extrapolated_cpu_s": 4232, "extrapolated_wall_s": 2116}


def test_the_sampler_sums_a_tree_and_keeps_what_exited(tmp_path: Path) -> None:
    # a shell whose child sleeps: both are the tree; the child's CPU stays counted once it is gone
    proc = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        sampler = Sampler(proc.pid)
        for _ in range(200):
            sampler.sample()
            if sampler.processes_now >= 2:
                break
        assert sampler.processes_now >= 2 and sampler.peak_rss > 0
        assert proc.pid in sampler.members
    finally:
        proc.kill()
        proc.wait()
