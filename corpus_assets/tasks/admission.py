"""Admitting a chunk of cleaned candidates to the pool: rejected, excluded, duplicate (the same
task id, the same content) or retained, in order, against the pool and the excluded ids on disk.

A task id met again with other content, or a public input met again with another reference, is
a DataError. A chunk costs three indexed lookups (two when nothing is excluded) and one insert.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from corpus_assets.core.errors import DataError
from corpus_assets.tasks.cleaned import Cleaned
from corpus_assets.tasks.types import DataSample

IN_LIMIT = 500  # ids per `IN (...)` lookup (SQLite caps bound parameters)
CANDIDATE_COLUMNS = (  # a pool row: its position and batch, then the `Cleaned` fields
    "seq",
    "batch",
    "task_id",
    "payload",
    "public",
    "content_sha",
    "input_sha",
    "reference_sha",
)
INSERT_CANDIDATE = (
    f"INSERT INTO candidates ({', '.join(CANDIDATE_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(CANDIDATE_COLUMNS))})"
)


def admit(
    db: sqlite3.Connection,
    excluding: bool,
    batch: int,
    first_seq: int,
    cleaned: Sequence[Cleaned | None],
    counts: dict[str, int],
) -> list[tuple[Any, ...]]:
    """Count each sample in order and return the pool rows of the retained ones, numbered from
    `first_seq`. Raises DataError on a conflicting reference or a task id that names two
    different samples."""
    kept = [c for c in cleaned if c is not None]
    excluded = _excluded_among(db, excluding, [c.task_id for c in kept])
    known, inputs = _pooled_matches(db, kept)
    rows: list[tuple[Any, ...]] = []
    admitted: dict[str, str] = {}  # this chunk's retained payloads, not inserted yet
    for item in cleaned:
        if item is None:
            counts["rejected"] += 1
        elif item.task_id in excluded:
            counts["excluded"] += 1
        elif item.task_id in known:
            if known[item.task_id] != item.content_sha:
                raise DataError(_two_contents(db, item, admitted.get(item.task_id)))
            counts["duplicates"] += 1
        else:
            for other_id, reference_sha in inputs.get(item.input_sha, ()):
                if reference_sha != item.reference_sha:
                    raise DataError(
                        "conflicting references: the same public input has two different "
                        f"references, in task {other_id!r} and task {item.task_id!r}"
                    )
            counts["retained"] += 1
            known[item.task_id] = item.content_sha
            admitted[item.task_id] = item.payload
            inputs.setdefault(item.input_sha, []).append((item.task_id, item.reference_sha))
            rows.append((first_seq + len(rows), batch, *item))
    return rows


def _excluded_among(db: sqlite3.Connection, excluding: bool, task_ids: Sequence[str]) -> set[str]:
    """Which of `task_ids` are excluded (no query at all when nothing is)."""
    if not excluding:
        return set()
    return {r[0] for r in lookup(db, "task_id FROM excluded", "task_id", task_ids)}


def _pooled_matches(
    db: sqlite3.Connection, kept: Sequence[Cleaned]
) -> tuple[dict[str, str], dict[str, list[tuple[str, str]]]]:
    """The pooled candidates sharing a task id or a public input with `kept`: content
    digest per task id, and (task id, reference digest) per input digest."""
    known = dict(
        lookup(db, "task_id, content_sha FROM candidates", "task_id", [c.task_id for c in kept])
    )
    inputs: dict[str, list[tuple[str, str]]] = {}
    for task_id, input_sha, reference_sha in lookup(
        db,
        "task_id, input_sha, reference_sha FROM candidates",
        "input_sha",
        [c.input_sha for c in kept],
    ):
        inputs.setdefault(input_sha, []).append((task_id, reference_sha))
    return known, inputs


def lookup(
    db: sqlite3.Connection, select: str, column: str, values: Sequence[Any]
) -> Iterator[Any]:
    """`SELECT <select> WHERE <column> IN values`, in slices SQLite accepts."""
    distinct = sorted(set(values))
    for start in range(0, len(distinct), IN_LIMIT):
        part = distinct[start : start + IN_LIMIT]
        marks = ",".join("?" * len(part))
        yield from db.execute(f"SELECT {select} WHERE {column} IN ({marks})", part)


def _two_contents(db: sqlite3.Connection, item: Cleaned, earlier: str | None) -> str:
    """The message for a task id already pooled (or admitted earlier) with other content."""
    if earlier is None:
        earlier = db.execute(
            "SELECT payload FROM candidates WHERE task_id = ?", (item.task_id,)
        ).fetchone()[0]
    new = DataSample.from_json(json.loads(item.payload))
    old = DataSample.from_json(json.loads(str(earlier)))
    if new.task.to_json() == old.task.to_json():
        return (
            f"conflicting references: task {new.task_id!r} was cleaned twice with different "
            "references (the same public task, two answers)"
        )
    return (
        f"task id {new.task_id!r} names two different cleaned samples; a task id must "
        "always mean the same content"
    )


def insert_candidates(db: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """The retained rows (`CANDIDATE_COLUMNS`), in pool order."""
    db.executemany(INSERT_CANDIDATE, rows)
