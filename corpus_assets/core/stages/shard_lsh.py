"""The shard stage's near-dedup index on disk: LSH band keys, signatures and candidate texts.

Phase 2 never holds the corpus's signatures (480 bytes a document by default) or its band keys
together. `write_index` reads the task files one at a time and writes, for the rows that are not
exact copies, every band's keys (band after band: `bands.u64`) and the signatures (`sigs.u32`)
to the index folder. `group_band` then groups one band, a hash range at a time (a band over
RANGE_ROWS rows is first split by range into a file of its own, 16 bytes a row): it is an
independent call (on Ray, a task), and its results, the buckets shared by two rows or more, go
to a file per range. `keep_first_exact` (core.text.minhash) walks the shared buckets of every
band in row order, reading the signatures (mapped: `Signatures`) and the texts (`Texts`, copied
to one file) only of candidate pairs, and shingles the texts a batch at a time. Memory: one
band's keys of one hash range (or SPLIT_ROWS of them) at a time while grouping (about 50 bytes a
row), then the shared buckets (8 bytes a row per band it shares), about 20 bytes per row and
SHINGLE_CACHE_BYTES of shingles.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.stages.shard_tasks import TaskOutput, task_path
from corpus_assets.core.stages.split_ranges import SPLIT_ROWS, read_range, split_by_range
from corpus_assets.core.store.atomic import atomic_writer
from corpus_assets.core.text.minhash import (
    BandGroups,
    band_groups,
    band_keys,
    shingle_sets,
    shingles,
)

RANGE_ROWS = 1 << 19
"""At most about this many rows of one band are grouped at a time (more: hash ranges)."""
SHINGLE_BLOCK = 64
"""Candidate rows whose texts are shingled together, in one pass (a block)."""
SHINGLE_CACHE_BYTES = 64 << 20
"""Shingled blocks are kept, the least recently used dropped first, up to about this size."""
READ_GAP = 32
"""Texts.get_many reads the texts of rows this many candidates apart or closer in one read."""
_ROW_BYTES = 200  # what a cached row costs besides its shingles (its dictionary entries)


@dataclass(frozen=True)
class Index:
    """The index folder of `rows` documents (the exact survivors, in global order)."""

    folder: Path
    rows: int
    spec: DedupSpec

    @property
    def ranges(self) -> int:
        """How many hash ranges each band is grouped in."""
        return max(1, -(-self.rows // RANGE_ROWS))


def write_index(
    task_dir: Path,
    outputs: list[TaskOutput],
    keep: np.ndarray[Any, Any],
    spec: DedupSpec,
    folder: Path,
) -> Index:
    """Band keys and signatures of the filtered rows where `keep` (global order), task by task
    (the band keys of INDEX_ROWS rows or more at a time: a task holds about a thousand)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = int(keep.sum())
    index = Index(folder, n, spec)
    start = done = 0
    pending: list[np.ndarray[Any, Any]] = []
    with open(folder / "bands.u64", "wb") as bands, open(folder / "sigs.u32", "wb") as sigs:
        bands.truncate(n * spec.bands * 8)

        def flush() -> int:
            rows = np.concatenate(pending)
            pending.clear()
            for band, keys in enumerate(band_keys(rows, spec)):
                os.pwrite(bands.fileno(), keys.astype("<u8").tobytes(), (band * n + done) * 8)
            return len(rows)

        for out in outputs:
            mine = keep[start : start + out.kept]
            start += out.kept
            if not mine.any():
                continue
            rows = np.load(task_path(task_dir, out.index, ".sigs.npy"))[mine]
            sigs.write(np.ascontiguousarray(rows, dtype="<u4").tobytes())
            pending.append(rows)
            if sum(len(p) for p in pending) >= INDEX_ROWS:
                done += flush()
        if pending:
            done += flush()
    return index


INDEX_ROWS = 1 << 16
"""write_index computes band keys this many rows (or a task more) at a time."""


def group_band(index: Index, band: int) -> list[Path]:
    """Group one band's keys, a hash range at a time; the files of its shared buckets, in order
    (see `band_parts`)."""
    return [_write_groups(index, band, part, g) for part, g in enumerate(band_parts(index, band))]


def band_parts(index: Index, band: int) -> Iterator[BandGroups]:
    """The shared buckets of one band, a hash range after another.

    Over RANGE_ROWS rows the band is first split by hash range into one file (a counting sort:
    two reads of the band, one write), so each range then reads only its own records: the
    reads grow with the rows, not with rows x ranges.
    """
    n, parts = index.rows, index.ranges
    if parts == 1:
        with open(index.folder / "bands.u64", "rb") as fh:
            fh.seek(band * n * 8)
            keys = np.fromfile(fh, dtype="<u8", count=n)
        yield band_groups(keys, np.arange(n, dtype=np.int64))
        return
    split = index.folder / f".band-{band:04d}.split-{os.getpid()}"
    try:
        ends = split_by_range(split, _RECORD, partial(_band_records, index, band), "key", parts)
        for part in range(parts):
            records = read_range(split, _RECORD, ends, part)
            groups = band_groups(records["key"], records["row"].astype(np.int64))
            del records
            yield groups
    finally:
        split.unlink(missing_ok=True)


_RECORD = np.dtype([("key", "<u8"), ("row", "<u8")])


def _band_records(index: Index, band: int) -> Iterator[np.ndarray[Any, Any]]:
    """One band's (key, row) records, SPLIT_ROWS at a time."""
    n = index.rows
    with open(index.folder / "bands.u64", "rb") as fh:
        fh.seek(band * n * 8)
        for lo in range(0, n, SPLIT_ROWS):
            keys = np.fromfile(fh, dtype="<u8", count=min(SPLIT_ROWS, n - lo))
            records = np.empty(len(keys), dtype=_RECORD)
            records["key"] = keys
            records["row"] = np.arange(lo, lo + len(keys), dtype=np.uint64)
            yield records


def _write_groups(index: Index, band: int, part: int, groups: BandGroups) -> Path:
    path = index.folder / f"groups-{band:04d}-{part:04d}.npz"
    with atomic_writer(path, sync_dir=False) as fh:  # whole or absent: a Ray task may run again
        np.savez(fh, members=groups.members, starts=groups.starts)
    return path


def load_groups(path: Path) -> BandGroups:
    with np.load(path) as z:
        return BandGroups(z["members"], z["starts"])


class Signatures:
    """The index's signatures, mapped from disk (the pages of the rows verified are read)."""

    def __init__(self, index: Index) -> None:
        self.width = index.spec.num_perm
        self.rows = index.rows
        self.fh = open(index.folder / "sigs.u32", "rb")  # noqa: SIM115 (closed by close())
        self.map = mmap.mmap(self.fh.fileno(), 0, access=mmap.ACCESS_READ) if self.rows else None
        self.sigs = (
            np.zeros((0, self.width), dtype="<u4")
            if self.map is None
            else np.frombuffer(self.map, dtype="<u4").reshape(self.rows, self.width)
        )

    def close(self) -> None:
        del self.sigs  # the map's view: the map cannot close while one is alive
        if self.map is not None:
            with contextlib.suppress(BufferError):  # a view outlives it (in an exception's
                self.map.close()  # frame): the map closes when it is freed
        self.fh.close()


class Texts:
    """Texts of the candidate rows (index rows in a shared bucket), copied once to one file."""

    def __init__(
        self,
        index: Index,
        task_dir: Path,
        outputs: list[TaskOutput],
        keep: np.ndarray[Any, Any],
        candidates: np.ndarray[Any, Any],
    ) -> None:
        self.candidates = candidates
        self.offsets = np.zeros(len(candidates) + 1, dtype=np.int64)
        self.ngram = index.spec.ngram
        self.sets: dict[int, tuple[int, np.ndarray[Any, Any]]] = {}  # row: (block, shingles)
        self.blocks: OrderedDict[int, list[int]] = OrderedDict()  # the cached rows of a block
        self.cached_bytes = 0
        path = index.folder / "texts.bin"
        start = first = at = 0
        with open(path, "wb") as fh:
            for out in outputs:
                mine = np.flatnonzero(keep[start : start + out.kept])
                start += out.kept
                last = first + len(mine)
                wanted = candidates[
                    np.searchsorted(candidates, first) : np.searchsorted(candidates, last)
                ]
                if len(wanted):
                    part = pq.ParquetFile(task_path(task_dir, out.index, ".parquet"))
                    column = part.read(columns=["text"], use_threads=False).column("text")
                    taken = column.take(mine[wanted - first]).combine_chunks()
                    _, offsets, data = taken.buffers()  # UTF-8 bytes as Arrow holds them
                    ends = np.frombuffer(offsets, dtype=np.int32)[
                        taken.offset : taken.offset + len(taken) + 1
                    ].astype(np.int64)
                    fh.write(memoryview(data)[ends[0] : ends[-1]])
                    self.offsets[at + 1 : at + len(taken) + 1] = (
                        self.offsets[at] + ends[1:] - ends[0]
                    )
                    at += len(taken)
                    del part, column, taken, offsets, data
                    pa.default_memory_pool().release_unused()  # the task file's read buffers
                first = last
        self.fh = open(path, "rb")  # noqa: SIM115 (closed by close())

    def get(self, i: int) -> str:
        k = int(self.candidates.searchsorted(i))
        lo, hi = int(self.offsets[k]), int(self.offsets[k + 1])
        return os.pread(self.fh.fileno(), hi - lo, lo).decode("utf-8", "surrogatepass")

    def get_many(self, rows: list[int]) -> list[str]:
        """The texts of candidate rows (ascending), a pread for each run of them at most
        READ_GAP candidates apart (the texts between are read and left)."""
        if not rows:
            return []
        at = self.candidates.searchsorted(rows)
        ends = [*np.flatnonzero(np.diff(at) > READ_GAP).tolist(), len(at) - 1]
        starts, stops = self.offsets[at].tolist(), self.offsets[at + 1].tolist()
        out: list[str] = []
        first = 0
        for last in ends:  # one read from row first's text to row last's
            lo = starts[first]
            data = os.pread(self.fh.fileno(), stops[last] - lo, lo)
            out += [
                data[a - lo : b - lo].decode("utf-8", "surrogatepass")
                for a, b in zip(starts[first : last + 1], stops[first : last + 1], strict=True)
            ]
            first = last + 1
        return out

    def shingles(self, i: int) -> np.ndarray[Any, Any]:
        """The shingle set of row i's text, cached by blocks of SHINGLE_BLOCK candidates, up to
        SHINGLE_CACHE_BYTES (for partial copies: the walk shingles texts itself). A block's
        first text asked for is shingled alone (where few rows are asked for, one text is all a
        block needs); its second shingles the whole block at once (rows are asked for about in
        order, so where many are, their neighbours come next)."""
        hit = self.sets.get(i)
        if hit is not None:
            self.blocks.move_to_end(hit[0])
            return hit[1]
        block = int(self.candidates.searchsorted(i)) // SHINGLE_BLOCK
        rows = self.blocks.pop(block, None)
        if rows is None:
            fresh = {i: shingles(self.get(i), self.ngram)}
        else:
            self._drop(rows)
            lo = block * SHINGLE_BLOCK
            block_rows = self.candidates[lo : lo + SHINGLE_BLOCK].tolist()
            fresh = dict(zip(block_rows, self._shingle_block(block), strict=True))
        self.blocks[block] = list(fresh)
        for row, found in fresh.items():
            self.sets[row] = (block, found)
            self.cached_bytes += found.nbytes + _ROW_BYTES
        while self.cached_bytes > SHINGLE_CACHE_BYTES and len(self.blocks) > 1:
            self._drop(self.blocks.popitem(last=False)[1])
        return fresh[i]

    def _drop(self, rows: list[int]) -> None:
        for row in rows:
            self.cached_bytes -= self.sets.pop(row)[1].nbytes + _ROW_BYTES

    def _shingle_block(self, block: int) -> list[np.ndarray[Any, Any]]:
        """The shingle sets of one block's texts, read with one pread."""
        lo = block * SHINGLE_BLOCK
        ends = self.offsets[lo : lo + SHINGLE_BLOCK + 1]
        data = os.pread(self.fh.fileno(), int(ends[-1] - ends[0]), int(ends[0]))
        cuts = (ends - ends[0]).tolist()
        texts = [data[a:b].decode("utf-8", "surrogatepass") for a, b in pairwise(cuts)]
        return shingle_sets(texts, self.ngram)

    def close(self) -> None:
        self.fh.close()
