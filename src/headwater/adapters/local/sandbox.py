"""Bubblewrap command lines for the processes that handle users' code (docs/security.md).

Node's permission model is not a security boundary (Node's own documentation says so), so the
operating system is: every runner process and every bundler run is started inside `bwrap` with
new user, pid, mount, IPC, UTS and cgroup namespaces, no capabilities, and a root filesystem that
holds only what the process needs:

- a runner sees the system's libraries, the runner code (read-only, at /runner), the shared
  package store (read-only, at /packages), a private tmpfs /tmp, its own egress directory
  (/run/egress, the only way out: it has no network interface but lo) and nothing else; its pid
  namespace hides the service and every other process;
- the bundler sees the same libraries and runner code, npm's settings and CA certificates, an
  egress directory of its own (it has no network interface but lo either: npm reaches the
  registry through the service's egress proxy, which allows that one host), and read-write only
  the npm store, the shared package store, the npm cache and its output dir.

Sandboxes run as uid 65534 inside their user namespace, cannot make further user namespaces, and
die with the service. Paths inside never name the host's checkout or data directory.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from headwater.settings import Settings

log = logging.getLogger("headwater.sandbox")

RUNNER = "/runner"  # the runner code inside a sandbox
EGRESS = "/run/egress"  # the runner's egress directory inside its sandbox
TMP = "/tmp"
_UID = "65534"  # nobody
# What dynamically linked programs (node, esbuild) need from /etc.
_SYSTEM_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
# What npm needs to speak to the registry (CA certificates, npm's own settings); no name
# resolution: the egress proxy resolves.
_NPM_ETC = ("/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/npmrc")
_PROBE_TIMEOUT_S = 20


class SandboxUnavailable(SystemExit):
    """No working bubblewrap here: the service must not run users' code, so it does not start.
    A SystemExit, so that nothing on the way up swallows it and the process ends with the
    message (no traceback) and status 1."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"headwater: refusing to start: {reason}")


@dataclass(frozen=True)
class Bind:
    host: Path
    inside: str
    writable: bool = False

    def args(self) -> list[str]:
        return ["--bind" if self.writable else "--ro-bind", str(self.host), self.inside]


def _system_mounts() -> list[str]:
    """/usr read-only, the merged-/usr links (or the real directories on older layouts), ld.so's
    files, and fresh /proc (of the new pid namespace) and /dev (null, zero, random, ...)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in _SYSTEM_ETC:
        args += ["--ro-bind-try", path, path]
    return [*args, "--proc", "/proc", "--dev", "/dev"]


def _isolation() -> list[str]:
    return [
        "--unshare-all",
        "--unshare-user", "--uid", _UID, "--gid", _UID, "--disable-userns",
        "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", "sandbox",
    ]


@dataclass(frozen=True)
class Sandbox:
    bwrap: str

    def runner(self, runner_dir: Path, egress_dir: Path, tmp_bytes: int, node_args: Sequence[str],
               env: dict[str, str], extra: Iterable[Bind] = ()) -> list[str]:
        """A runner process: `node_args` run inside with /runner, /tmp and /run/egress."""
        return [
            self.bwrap, *_isolation(), *_system_mounts(),
            *Bind(runner_dir, RUNNER).args(),
            "--size", str(tmp_bytes), "--tmpfs", TMP,
            *Bind(egress_dir, EGRESS).args(),
            *[a for bind in extra for a in bind.args()],
            "--clearenv", *[a for k, v in env.items() for a in ("--setenv", k, v)],
            "--chdir", TMP, "--", *node_args,
        ]

    def bundler(self, runner_dir: Path, binds: Iterable[Bind], env: dict[str, str],
                command: Sequence[str]) -> list[str]:
        """A bundler run: no network but lo (npm goes out through an egress directory, one of
        `binds`), the given directories bound, nothing else."""
        etc = [a for path in _NPM_ETC for a in ("--ro-bind-try", path, path)]
        return [
            self.bwrap, *_isolation(), *_system_mounts(), *etc,
            *Bind(runner_dir, RUNNER).args(), "--tmpfs", TMP,
            *[a for bind in binds for a in bind.args()],
            "--clearenv", *[a for k, v in env.items() for a in ("--setenv", k, v)],
            "--chdir", TMP, "--", *command,
        ]


def sandbox_for(settings: Settings) -> Sandbox | None:
    """The sandbox users' code runs in, or None when the operator turned it off
    (HEADWATER_UNSAFE_NO_SANDBOX=1, said loudly). Raises SandboxUnavailable otherwise, so that a
    service without one refuses to start."""
    if settings.unsafe_no_sandbox:
        _warn_unsafe()
        return None
    try:
        return find_sandbox(settings.runner_dir, settings.node)
    except SandboxUnavailable as e:
        log.error("%s", e.code)  # said here too: a CLI wrapper may turn the exit into a bare status
        raise


@functools.cache
def _warn_unsafe() -> None:
    log.warning("HEADWATER_UNSAFE_NO_SANDBOX=1: users' code runs WITHOUT a sandbox, with the service's "
                "own file system, processes and network in reach. Only for code you trust.")


@functools.cache
def find_sandbox(runner_dir: Path, node: Path) -> Sandbox:
    """The sandbox, once a probe proved it works here (namespaces allowed, node starts inside);
    SandboxUnavailable saying why and what to do otherwise."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed, and Headwater runs users' code only inside its "
            "sandbox. Install it (Debian/Ubuntu: `apt-get install bubblewrap`; `make setup` does it "
            "as root), or set HEADWATER_UNSAFE_NO_SANDBOX=1 to run users' code without one (only for "
            "code you trust).")
    sandbox = Sandbox(bwrap)
    inside_node = f"{RUNNER}/{node.relative_to(runner_dir)}"
    command = sandbox.runner(runner_dir, runner_dir, 1024 * 1024, [inside_node, "--version"], {})
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxUnavailable(f"the bubblewrap sandbox does not start here ({e}); set "
                                 "HEADWATER_UNSAFE_NO_SANDBOX=1 to run users' code without one") from None
    if proc.returncode != 0 or not proc.stdout.startswith("v"):
        reason = (proc.stderr.strip() or f"exit status {proc.returncode}")[-500:]
        raise SandboxUnavailable(
            f"the bubblewrap sandbox does not work here: {reason}. It needs user and pid namespaces "
            "(unprivileged user namespaces, or root); set HEADWATER_UNSAFE_NO_SANDBOX=1 to run users' "
            "code without one (only for code you trust).")
    return sandbox
