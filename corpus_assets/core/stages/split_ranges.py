"""Records split by hash range into one file, a counting sort on disk (near and exact dedup).

A computation that must see every row with the same key together (grouping a band's keys,
finding exact copies) can run a hash range at a time when the keys are too many to hold: all
rows with one key fall in one range. `split_by_range` writes the records once, grouped by range
and in their original order within each range (two passes over the input, one write), so each
range is then read on its own: reads grow with the rows, not with rows x ranges.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

Records = np.ndarray[Any, Any]
SPLIT_ROWS = 1 << 19
"""Inputs are best handed to `split_by_range` in chunks of about this many records."""


def split_by_range(
    path: Path, dtype: np.dtype[Any], chunks: Callable[[], Iterable[Records]], key: str, parts: int
) -> np.ndarray[Any, Any]:
    """Write the records of `chunks()` (called twice) to `path` grouped by `record[key] % parts`,
    in input order within each range; return where each range ends (parts + 1 offsets)."""
    counts = np.zeros(parts, dtype=np.int64)
    for records in chunks():
        counts += np.bincount(range_of(records[key], parts), minlength=parts)
    ends = np.zeros(parts + 1, dtype=np.int64)
    np.cumsum(counts, out=ends[1:])
    at = ends[:-1].copy()  # where each range's next record goes
    with open(path, "wb") as out:
        out.truncate(int(ends[-1]) * dtype.itemsize)
        for records in chunks():
            part = range_of(records[key], parts)
            order = np.argsort(part, kind="stable")  # input order kept within a range
            ordered = records[order]
            sizes = np.bincount(part, minlength=parts)
            bounds = np.concatenate(([0], np.cumsum(sizes)))
            for p in np.flatnonzero(sizes).tolist():
                piece = ordered[bounds[p] : bounds[p + 1]]
                os.pwrite(out.fileno(), piece.tobytes(), int(at[p]) * dtype.itemsize)
                at[p] += len(piece)
    return ends


def read_range(path: Path, dtype: np.dtype[Any], ends: np.ndarray[Any, Any], part: int) -> Records:
    """The records of range `part` of a file written by `split_by_range`."""
    lo, hi = int(ends[part]), int(ends[part + 1])
    with open(path, "rb") as fh:
        fh.seek(lo * dtype.itemsize)
        return np.fromfile(fh, dtype=dtype, count=hi - lo)


def range_of(keys: np.ndarray[Any, Any], parts: int) -> np.ndarray[Any, Any]:
    """Each key's hash range; as uint16 when that fits, which numpy's stable sort radix-sorts."""
    return (keys % np.uint64(parts)).astype(np.uint16 if parts <= 1 << 16 else np.intp)
