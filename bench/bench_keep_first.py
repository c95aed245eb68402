"""keep_first's memory: the rows walked in windows against all (row, bucket) entries at once.

    .venv/bin/python bench/bench_keep_first.py [--rows 4000000] [--window-rows 262144]

Synthetic LSH groups of `--rows` rows in 20 bands (a row shares a bucket in a band with
probability ~4.5%, about 0.9 shared buckets a row as on the benchmark corpus; buckets of 2 to
5 rows), a verifier that accepts one pair in three. Runs `minhash.keep_first` (windows of
`--window-rows`; the stage uses at least 2^22 rows and at most 32 windows) and the same walk over
all entries at once (kept below), each in a fresh process, and prints one JSON object: the peak
of numpy's allocations (tracemalloc) during the walk beyond the groups, per row, the seconds,
and the ratio all at once / windowed. The partners are checked equal.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from corpus_assets.core.text import minhash
from corpus_assets.core.text.minhash import _ENTRIES, BandGroups, band_groups

BANDS = 20


def synthetic_groups(n: int) -> list[tuple[int, BandGroups]]:
    rng = np.random.default_rng(0)
    groups = []
    for band in range(BANDS):
        keys = np.arange(n, dtype=np.uint64) + np.uint64(band * n)  # distinct...
        shared = np.flatnonzero(rng.random(n) < 0.045)
        buckets = rng.integers(0, max(1, len(shared) // 3), size=len(shared)).astype(np.uint64)
        keys[shared] = buckets + np.uint64(2**62)  # ...but for ~1 in 22 rows
        groups.append((band, band_groups(keys, np.arange(n, dtype=np.int64))))
    return groups


def verify(i: int, j: int) -> bool:
    return (i * 7919 + j * 104729) % 3 == 0


def keep_first_all_at_once(
    groups: Sequence[tuple[int, BandGroups]], n: int, verify: Callable[[int, int], bool]
) -> NDArray[np.int64]:
    """minhash.keep_first's walk over every (row, bucket) entry at once, without windows."""
    partner = np.full(n, -1, dtype=np.int64)
    small = np.int32 if max(n, len(groups)) < 2**31 else np.int64  # rows and offsets fit
    rows, sources, firsts, counts = [], [], [], []
    for source, (_, g) in enumerate(groups):
        first = np.repeat(g.starts[:-1], np.diff(g.starts))
        position = np.arange(len(g.members), dtype=np.int64) - first
        later = position > 0  # the first row of a bucket has nothing before it to compare
        rows.append(g.members[later].astype(small))
        sources.append(np.full(int(later.sum()), source, dtype=small))
        firsts.append(first[later].astype(small))
        counts.append(position[later].astype(small))
    if not rows:
        return partner
    row_all, source_all = np.concatenate(rows), np.concatenate(sources)
    bands = np.array([band for band, _ in groups], dtype=small)[source_all]
    order = np.lexsort((bands, row_all))  # by row, then band
    del bands
    members = [g.members for _, g in groups]
    kept = bytearray(b"\x01") * n
    current, found, tried = -1, -1, set[int]()
    row_all, source_all = row_all[order], source_all[order]
    first_all, count_all = np.concatenate(firsts)[order], np.concatenate(counts)[order]
    for lo in range(0, len(order), _ENTRIES):  # a slice at a time as Python ints
        part = slice(lo, lo + _ENTRIES)
        entries = zip(
            row_all[part].tolist(),
            source_all[part].tolist(),
            first_all[part].tolist(),
            count_all[part].tolist(),
            strict=True,
        )
        for j, source, first, count in entries:
            if j != current:
                current, found, tried = j, -1, set()
            elif found >= 0:
                continue
            for i in members[source][first : first + count].tolist():
                if kept[i] and i not in tried:
                    tried.add(i)
                    if verify(i, j):
                        found, partner[j], kept[j] = i, i, 0
                        break
    return partner


def child(variant: str, n: int, window_rows: int, out: Path) -> None:
    groups = synthetic_groups(n)
    minhash._WINDOW_ROWS, minhash._WINDOWS = window_rows, 10**9
    walk = minhash.keep_first if variant == "windowed" else keep_first_all_at_once
    tracemalloc.start()
    start = time.perf_counter()
    partner = walk(groups, n, verify)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    np.save(out / f"{variant}.npy", partner)
    print(
        json.dumps(
            {
                "peak_mb": round(peak / 2**20, 1),
                "bytes_per_row": round(peak / n, 1),
                "seconds": round(seconds, 2),
                "dropped": int((partner >= 0).sum()),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--window-rows", type=int, default=1 << 18)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-keep-first"))
    parser.add_argument("--child", choices=["windowed", "all_at_once"])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.child:
        child(args.child, args.rows, args.window_rows, args.out)
        return
    report: dict[str, object] = {"rows": args.rows, "window_rows": args.window_rows}
    for variant in ("windowed", "all_at_once"):
        argv = [sys.executable, __file__, "--child", variant, "--rows", str(args.rows)]
        argv += ["--window-rows", str(args.window_rows), "--out", str(args.out)]
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
        report[variant] = json.loads(done.stdout)
    windowed, at_once = (np.load(args.out / f"{v}.npy") for v in ("windowed", "all_at_once"))
    assert np.array_equal(windowed, at_once), "the partners differ"
    report["peak_all_at_once_over_windowed"] = round(
        report["all_at_once"]["peak_mb"] / max(report["windowed"]["peak_mb"], 0.1),
        2,  # type: ignore[index]
    )
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
