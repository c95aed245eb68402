"""The listed files of a remote source downloaded a few at a time, with one progress line.

A source of many small objects (an S3 prefix of 2,000 files) is bound by round trips, not by
bandwidth: `WORKERS` downloads at once keep the connection pool busy. What the downloads say
goes through one lock (lines never interleave), and their progress is summed up in one line:
the count, bytes and rate so far, at most every `progress.every` seconds (the stage's
heartbeat), and one line when all are done. The first download that
fails stops the ones not started; its error is raised once the running ones end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from corpus_assets.core.store.progress import Progress
from corpus_assets.core.store.remote import RemoteFile

WORKERS = 16
T = TypeVar("T")


class _Shared(Progress):
    """A Progress the downloads share: notes under a lock."""

    def __init__(self, outer: Progress) -> None:
        super().__init__(outer.stage, outer.emit, outer.every)
        self.outer = outer
        self.lock = threading.Lock()

    def note(self, message: str) -> None:
        with self.lock:
            self.outer.note(message)


def download_all(
    source: str,
    items: list[RemoteFile],
    one: Callable[[RemoteFile, Progress], T],
    progress: Progress,
    workers: int = WORKERS,
) -> list[T]:
    """`one(item, progress)` for every item, `workers` at a time: the results in `items`' order."""
    shared = _Shared(progress)
    total = sum(item.size or 0 for item in items)
    width = max(1, min(workers, len(items)))
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="download") as pool:
        futures = [pool.submit(one, item, shared) for item in items]
        _wait(source, futures, items, shared, start)
    seconds = max(time.monotonic() - start, 1e-9)
    shared.note(
        f"source {source}: downloaded {len(items):,} files ({total / 1e6:,.1f} MB) in "
        f"{seconds:,.1f} s, {total / 1e6 / seconds:,.2f} MB/s, {width} at a time"
    )
    return [f.result() for f in futures]


def _wait(
    source: str,
    futures: list[Future[T]],
    items: list[RemoteFile],
    shared: _Shared,
    start: float,
) -> None:
    """Until every download ends, a progress line every `every` seconds; the first error is
    raised after the downloads not started are cancelled and the running ones end."""
    pending: set[Future[T]] = set(futures)
    sizes = {id(f): item.size or 0 for f, item in zip(futures, items, strict=True)}
    while pending:
        done, pending = wait(pending, timeout=shared.every, return_when=FIRST_EXCEPTION)
        error = next((e for f in done if (e := f.exception()) is not None), None)
        if error is not None:
            for f in pending:
                f.cancel()
            wait(pending)
            raise error
        if pending:
            finished = [f for f in futures if f.done()]
            nbytes = sum(sizes[id(f)] for f in finished)
            seconds = max(time.monotonic() - start, 1e-9)
            shared.note(
                f"source {source}: downloaded {len(finished):,} of {len(futures):,} files "
                f"({nbytes / 1e6:,.1f} MB), {nbytes / 1e6 / seconds:,.2f} MB/s"
            )
