"""`work/checkpoints.sqlite3`: the durable state of a data job.

One connection, owned by the coordinator thread, in WAL mode with `synchronous=FULL`: a chunk of
cleaned candidates, its batch's progress and its counts commit in one transaction, so a process
killed at any instant resumes from the last committed chunk. Calibration commits each finished
call's responses with its provenance, then each graded chunk's scores, the same way; ranking
chunks likewise. Candidate payloads, the dedup indexes and the excluded ids live here on disk;
`CandidatePool` and `ScoreTable` give `select` a sequence and a mapping backed by the database,
never a whole list in memory.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, overload

from corpus_assets.core.errors import DataError
from corpus_assets.tasks.files import PRIVATE_FILE
from corpus_assets.tasks.ranking import RankedCandidate, RankingTable
from corpus_assets.tasks.types import JSON, DataSample, ProjectedRow

SCHEMA_VERSION = 1
PAGE = 512  # rows fetched per round trip when streaming the pool

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
    task_id TEXT NOT NULL UNIQUE,
    batch INTEGER NOT NULL,
    content_sha TEXT NOT NULL,
    input_sha TEXT NOT NULL,
    reference_sha TEXT NOT NULL,
    payload TEXT NOT NULL,
    public TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS candidates_input ON candidates (input_sha);
CREATE INDEX IF NOT EXISTS candidates_batch ON candidates (batch, seq);
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

COUNTS = ("rejected", "duplicates", "excluded", "retained")
WAL_CHECKPOINT_PAGES = 10_000
IN_LIMIT = 500  # ids per `IN (...)` lookup (SQLite caps bound parameters)
_CANONICAL = json.JSONEncoder(  # one encoder: json.dumps builds one per call with these options
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical(obj: JSON) -> str:
    """The one canonical JSON text of a value (sorted keys, no spaces, UTF-8 unescaped): the
    text of `jsonl_line(obj)` without its newline."""
    return _CANONICAL.encode(obj)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Cleaned(NamedTuple):
    """A cleaned sample as the pool stores it, encoded and hashed where it was cleaned.

    Workers build these, so the coordinator's commit does lookups and inserts only.
    """

    task_id: str
    payload: str  # canonical JSON of the whole sample (reference included)
    public: str  # canonical JSON of the public task (`batch-N-public.jsonl`)
    content_sha: str
    input_sha: str
    reference_sha: str

    @classmethod
    def of(cls, sample: DataSample) -> Cleaned:
        """Each field encoded once: the payload and the public task are the canonical texts of
        their fields joined in sorted key order, which is `canonical` of the whole object."""
        task = sample.task
        task_input, reference = canonical(task.input), canonical(sample.reference)
        head = f'{{"input":{task_input},"metadata":{canonical(dict(task.metadata))},'
        tail = f'"task_id":{canonical(task.task_id)}}}'
        payload = f'{head}"reference":{reference},{tail}'
        return cls(
            task.task_id, payload, head + tail, _sha(payload), _sha(task_input), _sha(reference)
        )


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
        self.db.executescript(_SCHEMA)
        self._next_seq = int(self.db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0])
        self._ranking: RankingTable | None = None

    def close(self) -> None:
        self.db.close()

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
        return _Transaction(self.db)

    # -- exclusions ------------------------------------------------------------------------

    def load_exclusions(self, task_ids: Iterator[str]) -> None:
        """Store the excluded ids once (the job's identity pins the files they come from)."""
        with self.transaction():
            self.db.execute("DELETE FROM excluded")
            self.db.executemany(
                "INSERT OR IGNORE INTO excluded (task_id) VALUES (?)", ((t,) for t in task_ids)
            )

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
        self, batch: int, consumed: int, cleaned: Sequence[Cleaned | None]
    ) -> dict[str, int]:
        """Admit one chunk's cleaned samples in order and advance the batch, atomically.

        Returns the chunk's counts. Raises DataError (rolled back) on a conflicting reference
        or a task id that names two different samples.
        """
        counts = dict.fromkeys(COUNTS, 0)
        first_seq = self._next_seq
        try:
            with self.transaction():
                rows = self._admit(batch, cleaned, counts)
                self.db.executemany(
                    "INSERT INTO candidates (seq, task_id, batch, content_sha, input_sha, "
                    "reference_sha, payload, public) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._advance(batch, consumed, counts)
        except BaseException:
            self._next_seq = first_seq
            raise
        return counts

    def _advance(self, batch: int, consumed: int, counts: dict[str, int]) -> None:
        self.db.execute(
            "INSERT INTO batches (batch, consumed) VALUES (?, ?) ON CONFLICT (batch) "
            "DO UPDATE SET consumed = excluded.consumed",
            (batch, consumed),
        )
        self.db.execute(
            "UPDATE batches SET rejected = rejected + ?, duplicates = duplicates + ?, "
            "excluded = excluded + ?, retained = retained + ? WHERE batch = ?",
            (*(counts[c] for c in COUNTS), batch),
        )

    def finish_batch(self, batch: int, consumed: int, truncated: bool) -> None:
        """Mark a batch generated and cleaned to its end (`truncated`: cut by max_candidates)."""
        with self.transaction():
            self._advance(batch, consumed, dict.fromkeys(COUNTS, 0))
            self.db.execute(
                "UPDATE batches SET done = 1, truncated = ? WHERE batch = ?",
                (int(truncated), batch),
            )

    def generated_total(self) -> int:
        return int(self.db.execute("SELECT COALESCE(SUM(consumed), 0) FROM batches").fetchone()[0])

    def _admit(
        self, batch: int, cleaned: Sequence[Cleaned | None], counts: dict[str, int]
    ) -> list[tuple[Any, ...]]:
        """Count each sample in order and return the pool rows of the retained ones."""
        kept = [c for c in cleaned if c is not None]
        ids = [c.task_id for c in kept]
        excluded = {r[0] for r in self._lookup("task_id FROM excluded", "task_id", ids)}
        known = {
            task_id: content_sha
            for task_id, content_sha in self._lookup(
                "task_id, content_sha FROM candidates", "task_id", ids
            )
        }
        inputs: dict[str, list[tuple[str, str]]] = {}
        for task_id, input_sha, reference_sha in self._lookup(
            "task_id, input_sha, reference_sha FROM candidates",
            "input_sha",
            [c.input_sha for c in kept],
        ):
            inputs.setdefault(input_sha, []).append((task_id, reference_sha))
        rows = []
        admitted: dict[str, str] = {}  # this chunk's retained payloads, not inserted yet
        for item in cleaned:
            if item is None:
                counts["rejected"] += 1
            elif item.task_id in excluded:
                counts["excluded"] += 1
            elif item.task_id in known:
                if known[item.task_id] != item.content_sha:
                    raise DataError(self._two_contents(item, admitted.get(item.task_id)))
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
                rows.append(
                    (
                        self._next_seq,
                        item.task_id,
                        batch,
                        item.content_sha,
                        item.input_sha,
                        item.reference_sha,
                        item.payload,
                        item.public,
                    )
                )
                self._next_seq += 1
        return rows

    def _lookup(self, select: str, column: str, values: Sequence[Any]) -> Iterator[Any]:
        """`SELECT <select> WHERE <column> IN values`, in slices SQLite accepts."""
        distinct = sorted(set(values))
        for start in range(0, len(distinct), IN_LIMIT):
            part = distinct[start : start + IN_LIMIT]
            marks = ",".join("?" * len(part))
            yield from self.db.execute(f"SELECT {select} WHERE {column} IN ({marks})", part)

    def _two_contents(self, item: Cleaned, earlier: str | None) -> str:
        """The message for a task id already pooled (or admitted earlier) with other content."""
        if earlier is None:
            earlier = self.db.execute(
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

    # -- the pool --------------------------------------------------------------------------

    def pool(self) -> CandidatePool:
        return CandidatePool(self.db)

    def scores(self) -> ScoreTable:
        return ScoreTable(self.db)

    def first_unknown(self, task_ids: Sequence[str]) -> str | None:
        """The first of `task_ids` that is not a pooled candidate (looked up, not loaded)."""
        known = {r[0] for r in self._lookup("task_id FROM candidates", "task_id", task_ids)}
        return next((t for t in task_ids if t not in known), None)

    def samples_by_id(self, task_ids: Sequence[str]) -> list[DataSample]:
        """The pooled samples for `task_ids`, in that order (KeyError names a missing id)."""
        out = []
        for task_id in task_ids:
            row = self.db.execute(
                "SELECT payload FROM candidates WHERE task_id = ?", (task_id,)
            ).fetchone()
            if row is None:
                raise KeyError(task_id)
            out.append(DataSample.from_json(json.loads(row[0])))
        return out

    def batch_payloads(self, batch: int) -> Iterator[tuple[str, str]]:
        """One batch's retained candidates in pool order: (whole sample, public task) JSON."""
        cursor = self.db.execute(
            "SELECT payload, public FROM candidates WHERE batch = ? ORDER BY seq", (batch,)
        )
        while rows := cursor.fetchmany(PAGE):
            yield from rows

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
        last = -1
        if skip:
            row = self.db.execute(
                "SELECT seq FROM candidates WHERE batch = ? ORDER BY seq LIMIT 1 OFFSET ?",
                (batch, skip - 1),
            ).fetchone()
            if row is None:
                return
            last = int(row[0])
        while True:
            page = [
                int(r[0])
                for r in self.db.execute(
                    f"SELECT seq FROM candidates c WHERE batch = ? AND seq > ? {where} "
                    "ORDER BY seq LIMIT ?",
                    (batch, last, size),
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
        found = dict(self._lookup(f"seq, {column} FROM candidates", "seq", seqs))
        return [found[s] for s in seqs]

    def batch_task_ids(self, batch: int) -> BatchTaskIds:
        """A batch's retained task ids in pool order (`work/batch-N-candidates.jsonl`), read
        from the database on demand."""
        return BatchTaskIds(self.db, batch)

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
        for task_id, repeat, response, reason in self._lookup(
            "task_id, repeat, response, failure_reason FROM responses", "task_id", task_ids
        ):
            out.setdefault(task_id, []).append((repeat, json.loads(response), reason))
        return {t: [(r, f) for _, r, f in sorted(rows)] for t, rows in out.items()}

    def scores_of(self, task_ids: Sequence[str]) -> dict[str, tuple[float | None, ...]]:
        """Per task id that has scores, one per repeat in repeat order."""
        rows: dict[str, list[tuple[int, float | None]]] = {}
        for task_id, repeat, score in self._lookup(
            "task_id, repeat, score FROM scores", "task_id", task_ids
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


class CandidatePool(Sequence[DataSample]):
    """The retained candidates in pool order, read from the database on demand."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._len = int(db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0])

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
        row = self._db.execute("SELECT payload FROM candidates WHERE seq = ?", (index,)).fetchone()
        return DataSample.from_json(json.loads(row[0]))

    def __iter__(self) -> Iterator[DataSample]:
        cursor = self._db.execute(
            "SELECT payload FROM candidates WHERE seq < ? ORDER BY seq", (self._len,)
        )
        while rows := cursor.fetchmany(PAGE):
            for (payload,) in rows:
                yield DataSample.from_json(json.loads(payload))


class BatchTaskIds(Sequence[str]):
    """One batch's retained task ids in pool order, read a page at a time (use it on the
    thread that made it: the coordinator's)."""

    def __init__(self, db: sqlite3.Connection, batch: int) -> None:
        self._db, self._batch = db, batch
        self._len = int(
            db.execute("SELECT COUNT(*) FROM candidates WHERE batch = ?", (batch,)).fetchone()[0]
        )

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
            "SELECT task_id FROM candidates WHERE batch = ? ORDER BY seq LIMIT 1 OFFSET ?",
            (self._batch, index),
        ).fetchone()
        return str(row[0])

    def __iter__(self) -> Iterator[str]:
        last = -1
        while True:
            rows = self._db.execute(
                "SELECT seq, task_id FROM candidates WHERE batch = ? AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (self._batch, last, PAGE),
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
