"""Inter-process file locks (the raw cache is shared by concurrent builds)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
