"""`locks.file_lock`: one flock primitive, its holder record, its deadline, and its forks.

Holders run in other processes (a flock held by this process's other descriptor would conflict
the same way, but a real second process is what the builds meet).
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.processes import running
from support.waiting import wait_for

from corpus_assets.core.store.locks import (
    LockBusy,
    build_lock,
    file_lock,
    held_by,
    read_holder,
)

HOLDER = """
import sys, time
from pathlib import Path
from corpus_assets.core.store.locks import file_lock
with file_lock(Path(sys.argv[1]), "the test lock", shared=sys.argv[2] == "shared"):
    print("held", flush=True)
    time.sleep(60)
"""

FORKING_HOLDER = """
import os, sys, time
from pathlib import Path
from corpus_assets.core.store.locks import build_lock
with build_lock(Path(sys.argv[1]), "the test lock"):
    child = os.fork()
    if child == 0:  # a worker that outlives its parent
        time.sleep(60)
        os._exit(0)
    print(child, flush=True)
    time.sleep(60)
"""


def _start(script: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """A Python process running `script`, and the first line it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()


def test_an_exclusive_lock_file_is_private_and_names_its_holder_while_held(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locks" / "a.lock"
    with file_lock(path, "the test lock"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        holder = read_holder(path)
        assert holder is not None
        assert (holder.pid, holder.host) == (os.getpid(), socket.gethostname())
    assert path.read_bytes() == b""  # released: no holder named
    assert held_by(path) is None


def test_a_deadline_names_the_live_holder(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    proc, line = _start(HOLDER, str(path), "exclusive")
    try:
        assert line == "held"
        holder = held_by(path)
        assert holder is not None and holder.pid == proc.pid
        start = time.monotonic()
        with pytest.raises(LockBusy) as busy, file_lock(path, "the Dagster instance", wait=0.5):
            pass
        assert time.monotonic() - start >= 0.5
    finally:
        _stop(proc)
    assert busy.value.holder == holder
    assert str(busy.value) == f"the Dagster instance is held by {holder} ({path}); try again"
    with file_lock(path, "the test lock", wait=0):  # free once its holder died
        mine = held_by(path)
        assert mine is not None and mine.pid == os.getpid()


def test_readers_share_and_a_writer_waits_for_them(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    proc, line = _start(HOLDER, str(path), "shared")
    try:
        assert line == "held"
        with file_lock(path, "the shards", shared=True, wait=0):
            pass
        notes: list[str] = []
        with (
            pytest.raises(LockBusy, match=r"^the shards is held by another process "),
            file_lock(path, "the shards", wait=0.3, on_wait=notes.append),
        ):
            pass
    finally:
        _stop(proc)
    assert notes == ["waiting for the shards: held by another process"]  # a reader names none


@pytest.mark.timeout(60)
def test_a_forked_child_does_not_keep_its_parents_lock(tmp_path: Path) -> None:
    """A worker forked while the stage holds its lock, orphaned by a SIGKILL of the stage alone,
    leaves the lock free: the lock dies with its holder."""
    path = tmp_path / "shard.lock"
    parent, line = _start(FORKING_HOLDER, str(path))
    child = int(line)
    try:
        holder = held_by(path)
        assert holder is not None and holder.pid == parent.pid
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert running(child), "the forked child should outlive its parent here"
        wait_for(lambda: held_by(path) is None, 2.0, "the lock to be free")
        with build_lock(path, "the test lock"):
            assert running(child)
    finally:
        os.kill(child, signal.SIGKILL)
        _stop(parent)


def test_a_fork_leaves_the_parent_holding_its_lock(tmp_path: Path) -> None:
    """The child closes its copies of the lock descriptors; that never releases the parent's."""
    path = tmp_path / "a.lock"
    with file_lock(path, "the test lock"):
        child = os.fork()
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
        holder = held_by(path)
        assert holder is not None and holder.pid == os.getpid()
        with pytest.raises(LockBusy), file_lock(path, "the test lock", wait=0):
            pass  # another open description of the file still conflicts
    assert held_by(path) is None
