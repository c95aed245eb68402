"""Admitting a chunk of cleaned candidates to the pool: rejected, excluded, duplicate (the same
task id, the same content) or retained, in order, against the pool and the excluded ids on disk.

A task id met again with other content, or a public input met again with another reference, is
a DataError. The workers key every row (`Cleaned`): a chunk costs at most three indexed lookups
(by task-id key, by input key for the task ids not pooled yet, by excluded id when something is
excluded) and one insert of the rows as the workers handed them over, numbered.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from corpus_assets.core.errors import DataError
from corpus_assets.tasks.cleaned import Row, sample_of, task_key

IN_LIMIT = 500  # ids per `IN (...)` lookup (SQLite caps bound parameters)
CANDIDATE_COLUMNS = (  # a pool row: its position and batch, then the `Cleaned` fields
    "seq",
    "batch",
    "task_id",
    "input",
    "metadata",
    "reference",
    "content_sha",
    "id_key",
    "input_key",
)
INSERT_CANDIDATE = (
    f"INSERT INTO candidates ({', '.join(CANDIDATE_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(CANDIDATE_COLUMNS))})"
)
COUNTS = ("rejected", "duplicates", "excluded", "retained")


def admit(
    db: sqlite3.Connection,
    excluding: bool,
    batch: int,
    first_seq: int,
    cleaned: Sequence[Row | None],
) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """Count each sample in order; the pool rows of the retained ones, numbered from
    `first_seq`, and the counts (`COUNTS`). Raises DataError on a conflicting reference or a
    task id that names two different samples."""
    kept = [c for c in cleaned if c is not None]
    excluded = _excluded_among(db, excluding, [c[0] for c in kept])
    # the pooled content digest per task-id key: a key not pooled costs one probe of the
    # task-id key index (which holds the key alone, cheaper to insert into than key and digest),
    # a pooled one a read of its row; another task id with the same key is told apart below by
    # its text
    pooled: dict[int, bytes] = dict(
        lookup(db, "id_key, content_sha FROM candidates", "id_key", [c[5] for c in kept])
    )
    rows: list[tuple[Any, ...]] = []
    admitted: dict[str, Row] = {}  # this chunk's retained candidates, not inserted yet
    seq = first_seq
    duplicates = excluded_count = 0
    for item in kept:
        task_id, content_sha, id_key = item[0], item[4], item[5]
        if task_id in excluded:
            excluded_count += 1
            continue
        earlier = admitted.get(task_id)
        if earlier is not None:
            if earlier[4] != content_sha:
                raise DataError(_two_contents(db, item, earlier))
            duplicates += 1
            continue
        pooled_sha = pooled.get(id_key)
        # the same digest is the same whole sample, task id included: a duplicate
        if pooled_sha is not None and pooled_sha != content_sha:
            pooled_sha = _pooled_sha(db, task_id)  # this task id's own, or None
            if pooled_sha is not None and pooled_sha != content_sha:
                raise DataError(_two_contents(db, item, None))
        if pooled_sha is not None:
            duplicates += 1
            continue
        admitted[task_id] = item
        rows.append((seq, batch, *item))
        seq += 1
    counts = {
        "rejected": len(cleaned) - len(kept),
        "duplicates": duplicates,
        "excluded": excluded_count,
        "retained": len(rows),
    }
    return rows, counts


def _excluded_among(db: sqlite3.Connection, excluding: bool, task_ids: Sequence[str]) -> set[str]:
    """Which of `task_ids` are excluded (no query at all when nothing is)."""
    if not excluding:
        return set()
    return {r[0] for r in lookup(db, "task_id FROM excluded", "task_id", task_ids)}


def input_conflict(db: sqlite3.Connection, batch: int) -> str | None:
    """The message for the first candidate of `batch` (in pool order) whose public input an
    earlier candidate has with another reference, naming both; None when there is none.

    Run once per generated batch, before it is marked done, instead of an input index that
    every chunk's insert would pay for: one pass finds the input keys that more than one
    candidate has, one more reads those candidates (few: a task id is usually made from its
    input), key by key in pool order."""
    rows = db.execute(
        "SELECT input_key, seq, batch, task_id, input, reference FROM candidates "
        "WHERE input_key IN (SELECT input_key FROM candidates GROUP BY input_key "
        "HAVING COUNT(*) > 1 AND MAX(batch) >= ?) ORDER BY input_key, seq",
        (batch,),
    )
    first: tuple[int, str, str] | None = None  # (seq, earlier id, id) of the first conflict
    group: int | None = None
    seen: dict[str, list[tuple[str, str]]] = {}  # per input: (reference, first task id) each
    for input_key, seq, in_batch, task_id, task_input, reference in rows:
        if input_key != group:
            group, seen = input_key, {}
        references = seen.setdefault(task_input, [])
        other = next((t for r, t in references if r != reference), None)
        if other is not None and in_batch == batch and (first is None or seq < first[0]):
            first = (seq, other, task_id)
        if all(r != reference for r, _ in references):
            references.append((reference, task_id))
    if first is None:
        return None
    return (
        "conflicting references: the same public input has two different references, in "
        f"task {first[1]!r} and task {first[2]!r}"
    )


def lookup(
    db: sqlite3.Connection, select: str, column: str, values: Sequence[Any]
) -> Iterator[Any]:
    """`SELECT <select> WHERE <column> IN values`, in slices SQLite accepts."""
    distinct = sorted(set(values))
    for start in range(0, len(distinct), IN_LIMIT):
        part = distinct[start : start + IN_LIMIT]
        # the list padded to a power of two with its last value (which changes no answer), so
        # a handful of statement texts serve every size: the connection's statement cache
        # stays small and warm instead of preparing (and keeping) one statement per size
        size = min(1 << (len(part) - 1).bit_length(), IN_LIMIT)
        part += part[-1:] * (size - len(part))
        marks = ",".join("?" * size)
        yield from db.execute(f"SELECT {select} WHERE {column} IN ({marks})", part)


def pooled_ids(db: sqlite3.Connection, task_ids: Sequence[str]) -> set[str]:
    """Which of `task_ids` are pooled candidates (looked up by key, compared by text)."""
    wanted = set(task_ids)
    keys = [task_key(t) for t in wanted]
    return {r[0] for r in lookup(db, "task_id FROM candidates", "id_key", keys)} & wanted


def pooled_row(db: sqlite3.Connection, task_id: str) -> tuple[str, str, str, str] | None:
    """A pooled candidate's (task id, input, metadata, reference) texts, or None."""
    row = db.execute(
        "SELECT task_id, input, metadata, reference FROM candidates "
        "WHERE id_key = ? AND task_id = ?",
        (task_key(task_id), task_id),
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2], row[3])


def _pooled_sha(db: sqlite3.Connection, task_id: str) -> bytes | None:
    """The content digest of a pooled task id, or None."""
    row = db.execute(
        "SELECT content_sha FROM candidates WHERE id_key = ? AND task_id = ?",
        (task_key(task_id), task_id),
    ).fetchone()
    return None if row is None else bytes(row[0])


def _two_contents(db: sqlite3.Connection, item: Row, earlier: Row | None) -> str:
    """The message for a task id already pooled (or admitted earlier) with other content."""
    old_fields = pooled_row(db, item[0]) if earlier is None else earlier[:4]
    assert old_fields is not None  # the id was found in the pool
    new = sample_of(*item[:4])
    old = sample_of(*old_fields)
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
