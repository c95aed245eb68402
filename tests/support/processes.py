"""Processes as /proc shows them."""

from __future__ import annotations

from pathlib import Path


def live_in_group(pgid: int) -> list[int]:
    """The pids of process group `pgid` that still run (zombies, whose parent has not reaped
    them yet, are dead: they run nothing)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended while we looked
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            found.append(int(entry.name))
    return found
