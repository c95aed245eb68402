"""Phase 3 of the shard stage as one task per shard, for Ray (the local pool streams it).

The parent plans every shard from the surviving rows' sizes alone, cutting where `_ShardSink`
cuts as it streams; each shard's task then feeds exactly those slices to a sink of its own. The
same slices in the same order make the same write calls, so the shard files are byte-identical
to the streamed ones, and the totals add up to the same manifest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.stages.ray_tasks import RaySession
from corpus_assets.core.stages.shard_tasks import PII_KINDS, TaskOutput, task_path
from corpus_assets.core.stages.shard_writer import (
    SHARD_SCHEMA,
    _replace_texts,
    _ShardSink,
    count_languages,
    shard_schema,
    totals_of,
)
from corpus_assets.core.store.atomic import disk_error
from corpus_assets.core.store.progress import Progress


@dataclass(frozen=True)
class Piece:
    """Rows `start:stop` of one task's surviving rows (its rows at global `first` on, `keep`
    of them kept, `texts` in place of some)."""

    task: int
    first: int
    keep: np.ndarray[Any, Any]
    texts: dict[int, str]
    start: int
    stop: int


@dataclass
class ShardPlan:
    """Shard number `number`: its pieces, in order."""

    number: int
    pieces: list[Piece] = field(default_factory=list)


def write_shards_on(
    session: RaySession,
    cfg: LoadedConfig,
    outputs: list[TaskOutput],
    task_dir: Path,
    drop: np.ndarray[Any, Any],
    texts: Mapping[int, str],
    staging: Path,
    progress: Progress,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`write_shards`, one Ray task per shard: the shard entries and the totals."""
    target = int(cfg.model.shards.target_mb * 1_000_000)
    plans = plan_shards(outputs, task_dir, drop, texts, target, progress)
    progress.note(f"writing {len(plans):,} shards as Ray tasks")
    schema = shard_schema(cfg)
    args = [(plan, target, str(task_dir), str(staging), schema) for plan in plans]
    entries: list[dict[str, Any]] = []
    languages: dict[str, int] = {}
    pii = dict.fromkeys(PII_KINDS, 0)
    documents = text_bytes = 0
    try:
        for entry, docs, nbytes, found, langs in session.map(write_shard, args):
            entries.append(entry)
            for code, n in langs.items():
                languages[code] = languages.get(code, 0) + n
            documents += docs
            text_bytes += nbytes
            for k in PII_KINDS:
                pii[k] += found[k]
    except OSError as exc:
        raise disk_error(exc, staging) from exc
    return entries, totals_of(schema, documents, text_bytes, pii, languages)


def plan_shards(
    outputs: list[TaskOutput],
    task_dir: Path,
    drop: np.ndarray[Any, Any],
    texts: Mapping[int, str],
    target: int,
    progress: Progress,
) -> list[ShardPlan]:
    """Where `_ShardSink` would cut, from the sizes of the surviving rows (one column read)."""
    plans: list[ShardPlan] = []
    current = ShardPlan(0)
    size = 0
    first = 0
    for n, out in enumerate(outputs):
        progress.beat(f"planning shards: task {n:,} of {len(outputs):,}")
        rows = slice(first, first + out.kept)
        task_first, first = first, first + out.kept
        keep = ~drop[rows]
        if not keep.any():
            continue
        path = task_path(task_dir, out.index, ".parquet")
        sizes = pq.read_table(path, columns=["text_bytes"]).column(0).to_numpy().copy()
        own = {row: t for row, t in texts.items() if rows.start <= row < rows.stop}
        for row, text in own.items():
            sizes[row - task_first] = len(text.encode("utf-8"))
        sizes = sizes[keep]
        start = 0
        while start < len(sizes):  # the cuts of _ShardSink.add
            room = np.searchsorted(np.cumsum(sizes[start:]), target - size, "left")
            end = min(len(sizes), start + int(room) + 1)
            current.pieces.append(Piece(out.index, task_first, keep, own, start, end))
            size += int(sizes[start:end].sum())
            start = end
            if size >= target:
                plans.append(current)
                current, size = ShardPlan(len(plans)), 0
    if current.pieces:
        plans.append(current)
    return plans


class _OneShard(_ShardSink):
    """A sink that writes shard number `number` only."""

    def __init__(
        self, staging: Path, target: int, number: int, schema: pa.Schema = SHARD_SCHEMA
    ) -> None:
        super().__init__(staging, target, schema)
        self.number = number

    def _path(self) -> Path:
        return self.staging / f"shard-{self.number:05d}.parquet"


def write_shard(
    plan: ShardPlan, target: int, task_dir: str, staging: str, schema: pa.Schema = SHARD_SCHEMA
) -> tuple[dict[str, Any], int, int, dict[str, int], dict[str, int]]:
    """On a Ray worker: one planned shard; its entry, documents, text bytes, PII and language
    counts."""
    sink = _OneShard(Path(staging), target, plan.number, schema)
    languages: dict[str, int] = {}
    pii = dict.fromkeys(PII_KINDS, 0)
    documents = text_bytes = 0
    for piece in plan.pieces:
        table = pq.read_table(task_path(Path(task_dir), piece.task, ".parquet"))
        replaced = np.zeros(len(piece.keep), dtype=bool)
        replaced[[row - piece.first for row in piece.texts]] = True
        table = _replace_texts(table, piece.first, piece.texts, replaced)
        table = table.filter(pa.array(piece.keep)).slice(piece.start, piece.stop - piece.start)
        sizes = table.column("text_bytes").to_numpy()
        for k in PII_KINDS:
            pii[k] += int(pc.sum(table.column(f"pii_{k}")).as_py() or 0)
        documents += table.num_rows
        text_bytes += int(sizes.sum())
        count_languages(table, languages)
        sink._append(table.select(schema.names), int(sizes.sum()))
    sink.close()
    return sink.shards[0], documents, text_bytes, pii, languages
