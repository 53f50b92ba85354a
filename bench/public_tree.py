"""The whole public components tree published, measured (issue 36, item 2).

Lays out the `components/` folder of a checkout of the public components repository (a git dir,
bare or not, or a directory holding `components/` or being it) in a work folder outside this
repository, optionally a sample of its app folders, and publishes it with `headwater registry
publish --json` into a fresh data dir, twice: the first time, then again unchanged. For each pass:

- wall time;
- CPU of the whole process tree, the sandboxed bundlers and runners included: the publish runs in
  a cgroup v2 of its own when the machine allows one (`cpu.stat`, which counts exited processes);
  otherwise this process is made a child subreaper and the CPU of every reaped descendant is
  read from `getrusage(RUSAGE_CHILDREN)`; `/proc` is sampled too (a lower bound, for comparison);
- peak RSS summed over the tree, sampled from `/proc` every `--interval` s;
- the data dir's disk use by part (bundles, npm store, npm cache, database, anything else);
- counts by outcome, and failures by class.

    .venv/bin/python bench/public_tree.py /work/.mirror/js07+pipedream/repo --sample 150 --seed 1

Progress goes to stderr every `--progress` s. Each pass's figures are written to `--out`
(`pass-first.json`, `pass-again.json`) as soon as it ends, and its running figures to
`pass-<name>.partial.json`: run again with the same `--out` and a pass already done is not run
again, and an interrupted first pass is run again into the same data dir (the publish cache makes
it go on where it stopped; the figures then add the interrupted attempt's). `--keep` keeps the
data dir (and the laid-out tree) for what comes next (trying every component).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import random
import re
import resource
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.proc import CLK_TCK  # noqa: E402

UNIFIED = Path("/sys/fs/cgroup/unified")  # cgroup v2 beside v1 controllers (hybrid), else the v2 mount
CGROUP2 = UNIFIED if (UNIFIED / "cgroup.procs").exists() else Path("/sys/fs/cgroup")
PR_SET_CHILD_SUBREAPER = 36

# Failure classes (issue 36's): the first that matches a failure's reason names it.
_CLASSES = [
    ("native addon", r"native addon|\.node\b.*(?:addon|binary)|NATIVE_ADDON"),
    ("top-level await", r"top-level await"),
    ("process.binding", r"process\.binding"),
    ("refused by the permission model", r"Access to this API has been restricted"),
    ("out of memory", r"out of memory|heap limit|memory limit|ERR_WORKER_OUT_OF_MEMORY|killed"),
    ("needs an executable", r"NEEDS_EXECUTABLE|executable|ffmpeg"),
    ("props shorthand", r"prop\b.*(?:must be an object|type shorthand)|props?\.[\w$]+ must"),
    ("package not on npm", r"E404|No matching version|ETARGET|not in this registry"),
    ("npm unreached", r"ETIMEDOUT|ECONNRESET|ECONNREFUSED|EAI_AGAIN|npm exited"),
    ("file missing", r"Could not resolve \"\.|cannot find module '\.|ENOENT"),
    ("no run", r"\brun\b.*(?:missing|must be|no )|has no `?run"),
    ("timeout", r"took longer|timed out|timeout"),
]
FAILURE_CLASSES = tuple((name, re.compile(pattern, re.I)) for name, pattern in _CLASSES)


def failure_class(reason: str | None) -> str:
    text = reason or ""
    return next((name for name, pattern in FAILURE_CLASSES if pattern.search(text)), "other")


def outcome_counts(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts by outcome, failures by class (and how many of them were remembered, not tried)."""
    counts: dict[str, Any] = {s: 0 for s in ("published", "unchanged", "skipped", "helper", "failed")}
    classes: dict[str, int] = {}
    for r in results:
        counts[r.get("status", "?")] = counts.get(r.get("status", "?"), 0) + 1
        if r.get("status") == "failed":
            name = failure_class(r.get("reason"))
            classes[name] = classes.get(name, 0) + 1
    counts["remembered"] = sum(1 for r in results if r.get("remembered"))
    counts["failed_by_class"] = dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0])))
    return counts


# --- the tree ---------------------------------------------------------------------------------

def components_dir(source: Path, into: Path) -> Path:
    """The `components/` folder of `source`: a git dir (bare or a work tree's `.git`) is archived
    into `into`; a directory is used as it is (it holds `components/`, or is it)."""
    if (source / "HEAD").is_file() and (source / "objects").is_dir():
        into.mkdir(parents=True, exist_ok=True)
        if not (into / "components").is_dir():
            command = ["git", "--git-dir", str(source), "archive", "--format=tar", "HEAD", "components"]
            archive = subprocess.Popen(command, stdout=subprocess.PIPE)
            assert archive.stdout is not None
            with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
                tar.extractall(into, filter="data")
            archive.wait()
        return into / "components"
    return source / "components" if (source / "components").is_dir() else source


def app_folders(components: Path) -> list[str]:
    return sorted(p.name for p in components.iterdir() if p.is_dir() and not p.name.startswith("."))


def choose(apps: list[str], first: int | None, sample: int | None, seed: int) -> list[str]:
    """All app folders, the first N, or N of them drawn with `seed` (sorted either way)."""
    if first is not None:
        return apps[:first]
    if sample is not None:
        return sorted(random.Random(seed).sample(apps, min(sample, len(apps))))
    return apps


def lay_out(components: Path, chosen: list[str], tree: Path) -> Path:
    """The chosen app folders copied under `tree` (the whole folder itself when all are chosen)."""
    if len(chosen) == len(app_folders(components)):
        return components
    if tree.is_dir() and sorted(p.name for p in tree.iterdir()) == chosen:
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    for app in chosen:
        shutil.copytree(components / app, tree / app, symlinks=True)
    return tree


# --- measuring --------------------------------------------------------------------------------

def disk_bytes(path: Path, seen: set[tuple[int, int]] | None = None) -> int:
    """Bytes on disk under `path` (allocated blocks, hard links once), as `du` counts them."""
    seen = set() if seen is None else seen
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames + dirnames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


DISK_PARTS = {"bundles": "bundles", "npm-store": "npm store", "npm-cache": "npm cache"}


def disk_by_part(data_dir: Path) -> dict[str, int]:
    """The data dir's bytes on disk: bundles, npm store, npm cache, database, and each other
    top-level entry by its name (a package store, records...); `total` of all."""
    parts: dict[str, int] = {"bundles": 0, "npm store": 0, "npm cache": 0, "database": 0}
    seen: set[tuple[int, int]] = set()
    if not data_dir.is_dir():
        return {**parts, "total": 0}
    for entry in sorted(data_dir.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            name = DISK_PARTS.get(entry.name, entry.name)
            size = disk_bytes(entry, seen)
        else:
            name = "database" if re.search(r"\.(db|sqlite\d?)(-wal|-shm|-journal)?$", entry.name) else "other files"
            st = entry.lstat()
            size = st.st_blocks * 512
        parts[name] = parts.get(name, 0) + size
    return {**parts, "total": sum(parts.values())}


def _proc_stat(pid: int) -> tuple[int, float, int] | None:
    """(parent pid, CPU s, RSS bytes) of a process, None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK, int(fields[21]) * PAGE


PAGE = os.sysconf("SC_PAGE_SIZE")


def descendants(root: int, parents: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


@dataclass
class Sampler:
    """Samples the process tree under `root` (and, with a subreaper, orphans re-parented to this
    process): peak RSS summed, and the CPU of each process at its last sample (a lower bound)."""

    root: int
    members: set[int] = field(default_factory=set)
    cpu_seen: dict[int, float] = field(default_factory=dict)
    kinds: dict[int, str] = field(default_factory=dict)
    peak_rss: int = 0
    rss_now: int = 0
    processes_now: int = 0

    def sample(self) -> None:
        stats: dict[int, tuple[int, float, int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (stat := _proc_stat(int(entry))) is not None:
                stats[int(entry)] = stat
        parents = {pid: s[0] for pid, s in stats.items()}
        me = os.getpid()
        # descendants of root, and of this process (orphans re-parented here), this process excepted
        tree = (descendants(self.root, parents) | descendants(me, parents)) - {me}
        self.members |= tree
        self.rss_now = sum(stats[p][2] for p in tree)
        self.processes_now = len(tree)
        self.peak_rss = max(self.peak_rss, self.rss_now)
        for pid in tree:
            self.cpu_seen[pid] = max(self.cpu_seen.get(pid, 0.0), stats[pid][1])
            if self.kinds.get(pid, "other").startswith(_UNSETTLED):  # a fork is its parent until it execs
                kind = process_kind(pid)
                if pid not in self.kinds or not kind.startswith("exited"):  # exited: it was what it was
                    self.kinds[pid] = kind

    @property
    def cpu_sampled_s(self) -> float:
        return sum(self.cpu_seen.values())

    def cpu_by_kind(self) -> dict[str, float]:
        """Sampled CPU-s by what the processes were (a lower bound each: see `process_kind`)."""
        kinds: dict[str, float] = {}
        for pid, cpu in self.cpu_seen.items():
            kind = self.kinds.get(pid, "other")
            kinds[kind] = round(kinds.get(kind, 0.0) + cpu, 1)
        return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))


# What a process of a publish is, by its command line: the first pattern that matches.
_KINDS = [("bundler (node)", re.compile(r"/bundle\.mjs\b")), ("esbuild", re.compile(r"esbuild")),
          ("npm", re.compile(r"npm-cli\.js|(?:^|/)npm\b")),
          ("runner (describe)", re.compile(r"/(stdio|main|runner)\.mjs\b")),
          ("headwater (python)", re.compile(r"python")), ("bwrap", re.compile(r"bwrap"))]

_UNSETTLED = ("headwater (python)", "bwrap", "other")


def process_kind(pid: int) -> str:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        if not args.strip():  # a zombie (exited before it was seen): its name is all that is left
            return f"exited: {Path(f'/proc/{pid}/comm').read_text().strip()}"
    except OSError:
        return "other"
    return next((kind for kind, pattern in _KINDS if pattern.search(args)), f"other: {Path(args.split(' ')[0]).name}")


class CpuMeter:
    """CPU of everything the publish started: its cgroup v2's `cpu.stat` when one can be made,
    else the rusage of reaped children (this process a child subreaper)."""

    def __init__(self) -> None:
        self.cgroup: Path | None = None
        try:
            path = CGROUP2 / f"hw-bench-{os.getpid()}-{secrets.token_hex(3)}"
            path.mkdir()
            if (path / "cpu.stat").is_file():
                self.cgroup = path
            else:
                path.rmdir()
        except OSError:
            self.cgroup = None
        if self.cgroup is None:
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.source = "cgroup v2 cpu.stat" if self.cgroup else "rusage of reaped children (subreaper)"
        self._start = self._rusage()

    @staticmethod
    def _rusage() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def enter(self) -> None:
        """In the child, before exec: into the cgroup."""
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))

    def cpu_s(self) -> float:
        if self.cgroup is not None:
            for line in (self.cgroup / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
        return self._rusage() - self._start

    def reap_orphans(self) -> None:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass

    def close(self) -> None:
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                self.cgroup.rmdir()


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine_busy_s() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / CLK_TCK


@dataclass
class PassResult:
    name: str
    wall_s: float
    cpu_s: float
    cpu_source: str
    cpu_sampled_s: float
    cpu_sampled_by_kind: dict[str, float]
    peak_rss_bytes: int
    processes: int
    disk: dict[str, int]
    counts: dict[str, Any]
    load_before: list[float]
    load_after: list[float]
    machine_busy_s: float  # every core's busy CPU-s during the pass, this one's included
    exit_code: int
    attempts: int = 1
    stderr_tail: str = ""


def publish_pass(name: str, tree: Path, data_dir: Path, out: Path, env: dict[str, str],
                 interval: float, progress: float, extra: list[str]) -> PassResult:
    """One `headwater registry publish --json`, measured (see the module's docstring)."""
    partial_file = out / f"pass-{name}.partial.json"
    earlier = json.loads(partial_file.read_text()) if partial_file.is_file() else None
    meter = CpuMeter()
    load_before, busy_before = load_average(), machine_busy_s()
    command = [sys.executable, "-m", "headwater.cli", "registry", "publish", str(tree), "--data-dir", str(data_dir),
               "--json", *extra]
    started = time.monotonic()
    stdout_file = out / f"pass-{name}.stdout.json"
    with open(stdout_file, "w") as stdout, tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env, preexec_fn=meter.enter, cwd=ROOT)
        sampler = Sampler(proc.pid)
        last_progress = started
        try:
            while proc.poll() is None:
                sampler.sample()
                meter.reap_orphans()
                now = time.monotonic()
                if now - last_progress >= progress:
                    last_progress = now
                    figures = {"wall_s": round(now - started, 1), "cpu_s": round(meter.cpu_s(), 1),
                               "peak_rss_bytes": sampler.peak_rss, "bundles": _count(data_dir / "bundles", ".cjs")}
                    partial_file.with_suffix(".tmp").write_text(json.dumps({**figures, "earlier": earlier}))
                    partial_file.with_suffix(".tmp").replace(partial_file)
                    print(f"[{name}] {figures['wall_s']:.0f} s, {figures['cpu_s']:.0f} CPU-s, "
                          f"{sampler.rss_now / 2**20:.0f} MiB now in {sampler.processes_now} processes "
                          f"(peak {sampler.peak_rss / 2**20:.0f}), {figures['bundles']} bundles, load {load_average()}",
                          file=sys.stderr, flush=True)
                time.sleep(interval)
        except BaseException:
            proc.kill()
            raise
        finally:
            wall = time.monotonic() - started
            meter.reap_orphans()
            cpu = meter.cpu_s()
            meter.close()
        stderr.seek(0)
        tail = stderr.read()[-2000:]
    try:
        results = json.loads(stdout_file.read_text()).get("results", [])
    except ValueError:
        results = []
    result = PassResult(name, wall, cpu, meter.source, sampler.cpu_sampled_s, sampler.cpu_by_kind(), sampler.peak_rss,
                        len(sampler.members),
                        disk_by_part(data_dir), outcome_counts(results), load_before, load_average(),
                        machine_busy_s() - busy_before, proc.returncode,
                        stderr_tail=tail if proc.returncode not in (0, 1) or not results else "")
    if earlier:  # an interrupted attempt went before: its work counts too
        result.wall_s += earlier.get("wall_s", 0)
        result.cpu_s += earlier.get("cpu_s", 0)
        result.peak_rss_bytes = max(result.peak_rss_bytes, earlier.get("peak_rss_bytes", 0))
        result.attempts += 1 + (earlier.get("earlier") or {}).get("attempts", 0)
    (out / f"pass-{name}.json").write_text(json.dumps(asdict(result), indent=1))
    partial_file.unlink(missing_ok=True)
    return result


def _count(folder: Path, suffix: str) -> int:
    try:
        return sum(1 for p in folder.iterdir() if p.name.endswith(suffix))
    except OSError:
        return 0


# --- report -----------------------------------------------------------------------------------

def per_folder(result: dict[str, Any], folders: int, total_folders: int) -> dict[str, float]:
    """CPU-s and wall s per app folder, and both extrapolated to `total_folders` (linearly: an
    extrapolation, not a measurement)."""
    cpu, wall = result["cpu_s"] / max(1, folders), result["wall_s"] / max(1, folders)
    return {"cpu_s_per_folder": round(cpu, 3), "wall_s_per_folder": round(wall, 3),
            "extrapolated_cpu_s": round(cpu * total_folders), "extrapolated_wall_s": round(wall * total_folders)}


def table(passes: list[dict[str, Any]], folders: int, total_folders: int) -> str:
    mib = lambda b: f"{b / 2**20:,.0f} MiB"  # noqa: E731
    rows = [("", *[p["name"] for p in passes])]
    rows.append(("wall", *[f"{p['wall_s']:,.1f} s" for p in passes]))
    rows.append(("CPU (tree)", *[f"{p['cpu_s']:,.1f} s" for p in passes]))
    rows.append(("CPU sampled from /proc", *[f"{p['cpu_sampled_s']:,.1f} s" for p in passes]))
    for kind in sorted({k for p in passes for k in p.get("cpu_sampled_by_kind", {})}):
        rows.append((f"  of it: {kind}", *[f"{p.get('cpu_sampled_by_kind', {}).get(kind, 0):,.1f} s" for p in passes]))
    rows.append(("peak RSS summed", *[mib(p["peak_rss_bytes"]) for p in passes]))
    for part in passes[-1]["disk"]:
        rows.append((f"disk: {part}", *[mib(p["disk"].get(part, 0)) for p in passes]))
    for status in ("published", "unchanged", "skipped", "helper", "failed", "remembered"):
        rows.append((status, *[str(p["counts"].get(status, 0)) for p in passes]))
    classes = sorted({c for p in passes for c in p["counts"]["failed_by_class"]})
    for c in classes:
        rows.append((f"  failed: {c}", *[str(p["counts"]["failed_by_class"].get(c, 0)) for p in passes]))
    rows.append(("load average before/after", *[f"{p['load_before'][0]}/{p['load_after'][0]}" for p in passes]))
    if folders != total_folders:
        for p in passes:
            x = per_folder(p, folders, total_folders)
            rows.append((f"{p['name']}: per app folder", f"{x['cpu_s_per_folder']} CPU-s",
                         f"extrapolated to {total_folders}: {x['extrapolated_cpu_s']:,} CPU-s"))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{r[0]:<{width}}  " + "  ".join(f"{c:>22}" for c in r[1:]) for r in rows)


@contextlib.contextmanager
def headwater_env(revision: str | None, work: Path, settings: list[str]) -> Iterator[dict[str, str]]:
    """The environment a publish runs in: this tree's code, or `revision`'s (bench/ab.py), with
    no HEADWATER_ setting but the `--setting`s given."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
    for setting in settings:
        key, _, value = setting.partition("=")
        if not key.startswith("HEADWATER_") or not _:
            raise SystemExit(f"--setting {setting}: expected HEADWATER_NAME=VALUE")
        base[key] = value
    if revision is None:
        yield base
        return
    from bench.ab import Build, checkout

    with checkout(revision, work) as root:
        yield {**base, **Build(revision, root).env}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a git dir of the components repository, or a directory")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--apps", type=int, help="the first N app folders")
    group.add_argument("--sample", type=int, help="N app folders drawn at random (with --seed)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="work folder: tree, data dir, figures (default: a new temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the data dir and the laid-out tree")
    parser.add_argument("--revision", help="publish with this git revision's code (default: this working tree)")
    parser.add_argument("--setting", action="append", default=[], help="HEADWATER_NAME=VALUE for the publish")
    parser.add_argument("--no-again", action="store_true", help="skip publishing again unchanged")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between /proc samples")
    parser.add_argument("--progress", type=float, default=30.0, help="seconds between progress lines")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    out = (args.out or Path(tempfile.mkdtemp(prefix="hw-public-tree-"))).resolve()
    if ROOT in out.parents or out == ROOT:
        raise SystemExit("--out must be outside this repository (the tree's code is not ours to commit)")
    out.mkdir(parents=True, exist_ok=True)
    components = components_dir(args.source.resolve(), out / "src")
    apps = app_folders(components)
    chosen = choose(apps, args.apps, args.sample, args.seed)
    tree = lay_out(components, chosen, out / "tree")
    data_dir = out / "data"
    print(f"{len(chosen)} of {len(apps)} app folders in {tree}; data dir {data_dir}; figures in {out}; "
          f"load {load_average()}", file=sys.stderr, flush=True)
    passes: list[dict[str, Any]] = []
    with headwater_env(args.revision, out, args.setting) as env:
        for name in ("first", *(() if args.no_again else ("again",))):
            done = out / f"pass-{name}.json"
            if done.is_file():
                passes.append(json.loads(done.read_text()))
                print(f"[{name}] done before: {done}", file=sys.stderr)
                continue
            passes.append(asdict(publish_pass(name, tree, data_dir, out, env, args.interval, args.progress, [])))
    summary = {"source": str(args.source), "app_folders": len(chosen), "of_app_folders": len(apps),
               "sample": {"apps": args.apps, "sample": args.sample, "seed": args.seed},
               "revision": args.revision or "working tree", "settings": args.setting, "passes": passes,
               "per_folder": {p["name"]: per_folder(p, len(chosen), len(apps)) for p in passes}}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1) if args.json else table(passes, len(chosen), len(apps)))
    if not args.keep:
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(out / "tree", ignore_errors=True)
        shutil.rmtree(out / "src", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
