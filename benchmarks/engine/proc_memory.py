"""Peak memory and CPU of a child process and all its descendants (Linux ``/proc``).

Method: the command runs as a child; every ``interval`` seconds the parent walks ``/proc`` for
the child's process tree (the Python worker, and for Spark the driver JVM it launches, with any
executor or Python worker processes) and sums their resident set sizes (``VmRSS``); the peak of
that sum is ``tree_peak_rss``. Each process's last-seen CPU seconds (utime + stime) are summed into
``tree_cpu_s``. A spike shorter than the interval can be missed, so the child's own peak is
also read exactly from the kernel: ``os.wait4`` returns the rusage of the child, whose
``ru_maxrss`` is the largest peak RSS of the child and its waited-for descendants (a maximum
over processes, not a sum).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Measured:
    returncode: int
    wall_s: float
    tree_cpu_s: float
    tree_peak_rss: int
    child_maxrss: int
    stdout: str
    stderr: str


def _stat(pid: int) -> tuple[int, float, int] | None:
    """(parent pid, CPU seconds, RSS bytes) of ``pid`` or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): ppid = 4, utime = 14, stime = 15, rss (pages) = 24
    ppid, utime, stime, rss = int(fields[1]), int(fields[11]), int(fields[12]), int(fields[21])
    return ppid, (utime + stime) / TICKS, rss * PAGE


def tree(root: int) -> dict[int, tuple[float, int]]:
    """``{pid: (cpu_s, rss)}`` of ``root`` and its descendants."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            s = _stat(int(entry))
            if s is not None:
                stats[int(entry)] = s
    members = {root}
    grew = True
    while grew:
        new = {pid for pid, (ppid, _, _) in stats.items() if ppid in members} - members
        grew = bool(new)
        members |= new
    return {pid: (stats[pid][1], stats[pid][2]) for pid in members if pid in stats}


def run_measured(
    cmd: list[str], *, interval: float = 0.2, env: dict[str, str] | None = None
) -> Measured:
    """Run ``cmd`` and measure its process tree (see the module docstring)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = 0
    cpu: dict[int, float] = {}
    done = threading.Event()

    def poll() -> None:
        nonlocal peak
        while not done.is_set():
            members = tree(proc.pid)
            peak = max(peak, sum(rss for _, rss in members.values()))
            for pid, (seconds, _) in members.items():
                cpu[pid] = max(cpu.get(pid, 0.0), seconds)
            done.wait(interval)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else "")),
        threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else "")),
    ]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    poller.join()
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    # the child's rusage includes its waited-for descendants: a lower bound, like the polled sum
    own = usage.ru_utime + usage.ru_stime
    return Measured(
        returncode=proc.returncode,
        wall_s=wall,
        tree_cpu_s=max(own, sum(cpu.values())),
        tree_peak_rss=peak,
        child_maxrss=usage.ru_maxrss * 1024,
        stdout=out[0] if out else "",
        stderr=err[0] if err else "",
    )
