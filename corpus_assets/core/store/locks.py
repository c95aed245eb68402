"""Inter-process file locks: the raw cache is shared by concurrent builds, and each build's
stages are single-flight (`build_lock`)."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from corpus_assets.core.errors import TransientError

LOCK_TIMEOUT_S = 3600.0
WAIT_NOTE_S = 5.0


@contextmanager
def hold(
    path: Path,
    what: str,
    timeout: float = LOCK_TIMEOUT_S,
    waiting: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold an exclusive lock on `path`; waiting past `timeout` is a transient error.

    While it waits, `waiting` gets a line every WAIT_NOTE_S (a waiting stage still heartbeats).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            lock.acquire(timeout=max(min(left, WAIT_NOTE_S) if waiting else left, 0))
            break
        except Timeout:
            if time.monotonic() >= deadline:
                raise TransientError(
                    f"{what} is locked by another process ({path}); try again"
                ) from None
            if waiting is not None:
                waiting(f"waiting for {what}: locked by another process")
    try:
        yield
    finally:
        lock.release()


POLL_S = 0.2


@dataclass(frozen=True)
class Holder:
    """Who holds a build lock: written into the lock file by its exclusive holder."""

    host: str
    pid: int
    since: str

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host} since {self.since}"


@contextmanager
def build_lock(
    path: Path,
    what: str,
    waiting: Callable[[str], None] | None = None,
    shared: bool = False,
) -> Iterator[None]:
    """Hold the lock at `path` for the whole block: exclusive (one writer) or `shared` (readers).

    A `flock` on a file that is never deleted: the kernel drops it when the holder dies, so no
    stale lock is ever left to remove by hand, and a waiter takes over at once. There is no
    deadline: the holder is alive while it holds the lock (a hung one is stopped by its own
    heartbeat). While it waits, `waiting` gets a line every WAIT_NOTE_S naming the holder
    (host and pid), which keeps a waiting stage's heartbeat going.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        noted = 0.0
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if waiting is not None and now - noted >= WAIT_NOTE_S:
                    noted = now
                    holder = read_holder(path)
                    by = f"held by {holder}" if holder else "held by another process"
                    waiting(f"waiting for {what}: {by}")
                time.sleep(POLL_S)
        if not shared:
            _write_holder(fd)
        try:
            yield
        finally:
            if not shared:
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor drops the flock


def read_holder(path: Path) -> Holder | None:
    """The exclusive holder named in the lock file at `path`, if any (None when free or shared)."""
    try:
        doc = json.loads(path.read_bytes() or b"null")
        return Holder(str(doc["host"]), int(doc["pid"]), str(doc["since"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _write_holder(fd: int) -> None:
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = {"host": socket.gethostname(), "pid": os.getpid(), "since": since}
    data = json.dumps(doc).encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
