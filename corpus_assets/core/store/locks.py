"""Inter-process file locks, one primitive (`file_lock`) over `fcntl.flock`.

The raw cache is shared by concurrent builds, each build's stages are single-flight
(`build_lock`), a data job holds its folder. A flock belongs to the open file description and
the kernel drops it when the last descriptor of that description closes, so a lock dies with
its holder and no stale lock is ever left to remove by hand. A forked child would share the
description (and so keep the lock alive after its parent died): every child closes its copies of
the descriptors this module holds right after the fork, and the parent keeps the lock.

One waiting policy: a lock whose holder is alive is waited for without deadline (a hung holder
is stopped by its own heartbeat), with a line every WAIT_NOTE_S naming the holder, which keeps a
waiting stage's heartbeat going. A deadline (`wait=`) is for callers a person waits on.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.errors import TransientError
from corpus_assets.core.store.atomic import make_dirs

WAIT_NOTE_S = 5.0
POLL_S = 0.2
LOCK_FILE_MODE = 0o600

_held: set[int] = set()  # descriptors of the lock files this process opened
_opening = threading.Lock()  # a fork waits while a descriptor is opened but not yet in _held


@dataclass(frozen=True)
class Holder:
    """Who holds a lock exclusively: written into the lock file by the holder."""

    host: str
    pid: int
    since: str

    def __str__(self) -> str:
        if not self.host:
            return "another process"
        return f"pid {self.pid} on {self.host} since {self.since}"


UNKNOWN_HOLDER = Holder("", 0, "")
"""A holder that has not written its record yet, or a shared one."""


class LockBusy(TransientError):
    """A lock still held when its caller's deadline passed; `holder` as far as known."""

    def __init__(self, message: str, holder: Holder | None) -> None:
        super().__init__(message)
        self.holder = holder


@contextmanager
def file_lock(
    path: Path,
    what: str,
    *,
    shared: bool = False,
    wait: float | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the lock at `path` for the block: exclusive (one holder) or `shared` (readers).

    `wait`: None waits as long as the holder lives; else seconds, then LockBusy (0: try once).
    `on_wait` gets "waiting for WHAT: held by pid N on HOST since T" every WAIT_NOTE_S.
    The file (0600) is never deleted, so two processes always lock the same file.
    """
    fd = _open(path)
    try:
        _acquire(fd, path, what, shared, wait, on_wait)
        if not shared:
            _write_holder(fd)
        try:
            yield
        finally:
            if not shared and fd in _held:
                os.ftruncate(fd, 0)
    finally:
        _close(fd)  # closing the last descriptor drops the flock


@contextmanager
def build_lock(
    path: Path,
    what: str,
    waiting: Callable[[str], None] | None = None,
    shared: bool = False,
) -> Iterator[None]:
    """The single-flight lock of a build's stage: `file_lock` without deadline."""
    with file_lock(path, what, shared=shared, on_wait=waiting):
        yield


@contextmanager
def hold(path: Path, what: str, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
    """An exclusive `file_lock` without deadline (the raw cache, the ledger, an eval index)."""
    with file_lock(path, what, on_wait=waiting):
        yield


def held_by(path: Path) -> Holder | None:
    """Who holds the lock at `path` exclusively right now; None when it is free (or shared)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # no such lock file: nobody ever held it here
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return read_holder(path) or UNKNOWN_HOLDER
    finally:
        os.close(fd)
    return None


def read_holder(path: Path) -> Holder | None:
    """The exclusive holder named in the lock file at `path`, if any (None when free or shared)."""
    try:
        doc = json.loads(path.read_bytes() or b"null")
        return Holder(str(doc["host"]), int(doc["pid"]), str(doc["since"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _acquire(
    fd: int,
    path: Path,
    what: str,
    shared: bool,
    wait: float | None,
    on_wait: Callable[[str], None] | None,
) -> None:
    """Take the flock on `fd`, polling; a note per WAIT_NOTE_S, LockBusy past `wait`."""
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    deadline = None if wait is None else time.monotonic() + wait
    noted: float | None = None
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            holder = read_holder(path)
            raise LockBusy(f"{what} is {_held_by(holder)} ({path}); try again", holder)
        if on_wait is not None and (noted is None or now - noted >= WAIT_NOTE_S):
            noted = now
            on_wait(f"waiting for {what}: {_held_by(read_holder(path))}")
        time.sleep(POLL_S if deadline is None else min(POLL_S, deadline - now))


def _held_by(holder: Holder | None) -> str:
    return f"held by {holder or UNKNOWN_HOLDER}"


def _open(path: Path) -> int:
    """Open (create, 0600) the lock file at `path`; its descriptor is closed in forked children."""
    make_dirs(path.parent)
    with _opening:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, LOCK_FILE_MODE)
        _held.add(fd)
    return fd


def _close(fd: int) -> None:
    """Close `fd` unless a fork already closed it in this (child) process."""
    with _opening:
        if fd not in _held:
            return
        _held.discard(fd)
    os.close(fd)


def _write_holder(fd: int) -> None:
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = {"host": socket.gethostname(), "pid": os.getpid(), "since": since}
    data = json.dumps(doc).encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _before_fork() -> None:
    _opening.acquire()


def _after_fork_in_parent() -> None:
    _opening.release()


def _after_fork_in_child() -> None:
    """Close the inherited lock descriptors: the parent's locks stay the parent's alone.

    Closing a copy never releases the flock (only the last close of the description does)."""
    for fd in _held:
        with suppress(OSError):
            os.close(fd)
    _held.clear()
    _opening.release()


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)
