"""Admitting a chunk of cleaned candidates to the pool: rejected, excluded, duplicate (the same
task id, the same content) or retained, in order, against the pool and the excluded ids on disk.

A task id met again with other content, or a public input met again with another reference, is
a DataError. A chunk costs at most three indexed lookups (by task id, by input digest for the
task ids not pooled yet, by excluded id when something is excluded) and one insert.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from corpus_assets.core.errors import DataError
from corpus_assets.tasks.cleaned import Cleaned, payload_text
from corpus_assets.tasks.types import DataSample

IN_LIMIT = 500  # ids per `IN (...)` lookup (SQLite caps bound parameters)
CANDIDATE_COLUMNS = (  # a pool row: its position and batch, then the `Cleaned` fields
    "seq",
    "batch",
    "task_id",
    "public",
    "reference",
    "metadata",
    "content_sha",
    "input_sha",
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
    known: dict[str, bytes] = dict(
        lookup(db, "task_id, content_sha FROM candidates", "task_id", [c.task_id for c in kept])
    )
    # a duplicate's input was checked when it was admitted: look up the inputs of the new ids
    inputs = _pooled_inputs(
        db, [c.input_sha for c in kept if c.task_id not in known and c.task_id not in excluded]
    )
    rows: list[tuple[Any, ...]] = []
    admitted: dict[str, Cleaned] = {}  # this chunk's retained candidates, not inserted yet
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
            for other_id, reference in inputs.get(item.input_sha, ()):
                if reference != item.reference:
                    raise DataError(
                        "conflicting references: the same public input has two different "
                        f"references, in task {other_id!r} and task {item.task_id!r}"
                    )
            counts["retained"] += 1
            known[item.task_id] = item.content_sha
            admitted[item.task_id] = item
            inputs.setdefault(item.input_sha, []).append((item.task_id, item.reference))
            rows.append((first_seq + len(rows), batch, *item))
    return rows


def _excluded_among(db: sqlite3.Connection, excluding: bool, task_ids: Sequence[str]) -> set[str]:
    """Which of `task_ids` are excluded (no query at all when nothing is)."""
    if not excluding:
        return set()
    return {r[0] for r in lookup(db, "task_id FROM excluded", "task_id", task_ids)}


def _pooled_inputs(
    db: sqlite3.Connection, input_shas: Sequence[bytes]
) -> dict[bytes, list[tuple[str, str]]]:
    """The pooled candidates with one of these input digests: (task id, reference text) each."""
    inputs: dict[bytes, list[tuple[str, str]]] = {}
    for task_id, input_sha, reference in lookup(
        db, "task_id, input_sha, reference FROM candidates", "input_sha", input_shas
    ):
        inputs.setdefault(input_sha, []).append((task_id, reference))
    return inputs


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


def _two_contents(db: sqlite3.Connection, item: Cleaned, earlier: Cleaned | None) -> str:
    """The message for a task id already pooled (or admitted earlier) with other content."""
    if earlier is None:
        public, reference = db.execute(
            "SELECT public, reference FROM candidates WHERE task_id = ?", (item.task_id,)
        ).fetchone()
        old_payload = payload_text(public, reference)
    else:
        old_payload = earlier.payload
    new = DataSample.from_json(json.loads(item.payload))
    old = DataSample.from_json(json.loads(old_payload))
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
