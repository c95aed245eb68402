"""Read-only views of the checkpoint database that `select` and calibrators are given: the pool
as a sequence, a batch's task ids, the scores as a mapping, each read a page at a time, never
held whole in memory. Use a view on the thread that made it (the coordinator's).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import overload

from corpus_assets.tasks.cleaned import sample_of
from corpus_assets.tasks.types import JSON, DataSample

PAGE = 512  # rows fetched per round trip when streaming the pool


class CandidatePool(Sequence[DataSample]):
    """The retained candidates in pool order, read from the database on demand."""

    def __init__(self, db: sqlite3.Connection, size: int) -> None:
        """The `size` candidates at pool positions 0 to size - 1."""
        self._db, self._len = db, size

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> DataSample: ...
    @overload
    def __getitem__(self, index: slice) -> list[DataSample]: ...
    def __getitem__(self, index: int | slice) -> DataSample | list[DataSample]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("candidate index out of range")
        row = self._db.execute(
            "SELECT task_id, input, metadata, reference FROM candidates WHERE seq = ?", (index,)
        ).fetchone()
        return sample_of(*row)

    def __iter__(self) -> Iterator[DataSample]:
        cursor = self._db.execute(
            "SELECT task_id, input, metadata, reference FROM candidates WHERE seq < ? ORDER BY seq",
            (self._len,),
        )
        while rows := cursor.fetchmany(PAGE):
            for row in rows:
                yield sample_of(*row)

    def task_metadata(self) -> Iterator[tuple[str, dict[str, JSON]]]:
        """(task id, public metadata) of each candidate in pool order, the same as
        `(s.task_id, dict(s.task.metadata))` of the samples, reading the metadata column alone:
        a cheap pass for a `select` that chooses by task id and metadata."""
        cursor = self._db.execute(
            "SELECT task_id, metadata FROM candidates WHERE seq < ? ORDER BY seq", (self._len,)
        )
        loads = json.loads
        while rows := cursor.fetchmany(PAGE):
            for task_id, metadata in rows:
                yield str(task_id), loads(metadata)


class BatchTaskIds(Sequence[str]):
    """One batch's retained task ids in pool order, read a page at a time (use it on the
    thread that made it: the coordinator's)."""

    def __init__(self, db: sqlite3.Connection, start: int, stop: int) -> None:
        """The candidates at pool positions `start <= seq < stop` (`Checkpoints.batch_range`)."""
        self._db, self._start = db, start
        self._len = stop - start

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("batch task index out of range")
        row = self._db.execute(
            "SELECT task_id FROM candidates WHERE seq = ?", (self._start + index,)
        ).fetchone()
        return str(row[0])

    def __iter__(self) -> Iterator[str]:
        last, stop = self._start - 1, self._start + self._len
        while True:
            rows = self._db.execute(
                "SELECT seq, task_id FROM candidates WHERE seq > ? AND seq < ? "
                "ORDER BY seq LIMIT ?",
                (last, stop, PAGE),
            ).fetchall()
            if not rows:
                return
            for _, task_id in rows:
                yield task_id
            last = rows[-1][0]


class ScoreTable(Mapping[str, Sequence[float | None]]):
    """Scores per task id, one per repeat in repeat order (empty without calibration)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __getitem__(self, task_id: str) -> tuple[float | None, ...]:
        rows = self._db.execute(
            "SELECT score FROM scores WHERE task_id = ? ORDER BY repeat", (task_id,)
        ).fetchall()
        if not rows:
            raise KeyError(task_id)
        return tuple(r[0] for r in rows)

    def __iter__(self) -> Iterator[str]:
        cursor = self._db.execute("SELECT DISTINCT task_id FROM scores ORDER BY task_id")
        while rows := cursor.fetchmany(PAGE):
            for (task_id,) in rows:
                yield task_id

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(DISTINCT task_id) FROM scores").fetchone()[0])
