"""Admitting a block of cleaned candidates to the pool: rejected, excluded, duplicate (the same
task id, the same content) or retained, in order, against the pool and the excluded ids.

A task id met again with other content, or a public input met again with another reference, is
a DataError. The workers key every candidate (`Block`): a block costs a few vectorized probes of
the in-memory task-id keys (`KeyIndex`), a lookup of the excluded ids when something is
excluded, and one insert of the retained rows as the workers handed them over, numbered, with
one row of their keys (`pool_keys`). Only candidates whose key is already taken by other
content, or met twice in the block, are looked at one by one, by their texts.
"""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from corpus_assets.core.errors import DataError
from corpus_assets.tasks.cleaned import Block, payload_text, sample_of, task_key
from corpus_assets.tasks.key_index import Int64s, KeyIndex, digest_prefixes

IN_LIMIT = 500  # ids per `IN (...)` lookup (SQLite caps bound parameters)
INSERT_CANDIDATE = (
    "INSERT INTO candidates (seq, batch, task_id, input, metadata, reference) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_KEYS = "INSERT INTO pool_keys (first_seq, keys) VALUES (?, ?)"
COUNTS = ("rejected", "duplicates", "excluded", "retained")
_CANDIDATE = "SELECT task_id, input, metadata, reference FROM candidates WHERE seq = ?"


@dataclass(frozen=True)
class Admission:
    """Which of a block's kept candidates the pool retains (their indexes among the kept, in
    order), their keys, and the block's counts (`COUNTS`)."""

    retained: Int64s
    id_keys: Int64s
    digests: Int64s
    input_keys: Int64s
    counts: dict[str, int]


def admit(db: sqlite3.Connection, index: KeyIndex, excluding: bool, block: Block) -> Admission:
    """Decide each of `block`'s candidates in order. Raises DataError on a conflicting
    reference or a task id that names two different samples (nothing changed)."""
    count = block.count
    id_keys = np.frombuffer(block.id_keys, np.int64)
    digests = digest_prefixes(block.digests, count)
    input_keys = np.frombuffer(block.input_keys, np.int64)
    live = np.ones(count, np.bool_)  # not excluded
    if excluding:
        excluded = _excluded_among(db, block.task_ids)
        live = np.fromiter((t not in excluded for t in block.task_ids), np.bool_, count)
    found, pooled_digests = index.probe(id_keys)
    # the same key and the same digest is the same whole sample, task id included: a duplicate
    duplicate = live & found & (pooled_digests == digests)
    # a pooled key with other content (another task id behind the same key, or a conflict), or
    # a key met twice in this block: decided one by one below, in order
    careful = live & found & ~duplicate
    live_keys = np.sort(id_keys[live])
    repeated = live_keys[1:][live_keys[1:] == live_keys[:-1]]
    if len(repeated):
        careful |= live & _members(id_keys, repeated)
    retain = live & ~duplicate & ~careful
    admitted: dict[str, int] = {}  # task id -> index, of the careful ones retained
    already = duplicate.tolist()
    for i in np.flatnonzero(careful).tolist():
        if already[i]:  # of a pooled sample, whatever else the block holds
            continue
        task_id = block.task_ids[i]
        earlier = admitted.get(task_id)
        if earlier is not None:
            if block.digests[32 * earlier : 32 * earlier + 32] != _digest(block, i):
                raise DataError(_two_contents(db, index, _row(block, i), _row(block, earlier)))
            duplicate[i] = True
            continue
        pooled = _pooled_sha(db, index, task_id) if found[i] else None
        if pooled is not None and pooled != _digest(block, i):
            raise DataError(_two_contents(db, index, _row(block, i), None))
        if pooled is not None:
            duplicate[i] = True
            continue
        admitted[task_id] = i
        retain[i] = True
    retained = np.flatnonzero(retain)
    counts = {
        "rejected": block.size - count,
        "duplicates": int(np.count_nonzero(duplicate)),
        "excluded": count - int(np.count_nonzero(live)),
        "retained": len(retained),
    }
    return Admission(retained, id_keys[retained], digests[retained], input_keys[retained], counts)


def insert(
    db: sqlite3.Connection, batch: int, first_seq: int, block: Block, admission: Admission
) -> None:
    """The retained rows, numbered from `first_seq`, and their keys (one row)."""
    columns: list[Any] = [block.task_ids, block.inputs, block.metadata, block.references]
    retained = admission.retained
    if len(retained) < block.count:
        wanted = np.zeros(block.count, np.bool_)
        wanted[retained] = True
        mask = wanted.tolist()
        columns = [itertools.compress(column, mask) for column in columns]
    db.executemany(
        INSERT_CANDIDATE,
        zip(itertools.count(first_seq), itertools.repeat(batch), *columns),
    )
    if len(retained):
        keys = np.stack((admission.id_keys, admission.digests, admission.input_keys))
        db.execute(INSERT_KEYS, (first_seq, keys.tobytes()))


def load_keys(db: sqlite3.Connection) -> KeyIndex:
    """The in-memory task-id keys of the pool as committed (or as the open group has it)."""
    index = KeyIndex()
    seqs, keys = _stored_keys(db)
    if len(seqs):
        index.add(keys[0], keys[1], seqs)
    return index


def _stored_keys(db: sqlite3.Connection) -> tuple[Int64s, Int64s]:
    """Every pooled candidate's pool position, and its (task-id key, digest prefix, input
    key) as the three rows of one array, in pool order."""
    seqs: list[Int64s] = []
    keys: list[Int64s] = []
    for first_seq, data in db.execute("SELECT first_seq, keys FROM pool_keys ORDER BY first_seq"):
        part = np.frombuffer(data, np.int64).reshape(3, -1)
        seqs.append(np.arange(first_seq, first_seq + part.shape[1], dtype=np.int64))
        keys.append(part)
    if not seqs:
        return np.zeros(0, np.int64), np.zeros((3, 0), np.int64)
    return np.concatenate(seqs), np.concatenate(keys, axis=1)


def _members(values: Int64s, sorted_keys: Int64s) -> npt.NDArray[np.bool_]:
    """Which of `values` are among `sorted_keys` (sorted, repeats allowed): a binary search
    each (np.isin and np.unique would import numpy.ma on their first call, 17 ms)."""
    if not len(sorted_keys):
        return np.zeros(len(values), np.bool_)
    at = np.minimum(np.searchsorted(sorted_keys, values), len(sorted_keys) - 1)
    found: npt.NDArray[np.bool_] = sorted_keys[at] == values
    return found


def _excluded_among(db: sqlite3.Connection, task_ids: Sequence[str]) -> set[str]:
    """Which of `task_ids` are excluded."""
    return {r[0] for r in lookup(db, "task_id FROM excluded", "task_id", task_ids)}


def _digest(block: Block, i: int) -> bytes:
    return block.digests[32 * i : 32 * i + 32]


def _row(block: Block, i: int) -> tuple[str, str, str, str]:
    return block.task_ids[i], block.inputs[i], block.metadata[i], block.references[i]


def input_conflict(db: sqlite3.Connection, batch_start: int) -> str | None:
    """The message for the first candidate from pool position `batch_start` on (a batch's)
    whose public input an earlier candidate has with another reference, naming both; None when
    there is none.

    Run once per generated batch, before it is marked done, instead of an input index that
    every block's insert would pay for: the stored input keys find the keys that more than one
    candidate has, one of them in the batch (few: a task id is usually made from its input);
    those candidates are read and compared by their texts, key by key in pool order."""
    seqs, keys = _stored_keys(db)
    if not len(seqs):
        return None
    input_keys = keys[2]
    order = np.argsort(input_keys, kind="stable")  # pool order within a key
    sorted_keys = input_keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    sizes = np.diff(np.r_[starts, len(sorted_keys)])
    last_seq = np.maximum.reduceat(seqs[order], starts)
    shared = starts[(sizes > 1) & (last_seq >= batch_start)]
    wanted = _members(input_keys, sorted_keys[shared])
    positions = seqs[wanted].tolist()
    texts = {
        seq: (task_id, task_input, reference)
        for seq, task_id, task_input, reference in lookup(
            db, "seq, task_id, input, reference FROM candidates", "seq", positions
        )
    }
    first: tuple[int, str, str] | None = None  # (seq, earlier id, id) of the first conflict
    group: int | None = None
    seen: dict[str, list[tuple[str, str]]] = {}  # per input: (reference, first task id) each
    for input_key, seq in sorted(zip(input_keys[wanted].tolist(), positions, strict=True)):
        task_id, task_input, reference = texts[seq]
        if input_key != group:
            group, seen = input_key, {}
        references = seen.setdefault(task_input, [])
        other = next((t for r, t in references if r != reference), None)
        if other is not None and seq >= batch_start and (first is None or seq < first[0]):
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


def pooled_ids(db: sqlite3.Connection, index: KeyIndex, task_ids: Sequence[str]) -> set[str]:
    """Which of `task_ids` are pooled candidates (found by key, compared by text)."""
    wanted = set(task_ids)
    positions = [seq for t in wanted for seq in index.positions(task_key(t))]
    return {r[0] for r in lookup(db, "task_id FROM candidates", "seq", positions)} & wanted


def pooled_row(
    db: sqlite3.Connection, index: KeyIndex, task_id: str
) -> tuple[str, str, str, str] | None:
    """A pooled candidate's (task id, input, metadata, reference) texts, or None."""
    for seq in index.positions(task_key(task_id)):
        row = db.execute(_CANDIDATE, (seq,)).fetchone()
        if row is not None and row[0] == task_id:
            return row[0], row[1], row[2], row[3]
    return None


def _pooled_sha(db: sqlite3.Connection, index: KeyIndex, task_id: str) -> bytes | None:
    """The content digest of a pooled task id, or None."""
    row = pooled_row(db, index, task_id)
    return None if row is None else hashlib.sha256(payload_text(*row).encode("utf-8")).digest()


def _two_contents(
    db: sqlite3.Connection,
    index: KeyIndex,
    item: tuple[str, str, str, str],
    earlier: tuple[str, str, str, str] | None,
) -> str:
    """The message for a task id already pooled (or admitted earlier) with other content."""
    old_fields = pooled_row(db, index, item[0]) if earlier is None else earlier
    assert old_fields is not None  # the id was found in the pool
    new = sample_of(*item)
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
