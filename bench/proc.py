"""CPU time and resident memory of a process tree, read from /proc (Linux).

The benchmark reports both for every load round: a figure is only meaningful if the load
generator was not the one running out of CPU, and the server's share says what bounded it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds used so far) of one process, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree(pid: int) -> list[int]:
    """The process and all its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[0], []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used by the live processes of the tree."""
    return sum(stat[1] for p in tree(pid) if (stat := _stat(p)) is not None)


def wait_idle(pid: int, below: float = 0.1, window: float = 0.5, timeout: float = 300) -> float:
    """Waits until the tree uses less than `below` cores over `window` seconds (a server that answers
    first and works after, like n8n's "respond immediately", is still busy after a load round);
    returns the seconds it was still busy."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        before = tree_cpu_s(pid)
        time.sleep(window)
        if tree_cpu_s(pid) - before < below * window:
            break
    return max(0.0, time.perf_counter() - started - window)


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat): what else runs on the machine
    during a round is this minus the target's and the load generator's share."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def rss_kb(pid: int) -> int:
    """VmRSS of one process in KiB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kb(pid: int) -> dict[int, int]:
    """VmRSS of each process of the tree, by pid."""
    return {p: rss_kb(p) for p in tree(pid)}
