"""Grouping one LSH band in hash ranges: split once, or filter the whole band per range.

    .venv/bin/python bench/bench_lsh_ranges.py [--rows 2000000,8000000] [--range-rows 262144]
        [--repeats 3] [--exact-rows 8000000] [--out /tmp/bench-lsh]

A band over RANGE_ROWS rows is grouped a hash range at a time to bound memory. Two ways of
finding one range's rows, on the same band file (random keys, 1 in 4 rows in a shared bucket),
timed alternately, each the best of `--repeats`:

- `split` (`shard_lsh.group_band`, what the shard stage does): a counting sort of the band into
  one file of (key, row) records by range, two reads of the band and one write, then each range
  reads its own records;
- `filter` (the simple way): every range reads the whole band and keeps the keys of its range,
  ranges x rows reads in all, so the time grows with the square of the rows.

Both write the same groups (checked). Prints one JSON object: per row count, the ranges, the
seconds of each way and the ratio filter / split. `--range-rows` stands in for RANGE_ROWS
(2^19) so that a few million rows give the range counts of a far bigger corpus per band.
`--exact-rows N` adds exact dedup over N rows in task files: all keys at once against a hash
range of 2^20 keys at a time (`shard_dedup.exact_copies`), memory and seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.stages import shard_dedup, shard_lsh
from corpus_assets.core.stages.shard_tasks import TaskOutput, task_path
from corpus_assets.core.text.minhash import band_groups


def filter_each_range(index: shard_lsh.Index, band: int) -> list[Any]:
    """The simple way: each range reads the whole band, chunk by chunk, and keeps its keys."""
    n, parts = index.rows, index.ranges
    found = []
    for part in range(parts):
        chosen_keys, chosen_rows = [], []
        with open(index.folder / "bands.u64", "rb") as fh:
            fh.seek(band * n * 8)
            for lo in range(0, n, 1 << 18):
                chunk = np.fromfile(fh, dtype="<u8", count=min(1 << 18, n - lo))
                mine = np.flatnonzero(chunk % np.uint64(parts) == part)
                chosen_keys.append(chunk[mine])
                chosen_rows.append(mine + lo)
        found.append(band_groups(np.concatenate(chosen_keys), np.concatenate(chosen_rows)))
    return found


def split_then_group(index: shard_lsh.Index, band: int) -> list[Any]:
    return [shard_lsh.load_groups(path) for path in shard_lsh.group_band(index, band)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="2000000,8000000")
    parser.add_argument("--range-rows", type=int, default=1 << 18)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-lsh"))
    parser.add_argument("--exact-rows", type=int, default=0, help="also exact copies by range")
    parser.add_argument("--exact-range-rows", type=int, default=1 << 20)
    args = parser.parse_args()
    shard_lsh.RANGE_ROWS = args.range_rows
    report: dict[str, Any] = {"range_rows": args.range_rows, "sizes": []}
    for n in (int(x) for x in args.rows.split(",")):
        shutil.rmtree(args.out, ignore_errors=True)
        args.out.mkdir(parents=True)
        rng = np.random.default_rng(0)
        keys = rng.integers(0, 2**63, size=n, dtype=np.uint64)
        copies = rng.random(n) < 0.25
        keys[copies] = keys[rng.integers(0, n, size=int(copies.sum()))]
        keys.astype("<u8").tofile(args.out / "bands.u64")
        index = shard_lsh.Index(args.out, n, DedupSpec(bands=1, num_perm=128))
        seconds: dict[str, list[float]] = {"split": [], "filter": []}
        results = {}
        for _ in range(args.repeats):
            for name, fn in (("split", split_then_group), ("filter", filter_each_range)):
                start = time.perf_counter()
                results[name] = fn(index, 0)
                seconds[name].append(time.perf_counter() - start)
        for a, b in zip(results["split"], results["filter"], strict=True):
            assert np.array_equal(a.members, b.members) and np.array_equal(a.starts, b.starts)
        best = {name: round(min(times), 3) for name, times in seconds.items()}
        report["sizes"].append(
            {
                "rows": n,
                "ranges": index.ranges,
                "seconds": best,
                "filter_over_split": round(best["filter"] / best["split"], 2),
            }
        )
        shutil.rmtree(args.out, ignore_errors=True)
    if args.exact_rows:
        report["exact"] = exact_by_range(args.exact_rows, args.exact_range_rows, args.out)
    print(json.dumps(report, indent=1))


def exact_by_range(n: int, range_rows: int, out: Path) -> dict[str, Any]:
    """`shard_dedup.exact_copies` over task files of 1,024 rows: all keys at once (the code
    below EXACT_RANGE_ROWS) against a hash range of `range_rows` rows at a time; tracemalloc's peak
    beyond the result mask, seconds; the same rows found."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rng = np.random.default_rng(1)
    outputs = []
    for index, lo in enumerate(range(0, n, 1024)):
        keys = rng.integers(0, 2**64 - 1, size=(min(1024, n - lo), 2), dtype=np.uint64)
        keys[::7] = keys[0]  # a copy in every task
        np.save(task_path(out, index, ".keys.npy"), keys)
        outputs.append(TaskOutput(index, len(keys), 0, len(keys), {}))
    found, result = {}, {}
    for name, rows in (("by_range", range_rows), ("whole", n + 1)):
        shard_dedup.EXACT_RANGE_ROWS = rows
        tracemalloc.start()
        start = time.perf_counter()
        found[name] = shard_dedup.exact_copies(out, outputs, n)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - n  # less the mask itself
        tracemalloc.stop()
        result[name] = {"seconds": round(seconds, 2), "peak_bytes_per_row": round(peak / n, 1)}
    assert np.array_equal(found["by_range"], found["whole"]), "exact copies differ"
    shutil.rmtree(out, ignore_errors=True)
    ranges = -(-n // range_rows)
    return {"rows": n, "ranges": ranges, "copies": int(found["whole"].sum()), **result}


if __name__ == "__main__":
    main()
