"""Phase 3 of the shard stage: the surviving documents, in order, into Parquet shards."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.stages.shard_tasks import LANGUAGE_FIELDS, PII_KINDS, TaskOutput, task_path
from corpus_assets.core.store.atomic import disk_error
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.progress import Progress

SHARD_SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("source", pa.string()), ("license", pa.string())]
)
ROW_GROUP_ROWS = 1024


def shard_schema(cfg: LoadedConfig) -> pa.Schema:
    """The shards' columns: SHARD_SCHEMA, then `language`, `language_score` when identified,
    then `quality_<name>` (float64) for each classifier."""
    spec = cfg.model.filters
    if not spec.enabled:
        return SHARD_SCHEMA
    languages = LANGUAGE_FIELDS if spec.languages is not None else []
    scores = [(f"quality_{c.name}", pa.float64()) for c in spec.classifiers or ()]
    return pa.schema([*SHARD_SCHEMA, *languages, *scores])


def totals_of(
    schema: pa.Schema, documents: int, text_bytes: int, pii: dict[str, int], languages: Any
) -> dict[str, Any]:
    """The totals a shard writer returns (`languages` when the shards have that column)."""
    totals = {"documents": documents, "text_bytes": text_bytes, "pii": pii}
    return totals | ({"languages": languages} if "language" in schema.names else {})


def count_languages(table: pa.Table, counts: dict[str, int]) -> None:
    """Add the rows of each `language` of `table` to `counts` (no column: nothing)."""
    if "language" not in table.column_names:
        return
    for item in pc.value_counts(table.column("language")).to_pylist():
        counts[item["values"]] = counts.get(item["values"], 0) + item["counts"]


class _ShardSink:
    """Rows go in; shard files of about `target` text bytes come out, row groups of fixed size."""

    def __init__(self, staging: Path, target: int, schema: pa.Schema = SHARD_SCHEMA) -> None:
        self.staging = staging
        self.target = target
        self.schema = schema
        self.shards: list[dict[str, Any]] = []
        self.writer: pq.ParquetWriter | None = None
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.rows = 0
        self.size = 0

    def add(self, table: pa.Table, sizes: np.ndarray[Any, Any]) -> None:
        start = 0
        while start < table.num_rows:
            room = np.searchsorted(np.cumsum(sizes[start:]), self.target - self.size, "left")
            end = min(table.num_rows, start + int(room) + 1)
            self._append(table.slice(start, end - start), int(sizes[start:end].sum()))
            start = end
            if self.size >= self.target:
                self.close()

    def _append(self, table: pa.Table, nbytes: int) -> None:
        self.pending.append(table)
        self.pending_rows += table.num_rows
        self.rows += table.num_rows
        self.size += nbytes
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self.pending:
            return
        merged = pa.concat_tables(self.pending)
        cut = merged.num_rows if final else merged.num_rows - merged.num_rows % ROW_GROUP_ROWS
        if self.writer is None:
            self.writer = pq.ParquetWriter(self._path(), self.schema, compression="zstd")
        if cut:
            self.writer.write_table(merged.slice(0, cut), row_group_size=ROW_GROUP_ROWS)
        rest = merged.slice(cut)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def _path(self) -> Path:
        return self.staging / f"shard-{len(self.shards):05d}.parquet"

    def close(self) -> None:
        self._flush(final=True)
        if self.writer is None:
            return
        self.writer.close()
        path = self._path()
        with open(path, "rb+") as fh:
            os.fsync(fh.fileno())
        self.shards.append(
            {
                "name": path.name,
                "sha256": file_sha256(path),
                "bytes": path.stat().st_size,
                "rows": self.rows,
            }
        )
        self.writer, self.rows, self.size = None, 0, 0


def write_shards(
    cfg: LoadedConfig,
    outputs: list[TaskOutput],
    task_dir: Path,
    drop: np.ndarray[Any, Any],
    texts: Mapping[int, str],
    staging: Path,
    progress: Progress,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Write the rows not in `drop` to shards in staging, with `texts` in place of theirs.

    Returns the shard entries and the totals.
    """
    sink = _ShardSink(staging, int(cfg.model.shards.target_mb * 1_000_000), shard_schema(cfg))
    languages: dict[str, int] = {}
    replaced = np.zeros(len(drop), dtype=bool)
    replaced[list(texts)] = True
    pii = dict.fromkeys(PII_KINDS, 0)
    documents = text_bytes = 0
    start = 0
    try:
        for n, out in enumerate(outputs):
            progress.beat(f"writing shards: task {n:,} of {len(outputs):,}")
            rows = slice(start, start + out.kept)
            start += out.kept
            keep = ~drop[rows]
            if not keep.any():
                continue
            # one thread: a small file, and fewer malloc arenas that keep freed memory
            path = task_path(task_dir, out.index, ".parquet")
            table = pq.ParquetFile(path).read(use_threads=False)
            table = _replace_texts(table, rows.start, texts, replaced[rows])
            table = table.filter(pa.array(keep))
            sizes = table.column("text_bytes").to_numpy()
            for k in PII_KINDS:
                pii[k] += int(pc.sum(table.column(f"pii_{k}")).as_py() or 0)
            documents += table.num_rows
            text_bytes += int(sizes.sum())
            count_languages(table, languages)
            sink.add(table.select(sink.schema.names), sizes)
            del table
            pa.default_memory_pool().release_unused()  # malloc_trim: the task's freed buffers
        sink.close()
    except OSError as exc:
        raise disk_error(exc, staging) from exc
    return sink.shards, totals_of(sink.schema, documents, text_bytes, pii, languages)


def _replace_texts(
    table: pa.Table, first: int, texts: Mapping[int, str], replaced: np.ndarray[Any, Any]
) -> pa.Table:
    """A task's rows (global rows from `first` on) with `texts` put in place where `replaced`."""
    if not replaced.any():
        return table
    column = table.column("text").to_pylist()
    for local in np.flatnonzero(replaced).tolist():
        column[local] = texts[first + local]
    sizes = [len(t.encode("utf-8")) for t in column]
    table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(column))
    index = table.schema.get_field_index("text_bytes")
    return table.set_column(index, "text_bytes", pa.array(sizes, pa.int64()))
