"""Ranked selection: the global merge of ranked candidates, in memory or on disk.

A recipe's `rank(sample, scores, context)` gives each eligible candidate a `RankedCandidate`;
the rank order is (priority, tie_breaker, task_id), lowest first. `select_ranked_candidates`
fills the policy's group minima in the policy's insertion order, then the remaining slots
globally by rank, never exceeding a bucket's cap and never taking an id twice. It reads the
candidates through an `OrderedRows` provider: `InMemoryRanking` sorts a list, `RankingTable`
keeps them in SQLite with an index per order, so a pool on disk is never loaded whole. Both
give the same result (tests/tasks/test_ranking.py checks it on random pools).

The executor ranks in worker chunks (`workers.rank_chunk`) into a `RankingTable` and calls this
for recipes with the `selection_policy`, `rank` and `finalize_selection` hooks.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from corpus_assets.tasks.types import JSON

PAGE = 512


@dataclass(frozen=True)
class RankedCandidate:
    """One eligible candidate's place: lower `priority` first, then `tie_breaker`, `task_id`."""

    task_id: str
    priority: float
    tie_breaker: str = ""
    group: str = ""
    bucket: str = ""
    metadata: Mapping[str, JSON] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.priority, bool) or not isinstance(self.priority, int | float):
            raise ValueError(f"rank of {self.task_id!r}: priority must be a number")
        if not math.isfinite(self.priority):
            raise ValueError(
                f"rank of {self.task_id!r}: priority must be finite, got {self.priority}"
            )
        for name in ("task_id", "tie_breaker", "group", "bucket"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"rank of {self.task_id!r}: {name} must be a string")
        if not isinstance(self.metadata, Mapping) or not _string_keys(self.metadata):
            raise ValueError(
                f"rank of {self.task_id!r}: metadata must be a JSON object (string keys at "
                "every level)"
            )
        try:
            json.dumps(dict(self.metadata), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"rank of {self.task_id!r}: metadata is not JSON: {exc}") from None

    def order(self) -> tuple[float, str, str]:
        return (float(self.priority), self.tie_breaker, self.task_id)


@dataclass(frozen=True)
class SelectionPolicy:
    """Minimum picks per group (filled in this mapping's order) and a cap per bucket."""

    minimum_per_group: Mapping[str, int] = field(default_factory=dict)
    maximum_per_bucket: int | None = None

    def __post_init__(self) -> None:
        bad = {g: n for g, n in self.minimum_per_group.items() if not _count(n)}
        if bad:
            raise ValueError(f"minimum_per_group needs integers >= 0, got {bad}")
        cap = self.maximum_per_bucket
        if cap is not None and not (_count(cap) and cap >= 1):
            raise ValueError(f"maximum_per_bucket must be an integer >= 1 or None, got {cap!r}")


def _string_keys(value: object) -> bool:
    """Whether every mapping inside `value` has string keys (JSON would rewrite the others)."""
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _string_keys(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_string_keys(v) for v in value)
    return True


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class OrderedRows(Protocol):
    """Candidates in rank order: all of them, or those of one group."""

    def ordered(self, group: str | None = None) -> Iterable[RankedCandidate]: ...


@dataclass(frozen=True)
class RankedSelection:
    """The chosen candidates in the order they were taken, and minima that could not be met."""

    selected: tuple[RankedCandidate, ...]
    unmet_minimums: Mapping[str, int]

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(c.task_id for c in self.selected)


def select_ranked_candidates(
    rows: OrderedRows, target_count: int, policy: SelectionPolicy
) -> RankedSelection:
    """Group minima first (policy order), then the best remaining globally; caps and no repeats."""
    chosen: list[RankedCandidate] = []
    taken: set[str] = set()
    per_bucket: dict[str, int] = {}
    unmet: dict[str, int] = {}

    def take(candidates: Iterable[RankedCandidate], wanted: int) -> int:
        count = 0
        for candidate in candidates:
            if count == wanted or len(chosen) == target_count:
                break
            cap = policy.maximum_per_bucket
            if candidate.task_id in taken or (
                cap is not None and per_bucket.get(candidate.bucket, 0) >= cap
            ):
                continue
            chosen.append(candidate)
            taken.add(candidate.task_id)
            per_bucket[candidate.bucket] = per_bucket.get(candidate.bucket, 0) + 1
            count += 1
        return count

    for group, minimum in policy.minimum_per_group.items():
        got = take(rows.ordered(group), minimum)
        if got < minimum:
            unmet[group] = minimum - got
    take(rows.ordered(None), target_count - len(chosen))
    return RankedSelection(tuple(chosen), unmet)


class InMemoryRanking:
    """`OrderedRows` over a list (small pools, tests, and the reference for the disk path)."""

    def __init__(self, candidates: Iterable[RankedCandidate]) -> None:
        self._rows = sorted(candidates, key=RankedCandidate.order)

    def ordered(self, group: str | None = None) -> Iterator[RankedCandidate]:
        return (c for c in self._rows if group is None or c.group == group)


class RankingTable:
    """`OrderedRows` in a SQLite table with one index per order, read a page at a time."""

    def __init__(self, db: sqlite3.Connection, table: str = "ranking") -> None:
        if not table.isidentifier():
            raise ValueError(f"table name {table!r} is not an identifier")
        self.db, self.table = db, table
        db.executescript(
            f"""
            CREATE TABLE IF NOT EXISTS {table} (
                task_id TEXT PRIMARY KEY, priority REAL NOT NULL, tie_breaker TEXT NOT NULL,
                grp TEXT NOT NULL, bucket TEXT NOT NULL, metadata TEXT NOT NULL
            );
            CREATE INDEX IF NOT EXISTS {table}_order
                ON {table} (priority, tie_breaker, task_id);
            CREATE INDEX IF NOT EXISTS {table}_group
                ON {table} (grp, priority, tie_breaker, task_id);
            """
        )

    def insert(self, candidates: Sequence[RankedCandidate]) -> None:
        """Add ranked candidates (one committed ranking chunk, in the caller's transaction)."""
        self.db.executemany(
            f"INSERT INTO {self.table} VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    c.task_id,
                    float(c.priority),
                    c.tie_breaker,
                    c.group,
                    c.bucket,
                    json.dumps(dict(c.metadata), sort_keys=True, separators=(",", ":")),
                )
                for c in candidates
            ),
        )

    def ordered(self, group: str | None = None) -> Iterator[RankedCandidate]:
        columns = "task_id, priority, tie_breaker, grp, bucket, metadata"
        order = "ORDER BY priority, tie_breaker, task_id"
        if group is None:
            cursor = self.db.execute(f"SELECT {columns} FROM {self.table} {order}")
        else:
            cursor = self.db.execute(
                f"SELECT {columns} FROM {self.table} WHERE grp = ? {order}", (group,)
            )
        while page := cursor.fetchmany(PAGE):
            for task_id, priority, tie, grp, bucket, metadata in page:
                yield RankedCandidate(task_id, priority, tie, grp, bucket, json.loads(metadata))
