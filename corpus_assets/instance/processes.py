"""Is a recorded process still running on this host? (Linux `/proc`; a bare pid test elsewhere.)

A pid names a process only while it lives: once it exits the kernel may hand the number to a new
process. So a recorded pid counts as running only if the live process also started no later than
the moment it was recorded (and, when its start time was recorded too, at exactly that time).
An exited process that its parent has not reaped yet (a zombie) is not running.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
GONE_STATES = frozenset("ZXx")  # zombie, dead: exited, only its pid is left
# /proc/stat's btime has one-second resolution, so start times computed from it are a little off.
START_SLACK_S = 2.0


@dataclass(frozen=True)
class ProcStat:
    """The two fields of /proc/<pid>/stat that matter here."""

    state: str
    start_ticks: int  # clock ticks after boot


def host() -> str:
    """This machine's host name, as recorded on runs it executes."""
    return socket.gethostname()


def stat(pid: int) -> ProcStat | None:
    """State and start time of `pid`; None when no such process exists (or no /proc)."""
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # the command name in (...) may hold spaces
    return ProcStat(state=fields[0], start_ticks=int(fields[19]))


def start_ticks(pid: int | None = None) -> int | None:
    """Start time of `pid` (default: this process) in clock ticks after boot; None if unknown."""
    found = stat(os.getpid() if pid is None else pid)
    return None if found is None else found.start_ticks


def started_at(ticks: int) -> float:
    """Wall-clock time (epoch seconds) of a process start given in ticks after boot."""
    return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")


def running(pid: int, recorded_at: float, ticks: int | None = None) -> bool:
    """Whether the process recorded as `pid` at `recorded_at` (started at `ticks`) still runs."""
    if not PROC.is_dir():
        return _signalable(pid)
    found = stat(pid)
    if found is None or found.state in GONE_STATES:
        return False
    if ticks is not None and found.start_ticks != ticks:
        return False
    return started_at(found.start_ticks) <= recorded_at + START_SLACK_S


def _boot_time() -> float:
    for line in (PROC / "stat").read_text(encoding="ascii").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise OSError(f"no btime line in {PROC / 'stat'}")


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
