"""The calibrate step's answer journal: a calibrator's answers kept the moment they arrive.

`work/answers-B.jsonl` holds the answers a calibrator handed over for batch B through the
context's `keep` before its call returned: one line per `keep` (one request's attempts, so they
are kept all or nothing), appended by one writer thread. A `keep` returns once an `fdatasync`
covering its line has finished; the lines that arrive while an fsync runs share the next one
(group commit: no timer, so a lone answer waits one fsync and a burst of them one fsync too).

Opening the journal reads it back: the lines up to the first one that is torn or not an answer
line (a kill mid-write) are kept, the answers of tasks whose call the checkpoints hold already
are dropped, and the rest is rewritten (temp name, fsync, rename) before anything is appended,
so the file never carries a torn line into the middle. `answered(task_ids)` gives a call the
answers an earlier attempt kept for its tasks. Once every candidate of the batch has its
responses committed, the calibrate step removes the file.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from corpus_assets.core.store.atomic import atomic_writer, disk_error, fsync_dir
from corpus_assets.tasks.calibration import Attempt
from corpus_assets.tasks.files import PRIVATE_FILE

Pair = tuple[str, int]
PAGE = 512  # task ids looked up in the checkpoints at once


def journal_path(work: Path, batch: int) -> Path:
    return work / f"answers-{batch}.jsonl"


class AnswerJournal:
    """One batch's journal, open for appending (on the event loop that calls `keep`)."""

    def __init__(self, path: Path, answered: dict[str, list[Attempt]]) -> None:
        self.path = path
        self._answered = answered  # by task id
        self._fd: int | None = None
        self._pending: list[bytes] = []
        self._queued = 0  # keeps whose line is in _pending or written
        self._durable = 0  # keeps whose line is written and fsynced
        self._lock: asyncio.Lock | None = None  # one group commit at a time, on the loop
        self._io = threading.Lock()  # one write at a time, also past a cancelled commit
        self._broken: BaseException | None = None

    @classmethod
    def open(cls, path: Path, committed: Callable[[Sequence[str]], Iterable[str]]) -> AnswerJournal:
        """The journal at `path`, read back; `committed(task_ids)` names those with responses."""
        kept: list[list[Attempt]] = []
        dropped = False
        for page in _pages(read_lines(path), PAGE):
            done = set(committed(sorted({a.task_id for line in page for a in line})))
            left = [line for line in page if not any(a.task_id in done for a in line)]
            dropped |= len(left) < len(page)
            kept += left
        if dropped or _torn(path):
            _rewrite(path, kept)
        answered: dict[str, list[Attempt]] = {}
        for attempt in (a for line in kept for a in line):
            answered.setdefault(attempt.task_id, []).append(attempt)
        return cls(path, answered)

    def answered(self, task_ids: Iterable[str]) -> dict[Pair, Attempt]:
        """The answers kept before this journal was opened, for `task_ids`."""
        found = (a for task_id in task_ids for a in self._answered.get(task_id, ()))
        return {(a.task_id, a.repeat): a for a in found}

    async def keep(self, attempts: Sequence[Attempt]) -> None:
        """Append `attempts` as one line; return once it is durable."""
        if not attempts:
            return
        self._pending.append(answer_line(attempts))
        self._queued += 1
        ticket = self._queued
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._durable >= ticket:
                return  # an fsync that began after this line was queued covered it
            data, upto = b"".join(self._pending), self._queued
            self._pending = []
            await asyncio.to_thread(self._append, data)
            self._durable = upto

    def _append(self, data: bytes) -> None:
        """Write and fdatasync `data` at the end of the file (on a worker thread)."""
        with self._io:
            if self._broken is not None:
                raise OSError(f"the answer journal {self.path} failed earlier: {self._broken}")
            try:
                if self._fd is None:
                    self._fd = os.open(
                        self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE
                    )
                    fsync_dir(self.path.parent)  # the file itself survives a crash
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
                os.fdatasync(self._fd)
            except OSError as exc:
                self._broken = exc  # a torn line may be on disk: append nothing after it
                raise disk_error(exc, self.path) from exc

    def close(self) -> None:
        """Close the file once a write still running (of a cancelled `keep`) has finished."""
        with self._io:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def remove(self) -> None:
        """Remove the file: every answer it held is committed."""
        self.close()
        self.path.unlink(missing_ok=True)


def answer_line(attempts: Sequence[Attempt]) -> bytes:
    """One journal line: `{"attempts": [[task_id, repeat, response, failure_reason], ...]}`."""
    rows = [[a.task_id, a.repeat, a.response, a.failure_reason or None] for a in attempts]
    text = json.dumps({"attempts": rows}, separators=(",", ":"), ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def read_lines(path: Path) -> Iterator[list[Attempt]]:
    """The answer lines of `path` up to the first torn or foreign one (none if it is absent)."""
    for raw, _ in _lines(path):
        line = _parse(raw)
        if line is None:
            return
        yield line


def _lines(path: Path) -> Iterator[tuple[bytes, int]]:
    """Each whole line of `path` with the offset after it; the bytes after the last newline,
    a torn write, are not a line."""
    try:
        with open(path, "rb") as fh:
            end = 0
            for raw in fh:
                if not raw.endswith(b"\n"):
                    return
                end += len(raw)
                yield raw, end
    except FileNotFoundError:
        return
    except OSError as exc:
        raise disk_error(exc, path) from exc


def _torn(path: Path) -> bool:
    """Whether `path` holds anything after its last good answer line."""
    end = 0
    for raw, after in _lines(path):
        if _parse(raw) is None:
            break
        end = after
    try:
        return path.stat().st_size != end
    except FileNotFoundError:
        return False


def _parse(raw: bytes) -> list[Attempt] | None:
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    rows = doc.get("attempts") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        return None
    line = []
    for row in rows:
        if not (
            isinstance(row, list)
            and len(row) == 4
            and isinstance(row[0], str)
            and isinstance(row[1], int)
            and not isinstance(row[1], bool)
            and (row[3] is None or isinstance(row[3], str))
        ):
            return None
        line.append(Attempt(row[0], row[1], row[2], row[3]))
    return line


def _rewrite(path: Path, lines: Sequence[Sequence[Attempt]]) -> None:
    """Replace the file by `lines` (remove it when there are none), crash-safely."""
    if not lines:
        path.unlink(missing_ok=True)
        return
    with atomic_writer(path, PRIVATE_FILE) as fh:
        for line in lines:
            fh.write(answer_line(line))


def _pages(lines: Iterable[list[Attempt]], size: int) -> Iterator[list[list[Attempt]]]:
    page: list[list[Attempt]] = []
    for line in lines:
        page.append(line)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page
