"""How a data job stops: cancelled between chunks, out of candidates, or failed, and which
failures are retried after a growing wait."""

from __future__ import annotations

import threading

from corpus_assets.core.errors import CorpusError, DataError, DiskError, TransientError

MAX_RETRY_DELAY_S = 60.0


class JobCancelled(CorpusError):
    """The job was cancelled between chunks; its folder records `cancelled` (resumable)."""

    exit_code = 130


class CancelEvent(threading.Event):
    """The one event that cancels a job, and the exit code its cancellation gives."""

    exit_code = JobCancelled.exit_code

    def request(self, exit_code: int) -> None:
        """Cancel with `exit_code` (130 SIGINT, 143 SIGTERM); a second request changes nothing."""
        if not self.is_set():
            self.exit_code = exit_code
            self.set()


class ExhaustedError(DataError):
    """`max_batches` or `max_candidates` was reached before `select` could fill the target."""


def retry_delay(base: float, attempt: int) -> float:
    """The wait before retry `attempt` (0-based): `base` doubled each time, capped at 60 s."""
    return float(min(base * 2.0**attempt, MAX_RETRY_DELAY_S))


def retryable(exc: BaseException) -> bool:
    """Only OSError (connection errors included), TimeoutError and our transient errors (disk
    errors, a worker process that died) retry."""
    return isinstance(exc, OSError | TimeoutError | TransientError | DiskError)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, CorpusError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def exit_code(exc: BaseException) -> int:
    return int(getattr(exc, "exit_code", 1))
