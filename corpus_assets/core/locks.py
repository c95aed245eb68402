"""Inter-process file locks (the raw cache is shared by concurrent builds)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from corpus_assets.core.errors import TransientError

LOCK_TIMEOUT_S = 3600.0


@contextmanager
def hold(path: Path, what: str, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive lock on `path`; waiting past `timeout` is a transient error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise TransientError(f"{what} is locked by another process ({path}); try again") from None
    try:
        yield
    finally:
        lock.release()
