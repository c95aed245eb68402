"""The bounded window of worker jobs, taken back in submission order.

The coordinator submits chunks to the pool while at most `window` of them are pending, and
commits their results in the order it submitted them, whatever order the workers finish in:
that order is what makes a job's result the same for any worker count. `ordered` is that loop,
written once; closing it (leaving its `with`, normally or by an exception) cancels the jobs not
started yet, and a running one is left to end with its pool.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

K = TypeVar("K")  # what the caller needs to commit a job's result (its position, its ids)
J = TypeVar("J")  # the job: a Future, or a value already known (a shard file on disk)


@contextmanager
def ordered(submitted: Iterable[tuple[K, J]], window: int) -> Iterator[Iterator[tuple[K, J]]]:
    """`with ordered(jobs, window) as results: for key, job in results: ...` takes each
    (key, job) of `submitted` back in its order, drawing the next one from `submitted` (which
    submits it) only while fewer than `window` are pending, so the workers run ahead of the
    commits by at most `window` jobs. Pending futures are cancelled when the `with` ends."""
    results = _in_order(submitted, window)
    try:
        yield results
    finally:
        results.close()


def _in_order(submitted: Iterable[tuple[K, J]], window: int) -> Generator[tuple[K, J]]:
    pending: deque[tuple[K, J]] = deque()
    try:
        for submission in submitted:
            pending.append(submission)
            while len(pending) > window:
                yield pending.popleft()
        while pending:
            yield pending.popleft()
    finally:
        for _, job in pending:
            _cancel(job)


def _cancel(job: Any) -> None:
    if isinstance(job, Future):
        job.cancel()
