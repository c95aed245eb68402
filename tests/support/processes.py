"""Processes as /proc shows them, and stopping the ones a test started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Process:
    """One entry of /proc: its pid, parent, process group, state letter and NUL-joined argv."""

    pid: int
    parent: int
    group: int
    state: str
    cmdline: bytes

    @property
    def running(self) -> bool:
        """Not a zombie (exited, its parent has not reaped it yet) nor dead."""
        return self.state not in ("Z", "X")


def process(pid: int) -> Process | None:
    """The process `pid`, or None once it is gone."""
    entry = Path(f"/proc/{pid}")
    try:
        fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):  # it ended while we looked
        return None
    try:
        cmdline = (entry / "cmdline").read_bytes()
    except OSError:  # ending: it still counts as a process (a parent, a group member)
        cmdline = b""
    return Process(pid, int(fields[1]), int(fields[2]), fields[0], cmdline)


def processes() -> list[Process]:
    """Every process /proc lists now, zombies included."""
    found = (process(int(e.name)) for e in Path("/proc").iterdir() if e.name.isdigit())
    return [p for p in found if p is not None]


def running(pid: int) -> bool:
    """Whether `pid` is a process that still runs (a zombie does not)."""
    found = process(pid)
    return found is not None and found.running


def live_in_group(pgid: int) -> list[int]:
    """The pids of process group `pgid` that still run."""
    return [p.pid for p in processes() if p.group == pgid and p.running]


def descendants(pid: int) -> list[int]:
    """Pids of every process under `pid` (children first, then theirs), zombies included."""
    children: dict[int, list[int]] = {}
    for proc in processes():
        children.setdefault(proc.parent, []).append(proc.pid)
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def stage_pids(root: Path, stage: str) -> list[int]:
    """Pids of the running `corpus run --stage STAGE ... --root ROOT` processes."""
    needle = f"run\0--stage\0{stage}\0".encode()
    at_root = f"{root}\0".encode()
    return [
        p.pid
        for p in processes()
        if p.running and needle in p.cmdline and at_root in p.cmdline + b"\0"
    ]


def stop_group(
    proc: subprocess.Popen[Any], sig: signal.Signals = signal.SIGTERM, grace: float = 20.0
) -> None:
    """Send `sig` to the process group `proc` leads, SIGKILL it if `proc` has not ended after
    `grace` seconds, and SIGKILL whatever of the group outlives `proc`."""
    for each, wait in ((sig, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, each)
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
