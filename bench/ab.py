"""Before and after: two builds of Headwater measured one server at a time, in alternating rounds.

Two Headwater servers loaded in turn while both are running are not independent. In an A/A run (the
same build twice, side by side) the second-started server's medians were 15-28% above the first's in
every scenario; a change smaller than that cannot be told from it. So each round
here starts a fresh server of one build (fresh data directory, fresh runner), measures every
scenario, stops it, and only then starts the other build; the order alternates between rounds.

    .venv/bin/python bench/ab.py BEFORE [AFTER] [--rounds 3] [--duration 4] [--scenario echo:1 ...]
    .venv/bin/python bench/ab.py . --after-env HEADWATER_TASK_WORKERS=2     # one build, two settings

BEFORE and AFTER are git revisions, or `.` for this working tree (uncommitted changes and all; the
default AFTER); each revision is checked out into a temporary worktree, with this tree's runner
packages. `--after-env` adds settings to the AFTER server only, `--env` to both (e.g.
`--env HEADWATER_PROCESSES=2`: test servers run one process unless told). Needs `make bench`'s npm peers
(autocannon).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.load import Autocannon, Shot  # noqa: E402
from bench.proc import wait_idle  # noqa: E402
from bench.targets import BODY, Headwater, autocannon  # noqa: E402

WORKTREE = "."
DEFAULT_SCENARIOS = ("default:1", "default:10", "echo:1", "echo:10")
WARMUP_S = 1.0


@dataclass(frozen=True)
class Build:
    """One side of the comparison: its name, the checkout its server runs from, and added settings."""

    name: str
    root: Path
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def env(self) -> dict[str, str]:
        """A checkout other than this one is put first on the server's import path; its runner
        folder then comes with it (settings.REPO_ROOT)."""
        path = {} if self.root == ROOT else {"PYTHONPATH": str(self.root / "src")}
        return {**path, **dict(self.settings)}


@contextmanager
def checkout(revision: str, into: Path) -> Iterator[Path]:
    """`revision` as a detached worktree with this tree's runner packages (hard links, or copies
    across filesystems: the runner's sandbox binds real directories, not symlinks out of them);
    removed afterwards."""
    if revision == WORKTREE:
        yield ROOT
        return
    path = into / revision.replace("/", "_")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), revision], check=True)
    try:
        shutil.copytree(ROOT / "layers" / "runner" / "node_modules", path / "layers" / "runner" / "node_modules",
                        symlinks=True, copy_function=_link_or_copy)
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def scenarios(given: list[str]) -> list[tuple[str, int]]:
    parsed = []
    for item in given:
        name, _, conns = item.partition(":")
        if name not in ("default", "echo") or not conns.isdigit():
            raise SystemExit(f"--scenario {item!r}: expected default:C or echo:C (C connections)")
        parsed.append((name, int(conns)))
    return parsed


def settings_of(given: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in given:
        name, equals, value = item.partition("=")
        if not equals or not name.startswith("HEADWATER_"):
            raise SystemExit(f"{item!r}: expected HEADWATER_NAME=VALUE")
        pairs.append((name, value))
    return pairs


def one_round(build: Build, work: Path, plan: list[tuple[str, int]], duration_s: float,
              cannon: Autocannon) -> dict[str, Shot]:
    """A fresh server of `build`: warmed up, each scenario measured (its queued runs drained after), stopped."""
    data_dir = Path(tempfile.mkdtemp(dir=work))
    hw = Headwater.start(data_dir, **build.env)
    try:
        target = hw.target()
        for name, conns in plan:
            cannon.run(target.urls[name], BODY, conns, WARMUP_S, target.pid)
            hw.drain()
        wait_idle(target.pid)
        shots = {}
        for name, conns in plan:
            shots[f"{name} c={conns}"] = cannon.run(target.urls[name], BODY, conns, duration_s, target.pid)
            hw.drain()
            wait_idle(target.pid)
        return shots
    finally:
        hw.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def table(results: dict[str, dict[str, list[Shot]]], names: tuple[str, str]) -> str:
    """Medians of the rounds: req/s, and the server's CPU per request (its process tree, runners
    included: what a change costs even when a busy machine hides it in the req/s)."""
    before, after = names
    lines = [f"| scenario | {before} req/s | {after} req/s | after ÷ before | CPU ms/request before; after "
             f"| rounds ({before}; {after}) |",
             "|---|---:|---:|---:|---:|---|"]
    for scenario, by_build in results.items():
        a = statistics.median(s.rps for s in by_build[before])
        b = statistics.median(s.rps for s in by_build[after])
        cpu = "; ".join(f"{statistics.median(cpu_ms(s) for s in by_build[n]):.2f}" for n in names)
        rounds = "; ".join(", ".join(f"{s.rps:,.0f}" for s in by_build[n]) for n in names)
        lines.append(f"| {scenario} | {a:,.0f} | {b:,.0f} | {b / a:.2f} | {cpu} | {rounds} |")
    return "\n".join(lines)


def cpu_ms(shot: Shot) -> float:
    """The target's CPU per answered request, in ms (its CPU in cores over the round's req/s)."""
    return shot.target_cpu / shot.rps * 1000 if shot.rps else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="git revision measured as 'before'")
    parser.add_argument("after", nargs="?", default=WORKTREE, help="git revision, or . for this working tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per scenario and round")
    parser.add_argument("--scenario", action="append", help="default:C or echo:C; repeatable")
    parser.add_argument("--after-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the AFTER server only (HEADWATER_...); repeatable")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of both servers (HEADWATER_...); repeatable")
    parser.add_argument("--out", type=Path, help="also write the rounds as JSON here")
    args = parser.parse_args()
    plan = scenarios(args.scenario or list(DEFAULT_SCENARIOS))
    both = tuple(settings_of(args.env))
    settings = both + tuple(settings_of(args.after_env))
    names = (f"before ({args.before})", f"after ({' '.join([args.after, *args.after_env])})")
    results: dict[str, dict[str, list[Shot]]] = {f"{n} c={c}": {name: [] for name in names} for n, c in plan}
    with tempfile.TemporaryDirectory() as tmp, checkout(args.before, Path(tmp)) as old, \
            checkout(args.after, Path(tmp) / "after") as new:
        builds = (Build(names[0], old, both), Build(names[1], new, settings))
        cannon = autocannon()
        try:
            for index in range(args.rounds):
                for build in builds if index % 2 == 0 else builds[::-1]:
                    for scenario, shot in one_round(build, Path(tmp), plan, args.duration, cannon).items():
                        results[scenario][build.name].append(shot)
                        print(f"round {index + 1}/{args.rounds} {build.name} {scenario}: {shot.rps:,.0f} req/s "
                              f"p50 {shot.p50_ms:.2f} ms", file=sys.stderr, flush=True)
        finally:
            cannon.close()
    print(table(results, names))
    if args.out:
        args.out.write_text(json.dumps({s: {n: [shot.as_dict() for shot in shots] for n, shots in by.items()}
                                        for s, by in results.items()}, indent=1))


if __name__ == "__main__":
    main()
