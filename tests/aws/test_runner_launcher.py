"""The AWS runner child's seccomp launcher (layers/runner/launcher/launcher.c): a C program run
under it can make Unix sockets and no other, and has no io_uring and no ptrace; run without it,
the same program can (so the checks can fail). And the runner's own process, made non-dumpable
(undumpable.c), keeps its /proc from that child."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ended

LAUNCHER = Path(__file__).resolve().parents[2] / "layers" / "runner" / "launcher" / "launcher"

PROBE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
static void report(const char *what, long r) { printf("%s %s\n", what, r < 0 ? strerrorname_np(errno) : "ok"); }
int main(void) {
  int pair[2];
  struct { unsigned char bytes[120]; } params = {0};
  report("inet", socket(AF_INET, SOCK_STREAM, 0));
  report("inet6", socket(AF_INET6, SOCK_STREAM, 0));
  report("udp", socket(AF_INET, SOCK_DGRAM, 0));
  report("netlink", socket(AF_NETLINK, SOCK_RAW, 0));
  report("inet-high-bits", syscall(SYS_socket, 0x100000000L | AF_INET, SOCK_STREAM, 0));
  report("inet-pair", socketpair(AF_INET, SOCK_STREAM, 0, pair));
  report("unix", socket(AF_UNIX, SOCK_STREAM, 0));
  report("unix-pair", socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
  report("io_uring", syscall(SYS_io_uring_setup, 1, &params));
  report("ptrace", ptrace(PTRACE_TRACEME, 0, 0, 0));
  report("setpgid", setpgid(0, getpgid(0)));  /* a no-op where it is allowed */
  report("setsid", setsid());
  return 0;
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert LAUNCHER.is_file(), "the launcher is missing: `make setup` builds it"
    tmp = tmp_path_factory.mktemp("probe")
    (tmp / "probe.c").write_text(PROBE)
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-o", str(tmp / "probe"), str(tmp / "probe.c")],
                   check=True, timeout=120)
    return tmp / "probe"


def results(*argv: str) -> dict[str, str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split() for line in proc.stdout.splitlines())


def test_under_the_launcher_only_unix_sockets_can_be_made(probe: Path) -> None:
    assert results(str(LAUNCHER), str(probe)) == {
        "inet": "EACCES", "inet6": "EACCES", "udp": "EACCES", "netlink": "EACCES", "inet-high-bits": "EACCES",
        "inet-pair": "EACCES", "unix": "ok", "unix-pair": "ok", "io_uring": "ENOSYS", "ptrace": "EPERM",
        "setpgid": "EPERM", "setsid": "EPERM"}


def test_without_the_launcher_the_probe_makes_network_sockets(probe: Path) -> None:
    seen = results(str(probe))
    assert seen["inet"] == seen["inet6"] == seen["udp"] == seen["inet-high-bits"] == "ok", seen
    assert seen["io_uring"] != "ENOSYS" and seen["ptrace"] != "EPERM", seen
    assert seen["setpgid"] == seen["setsid"] == "ok", seen


def test_the_launcher_says_why_it_cannot_exec() -> None:
    proc = subprocess.run([str(LAUNCHER), "/nonexistent"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 127 and "exec /nonexistent" in proc.stderr


PARENT_PROBE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
  char path[64], buf[8192];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
  int fd = open(path, O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
  printf("environ %s\n", n < 0 ? strerrorname_np(errno) : memmem(buf, n, "HW_SECRET=", 10) ? "read" : "empty");
  snprintf(path, sizeof path, "/proc/%d/mem", (int)getppid());
  fd = open(path, O_RDONLY);
  printf("mem %s\n", fd < 0 ? strerrorname_np(errno) : "opened");
  return 0;
}
"""
PARENT = """import { spawnSync } from 'node:child_process'
const [launcher, probe, module] = process.argv.slice(2)
if (module) process.dlopen({ exports: {} }, module)
const probed = spawnSync(launcher, [probe], { env: {}, encoding: 'utf8' })
process.stdout.write(probed.stdout + probed.stderr)
"""


def test_the_runner_made_undumpable_keeps_its_proc_from_its_child(tmp_path: Path) -> None:
    """lambda.mjs loads undumpable.node: its child, component code as the same (unprivileged)
    user, can read neither its environment nor its memory through /proc; without it, it can."""
    from headwater.settings import Settings

    module = LAUNCHER.parent / "undumpable.node"
    assert module.is_file(), "undumpable.node is missing: `make setup` builds it"
    shared = Path(tempfile.mkdtemp(prefix="undumpable-"))  # readable by the unprivileged user below
    try:
        shared.chmod(0o755)
        (shared / "probe.c").write_text(PARENT_PROBE)
        subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-o", str(shared / "probe"), str(shared / "probe.c")],
                       check=True, timeout=120)
        (shared / "parent.mjs").write_text(PARENT)
        (shared / "parent.mjs").chmod(0o644)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []

        def probed(*load: str) -> dict[str, str]:
            proc = subprocess.run([*as_nobody, str(Settings().node), str(shared / "parent.mjs"), str(LAUNCHER),
                                   str(shared / "probe"), *load], env={"HW_SECRET": "s3cret", "PATH": "/usr/bin:/bin"},
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            return dict(line.split() for line in proc.stdout.splitlines())

        assert probed() == {"environ": "read", "mem": "opened"}  # a same-user child, the parent dumpable
        assert probed(str(module)) == {"environ": "EACCES", "mem": "EACCES"}
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# ---- the child as a process group (layers/runner/src/group.mjs) ------------------------------------

GROUP = LAUNCHER.parents[1] / "src" / "group.mjs"
# lambda.mjs's launch of its child, with a stand-in child under the launcher that forks a grandchild
# (component code cannot fork: Node's permission model lets it start no process; this is what code
# that got past it could do). `pid`: the child is killed by its pid alone, as before group.mjs.
STAND_IN = """import fs from 'node:fs'
const { spawnGroup, signalGroup, groupStates, stopped, members } = await import(process.env.GROUP_MJS)
const [launcher, mode] = process.argv.slice(2)
const proc = spawnGroup(launcher, ['/bin/sh', '-c', 'sleep 1000 & echo $!; wait'],
  { stdio: ['ignore', 'pipe', 'ignore'] })
const grandchild = await new Promise((r) => proc.stdout.once('data', (d) => r(Number(String(d).trim()))))
const state = (pid) => {
  try { const s = fs.readFileSync(`/proc/${pid}/stat`, 'latin1'); return s[s.lastIndexOf(')') + 2] } catch { return '' }
}
const out = { child: proc.pid, grandchild, members: members(proc.pid).sort((a, b) => a - b) }
if (mode === 'pid') proc.kill('SIGKILL')
else {
  signalGroup(proc, 'SIGSTOP') // lambda.mjs's pause
  while (!stopped(groupStates(proc.pid))) await new Promise((r) => setTimeout(r, 1))
  out.stopped = state(grandchild)
  signalGroup(proc, 'SIGKILL') // lambda.mjs's kill
}
await new Promise((r) => proc.once('exit', r))
console.log(JSON.stringify(out))
process.exit(0)
"""


def stand_in(tmp_path: Path, mode: str) -> dict[str, object]:
    from headwater.settings import Settings

    (tmp_path / "stand_in.mjs").write_text(STAND_IN)
    proc = subprocess.run([str(Settings().node), str(tmp_path / "stand_in.mjs"), str(LAUNCHER), mode],
                          env={"PATH": "/usr/bin:/bin", "GROUP_MJS": str(GROUP)}, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_what_the_child_forks_is_stopped_and_killed_with_it(tmp_path: Path) -> None:
    """The child leads a process group of its own, which the stop between invocations and the kill
    reach: its grandchild is stopped with it, and dead once it is killed (under the launcher, it
    cannot leave the group: setsid and setpgid fail, above)."""
    out = stand_in(tmp_path, "group")
    grandchild = int(str(out["grandchild"]))
    assert out["members"] == sorted([out["child"], grandchild]), out
    assert out["stopped"] == "T", out
    assert ended(grandchild), f"the grandchild {grandchild} outlived its group's kill"


def test_killed_by_its_pid_alone_the_child_leaves_its_grandchild_running(tmp_path: Path) -> None:
    """What the group is for: the child's own kill (lambda.mjs before group.mjs) leaves what it forked."""
    out = stand_in(tmp_path, "pid")
    grandchild = int(str(out["grandchild"]))
    try:
        stat = Path(f"/proc/{grandchild}/stat").read_text()
        assert stat[stat.rindex(")") + 2] in "RSD", stat  # alive, running on
    finally:
        os.kill(grandchild, 9)
