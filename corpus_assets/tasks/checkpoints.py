"""`work/checkpoints.sqlite3`: the durable state of a data job.

One connection, owned by the coordinator thread, in WAL mode with `synchronous=FULL`: a chunk of
cleaned candidates, its batch's progress and its counts are written together, in a group of
chunks that one commit makes durable (`commit_chunk`, `flush`), so a process killed at any
instant resumes from the last committed chunk. Chunk admission is `admission.py`; the read-only
views of the pool are `pool_views.py`. Calibration commits each finished
call's responses with its provenance, then each graded chunk's scores, the same way; ranking
chunks likewise. Candidate payloads, their keys and the excluded ids live here on disk (the
task-id keys also in memory, 24 bytes per candidate: `key_index.py`); `CandidatePool` and
`ScoreTable` give `select` a sequence and a mapping backed by the database, never a whole list
in memory.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus_assets.core.errors import DataError
from corpus_assets.tasks.admission import (
    COUNTS,
    admit,
    input_conflict,
    insert,
    load_keys,
    lookup,
    pooled_ids,
    pooled_row,
)
from corpus_assets.tasks.cleaned import (
    Block,
    Cleaned,
    canonical,
    payload_text,
    public_text,
    sample_of,
)
from corpus_assets.tasks.files import PRIVATE_FILE
from corpus_assets.tasks.pool_views import PAGE, BatchTaskIds, CandidatePool, ScoreTable
from corpus_assets.tasks.ranking import RankedCandidate, RankingTable
from corpus_assets.tasks.types import JSON, DataSample, ProjectedRow

__all__ = [  # with the names other modules import from here
    "BatchState",
    "BatchTaskIds",
    "Block",
    "CandidatePool",
    "Checkpoints",
    "Cleaned",
    "ScoreTable",
    "canonical",
]

SCHEMA_VERSION = 4
"""The pool's layout, in the database's user_version (a database of version 1 has 0 there)."""


class StaleCheckpoints(DataError):
    """A checkpoint database of another schema version (exit 65)."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    batch INTEGER PRIMARY KEY,
    consumed INTEGER NOT NULL DEFAULT 0,
    done INTEGER NOT NULL DEFAULT 0,
    truncated INTEGER NOT NULL DEFAULT 0,
    rejected INTEGER NOT NULL DEFAULT 0,
    duplicates INTEGER NOT NULL DEFAULT 0,
    excluded INTEGER NOT NULL DEFAULT 0,
    retained INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS candidates (
    seq INTEGER PRIMARY KEY,
    batch INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    input TEXT NOT NULL,
    metadata TEXT NOT NULL,
    reference TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pool_keys (first_seq INTEGER PRIMARY KEY, keys BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS excluded (task_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS scores (
    task_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    score REAL,
    PRIMARY KEY (task_id, repeat)
);
CREATE TABLE IF NOT EXISTS calls (
    batch INTEGER NOT NULL,
    first INTEGER NOT NULL,
    provenance TEXT NOT NULL,
    PRIMARY KEY (batch, first)
);
CREATE TABLE IF NOT EXISTS responses (
    task_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    batch INTEGER NOT NULL,
    response TEXT NOT NULL,
    failure_reason TEXT,
    PRIMARY KEY (task_id, repeat)
);
CREATE TABLE IF NOT EXISTS projection (
    row INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    public TEXT NOT NULL,
    reference TEXT NOT NULL,
    train TEXT NOT NULL
);
"""

WAL_CHECKPOINT_PAGES = 10_000


@dataclass(frozen=True)
class BatchState:
    """A batch's committed progress: samples consumed from `generate`, and the counts."""

    batch: int
    consumed: int
    done: bool
    truncated: bool
    rejected: int
    duplicates: int
    excluded: int
    retained: int

    def counts(self) -> dict[str, int]:
        """Generated, rejected, duplicates, excluded and retained, as the report shows them."""
        return {"batch": self.batch, "generated": self.consumed} | {
            name: getattr(self, name) for name in COUNTS
        }


class Checkpoints:
    """The job's SQLite database; every method runs on the thread that opened it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        new = not path.exists()
        self.db = sqlite3.connect(path, isolation_level=None)
        if new:
            path.chmod(PRIVATE_FILE)  # the -wal and -shm files take the database's mode
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        # the pool's payloads pass through the WAL: copy them into the database every 10,000
        # pages (about 40 MB) rather than every 1,000 (the default), a tenth of the passes
        self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        self._check_schema()
        self.db.executescript(_SCHEMA)
        self._next_seq = self._pool_size()
        self._keys = load_keys(self.db)
        self.flushed_at = time.monotonic()  # when chunks were last made durable
        self._excluding = self.excluded_count() > 0
        self._ranking: RankingTable | None = None

    def close(self) -> None:
        self.db.close()

    def _check_schema(self) -> None:
        """Stamp a new database with SCHEMA_VERSION; refuse one of another version (its tables
        hold other columns: a resume would fail midway or misread them)."""
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if not tables:
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION:
            self.db.close()
            raise StaleCheckpoints(
                f"{self.path} holds checkpoints of schema version {version or 1}, this version "
                f"of corpus_assets reads version {SCHEMA_VERSION}: resume the job with the "
                "version that started it, or run it again in a new folder"
            )

    # -- meta ------------------------------------------------------------------------------

    def get(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        with self.transaction():
            self._put(key, value)

    def _put(self, key: str, value: Any) -> None:
        self.db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, canonical(value)),
        )

    def transaction(self) -> _Transaction:
        """`with` it: one atomic write, after the open group of chunks is committed."""
        self.flush()
        return _Transaction(self.db)

    # -- exclusions ------------------------------------------------------------------------

    def load_exclusions(self, task_ids: Iterator[str]) -> None:
        """Store the excluded ids once (the job's identity pins the files they come from)."""
        with self.transaction():
            self.db.execute("DELETE FROM excluded")
            self.db.executemany(
                "INSERT OR IGNORE INTO excluded (task_id) VALUES (?)", ((t,) for t in task_ids)
            )
        self._excluding = self.excluded_count() > 0

    def excluded_count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM excluded").fetchone()[0])

    # -- batches ---------------------------------------------------------------------------

    def batch(self, batch: int) -> BatchState:
        row = self.db.execute(
            "SELECT batch, consumed, done, truncated, rejected, duplicates, excluded, retained "
            "FROM batches WHERE batch = ?",
            (batch,),
        ).fetchone()
        if row is None:
            return BatchState(batch, 0, False, False, 0, 0, 0, 0)
        b, consumed, done, truncated, *counts = row
        return BatchState(b, consumed, bool(done), bool(truncated), *counts)

    def batches(self) -> list[BatchState]:
        ids = [r[0] for r in self.db.execute("SELECT batch FROM batches ORDER BY batch")]
        return [self.batch(b) for b in ids]

    def commit_chunk(
        self,
        batch: int,
        consumed: int,
        block: Block,
        durable: bool = True,
    ) -> dict[str, int]:
        """Admit one chunk's cleaned samples in order and advance the batch, atomically.

        Returns the chunk's counts. Raises DataError (nothing of the chunk written) on a
        conflicting reference or a task id that names two different samples. `durable=False`
        leaves the chunk in the open group of chunks that the next `flush` commits at once (one
        fsync for them all); a kill before that, or a failed write, loses the whole group, as
        if the process had been killed after the last commit, and the job resumes from there.
        """
        first_seq = self._next_seq
        if not self.db.in_transaction:
            self.db.execute("BEGIN IMMEDIATE")
        try:
            admission = admit(self.db, self._keys, self._excluding, block)
        except BaseException:  # admission only reads: the group so far stays whole
            if durable:
                self.flush()
            raise
        try:
            insert(self.db, batch, first_seq, block, admission)
            self._advance(batch, consumed, admission.counts)
        except BaseException:
            self._abandon_group()
            raise
        retained = len(admission.retained)
        self._keys.add(
            admission.id_keys,
            admission.digests,
            np.arange(first_seq, first_seq + retained, dtype=np.int64),
        )
        self._next_seq = first_seq + retained
        if durable:
            self.flush()
        return admission.counts

    def _abandon_group(self) -> None:
        """Roll the open group back: the pool is what the last commit left."""
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
        self._next_seq = self._pool_size()
        self._keys = load_keys(self.db)

    def flush(self) -> None:
        """Commit the open group of chunks, if any: durable from now on."""
        self.flushed_at = time.monotonic()
        if not self.db.in_transaction:
            return
        try:
            self.db.execute("COMMIT")
        except BaseException:
            self._abandon_group()
            raise

    def _pool_size(self) -> int:
        """The retained candidates of every batch (a sum over batches, not a count of rows)."""
        return int(self.db.execute("SELECT COALESCE(SUM(retained), 0) FROM batches").fetchone()[0])

    def _advance(self, batch: int, consumed: int, counts: dict[str, int]) -> None:
        """Set the batch's consumed count and add `counts` to its counts (one statement)."""
        added = ", ".join(f"{c} = batches.{c} + excluded.{c}" for c in COUNTS)
        self.db.execute(
            f"INSERT INTO batches (batch, consumed, {', '.join(COUNTS)}) VALUES (?, ?, ?, ?, ?, ?) "
            f"ON CONFLICT (batch) DO UPDATE SET consumed = excluded.consumed, {added}",
            (batch, consumed, *(counts[c] for c in COUNTS)),
        )

    def finish_batch(self, batch: int, consumed: int, truncated: bool) -> None:
        """Mark a batch generated and cleaned to its end (`truncated`: cut by max_candidates).
        Raises DataError when one of its candidates has the public input of an earlier one with
        another reference (the batch stays unfinished)."""
        self.flush()
        conflict = input_conflict(self.db, self.batch_range(batch)[0])
        if conflict is not None:
            raise DataError(conflict)
        with self.transaction():
            self._advance(batch, consumed, dict.fromkeys(COUNTS, 0))
            self.db.execute(
                "UPDATE batches SET done = 1, truncated = ? WHERE batch = ?",
                (int(truncated), batch),
            )

    def batch_range(self, batch: int) -> tuple[int, int]:
        """The pool positions of a batch's retained candidates: `start <= seq < stop`. Batches
        are generated one after the other, so each one's candidates are numbered
        consecutively after the earlier batches'."""
        start, stop = self.db.execute(
            "SELECT COALESCE(SUM(retained) FILTER (WHERE batch < ?), 0), "
            "COALESCE(SUM(retained) FILTER (WHERE batch <= ?), 0) FROM batches",
            (batch, batch),
        ).fetchone()
        return int(start), int(stop)

    def generated_total(self) -> int:
        return int(self.db.execute("SELECT COALESCE(SUM(consumed), 0) FROM batches").fetchone()[0])

    # -- the pool --------------------------------------------------------------------------

    def pool(self) -> CandidatePool:
        return CandidatePool(self.db, self._pool_size())

    def scores(self) -> ScoreTable:
        return ScoreTable(self.db)

    def first_unknown(self, task_ids: Sequence[str]) -> str | None:
        """The first of `task_ids` that is not a pooled candidate (looked up, not loaded)."""
        known = pooled_ids(self.db, self._keys, task_ids)
        return next((t for t in task_ids if t not in known), None)

    def samples_by_id(self, task_ids: Sequence[str]) -> list[DataSample]:
        """The pooled samples for `task_ids`, in that order (KeyError names a missing id)."""
        out = []
        for task_id in task_ids:
            row = pooled_row(self.db, self._keys, task_id)
            if row is None:
                raise KeyError(task_id)
            out.append(sample_of(*row))
        return out

    def batch_payload_pages(self, batch: int) -> Iterator[list[tuple[str, str]]]:
        """One batch's retained candidates in pool order, a page at a time: (whole sample,
        public task) JSON."""
        cursor = self.db.execute(
            "SELECT task_id, input, metadata, reference FROM candidates "
            "WHERE seq >= ? AND seq < ? ORDER BY seq",
            self.batch_range(batch),
        )
        while rows := cursor.fetchmany(PAGE):
            yield [(payload_text(*row), public_text(*row[:3])) for row in rows]

    def seq_pages(
        self, batch: int, size: int, without: str | None = None, skip: int = 0
    ) -> Iterator[list[int]]:
        """The pool positions of a batch's candidates in order, `size` at a time, after the
        first `skip`; `without` leaves out those that already have `responses` or `scores`
        (repeat 0 is written with every other repeat). Each page is its own query after the
        last position seen, so commits between pages are safe and no batch-sized list is held."""
        where = ""
        if without is not None:
            table = {"responses": "responses", "scores": "scores"}[without]
            where = (
                f"AND NOT EXISTS (SELECT 1 FROM {table} t "
                "WHERE t.task_id = c.task_id AND t.repeat = 0)"
            )
        start, stop = self.batch_range(batch)
        last = start + skip - 1
        while True:
            page = [
                int(r[0])
                for r in self.db.execute(
                    f"SELECT seq FROM candidates c WHERE seq > ? AND seq < ? {where} "
                    "ORDER BY seq LIMIT ?",
                    (last, stop, size),
                )
            ]
            if not page:
                return
            yield page
            last = page[-1]

    def candidate_rows(self, seqs: Sequence[int], column: str) -> list[str]:
        """`payload` (whole sample) or `public` (public task) JSON of the candidates at `seqs`."""
        if column not in ("payload", "public"):
            raise ValueError(f"no candidate column {column!r}")
        text = public_text if column == "public" else payload_text
        found = {
            seq: text(*fields)
            for seq, *fields in lookup(
                self.db,
                "seq, task_id, input, metadata"
                + (", reference" if column == "payload" else "")
                + " FROM candidates",
                "seq",
                seqs,
            )
        }
        return [found[s] for s in seqs]

    def batch_task_ids(self, batch: int) -> BatchTaskIds:
        """A batch's retained task ids in pool order (`work/batch-N-candidates.jsonl`), read
        from the database on demand."""
        return BatchTaskIds(self.db, *self.batch_range(batch))

    def commit_call(
        self,
        batch: int,
        first: int,
        attempts: Sequence[tuple[str, int, str, str | None]],
        provenance: str,
    ) -> None:
        """One finished calibrator call (its first task at pool position `first`): its
        (task_id, repeat, response JSON, failure reason) rows and provenance, atomically."""
        with self.transaction():
            self.db.execute(
                "INSERT INTO calls (batch, first, provenance) VALUES (?, ?, ?)",
                (batch, first, provenance),
            )
            self.db.executemany(
                "INSERT INTO responses (task_id, repeat, batch, response, failure_reason) "
                "VALUES (?, ?, ?, ?, ?)",
                ((t, r, batch, response, reason) for t, r, response, reason in attempts),
            )

    def calls(self, batch: int | None = None) -> int:
        """How many calibrator calls were committed (in one batch, or in all)."""
        if batch is None:
            return int(self.db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])
        return int(
            self.db.execute("SELECT COUNT(*) FROM calls WHERE batch = ?", (batch,)).fetchone()[0]
        )

    def batch_provenance(self, batch: int) -> list[JSON]:
        """The distinct provenances of a batch's calls, in pool order of their first task."""
        seen: dict[str, None] = {}
        for (text,) in self.db.execute(
            "SELECT provenance FROM calls WHERE batch = ? ORDER BY first", (batch,)
        ):
            seen.setdefault(text, None)
        return [json.loads(text) for text in seen]

    def responses(self, task_ids: Sequence[str]) -> dict[str, list[tuple[JSON, str | None]]]:
        """Per task id its (response, failure reason) per repeat, in repeat order."""
        out: dict[str, list[tuple[int, JSON, str | None]]] = {}
        for task_id, repeat, response, reason in lookup(
            self.db, "task_id, repeat, response, failure_reason FROM responses", "task_id", task_ids
        ):
            out.setdefault(task_id, []).append((repeat, json.loads(response), reason))
        return {t: [(r, f) for _, r, f in sorted(rows)] for t, rows in out.items()}

    def scores_of(self, task_ids: Sequence[str]) -> dict[str, tuple[float | None, ...]]:
        """Per task id that has scores, one per repeat in repeat order."""
        rows: dict[str, list[tuple[int, float | None]]] = {}
        for task_id, repeat, score in lookup(
            self.db, "task_id, repeat, score FROM scores", "task_id", task_ids
        ):
            rows.setdefault(task_id, []).append((repeat, score))
        return {t: tuple(s for _, s in sorted(per)) for t, per in rows.items()}

    def commit_scores(self, scores: Sequence[tuple[str, int, float | None]]) -> None:
        """One graded chunk's (task_id, repeat, score), atomically."""
        with self.transaction():
            self.db.executemany(
                "INSERT INTO scores (task_id, repeat, score) VALUES (?, ?, ?)", scores
            )

    def calibration_counts(self, batch: int) -> dict[str, int]:
        """Per batch: tasks calibrated, attempts, failed attempts, correct (score 1.0) attempts."""
        tasks, attempts, failed = self.db.execute(
            "SELECT COUNT(DISTINCT task_id), COUNT(*), COUNT(failure_reason) FROM responses "
            "WHERE batch = ?",
            (batch,),
        ).fetchone()
        return {"calibrated": tasks, "attempts": attempts, "failed_attempts": failed}

    def probe_rows(self) -> Iterator[dict[str, JSON]]:
        """Per selected task (projection order) and repeat: response, failure reason, score."""
        cursor = self.db.execute(
            "SELECT p.task_id, r.repeat, r.response, r.failure_reason, s.score "
            "FROM projection p JOIN responses r ON r.task_id = p.task_id "
            "LEFT JOIN scores s ON s.task_id = r.task_id AND s.repeat = r.repeat "
            "ORDER BY p.row, r.repeat"
        )
        while rows := cursor.fetchmany(PAGE):
            for task_id, repeat, response, reason, score in rows:
                yield {
                    "task_id": task_id,
                    "repeat": repeat,
                    "response": json.loads(response),
                    "failure_reason": reason,
                    "score": score,
                }

    # -- ranking ---------------------------------------------------------------------------

    def ranking(self) -> RankingTable:
        """The ranked eligible candidates (created on first use)."""
        if self._ranking is None:
            self._ranking = RankingTable(self.db)
        return self._ranking

    def ranked(self, batch: int) -> int:
        """How many of a batch's candidates (in pool order) were ranked."""
        return int(self.get(f"ranked:{batch}") or 0)

    def commit_ranking(self, batch: int, ranked: int, eligible: Sequence[RankedCandidate]) -> None:
        """One ranking chunk: its eligible candidates and the batch's ranked count, atomically."""
        table = self.ranking()
        with self.transaction():
            table.insert(eligible)
            self._put(f"ranked:{batch}", ranked)

    def eligible(self) -> int:
        """How many ranked candidates are eligible (in the ranking table)."""
        table = self.ranking().table
        return int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    # -- projection ------------------------------------------------------------------------

    def projected(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM projection").fetchone()[0])

    def commit_projection(self, start: int, rows: Sequence[ProjectedRow]) -> None:
        """One projection chunk: rows `start ..` of (public, reference, train), atomically."""
        with self.transaction():
            self.db.executemany(
                "INSERT INTO projection (row, task_id, public, reference, train) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    (start + i, public["task_id"], canonical(public), canonical(ref), canonical(t))
                    for i, (public, ref, t) in enumerate(rows)
                ),
            )

    def projection_rows(self) -> Iterator[ProjectedRow]:
        cursor = self.db.execute("SELECT public, reference, train FROM projection ORDER BY row")
        while rows := cursor.fetchmany(PAGE):
            for public, ref, train in rows:
                yield json.loads(public), json.loads(ref), json.loads(train)


class _Transaction:
    """`with`: BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
