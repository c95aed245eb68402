"""Benchmark `corpus mix` and `MixtureDataset` on three token builds totalling `--gb` of tokens.

    .venv/bin/python bench/bench_mixture.py [--work DIR] [--gb 1.0] [--seq-len 2048]
        [--samples 50000] [--rounds 3] [--workers 2]

1. Writes three token builds (uint16 token files of 50 %, 30 % and 20 % of `--gb`, shards of
   about 64 MB, documents of 1 to 2,000 tokens, random ids; shard Parquet with the document ids)
   in the tokenize stage's format, as a finished build would leave them.
2. Index build: `corpus mix` (weights 0.5 / 0.3 / 0.2, validation share 0.01, `--workers`) as a
   subprocess: wall time and the peak RSS of its largest process.
3. Reader: the first `--samples` samples of the global (shuffled) order read with
   `MixtureDataset[i]` against a bare numpy loop over the same token files: one `np.memmap` per
   `.bin`, each sample one slice copied out at the same file offset (positions precomputed,
   outside the timing; it skips no validation document and never joins two files). Rounds
   alternate; best and median samples/s and their ratio (goal: >= 0.8).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_assets.mixture import MixtureDataset

VOCAB, EOS = 50_257, 50_256
SHARD_TOKENS = 32 << 20  # 64 MB of uint16
SHARES = {"web": 0.5, "code": 0.3, "math": 0.2}


def write_build(folder: Path, name: str, tokens: int, seed: int) -> Path:
    """A token build of about `tokens` tokens (and its shards' ids) under `folder`."""
    rng = np.random.default_rng(seed)
    out, shards = folder / "tokens" / name, folder / "shards" / name
    out.mkdir(parents=True)
    shards.mkdir(parents=True)
    files, entries, left, s = [], [], tokens, 0
    while left > 0:
        stem = f"shard-{s:05d}"
        lengths = rng.integers(1, 2000, size=min(left, SHARD_TOKENS) // 1000 + 1).astype("<u8")
        ends = np.cumsum(lengths, dtype="<u8")
        stream = rng.integers(0, EOS, size=int(ends[-1]), dtype="<u2")
        stream[(ends - 1).astype(np.int64)] = EOS
        stream.tofile(out / f"{stem}.bin")
        ends.tofile(out / f"{stem}.idx")
        for ext in (".bin", ".idx"):
            data = (out / f"{stem}{ext}").read_bytes()
            files.append(
                {
                    "name": f"{stem}{ext}",
                    "shard": f"{stem}.parquet",
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "bytes": len(data),
                    "tokens": len(stream),
                    "documents": len(lengths),
                }
            )
        ids = pa.array([f"{name}/{s}/{d}" for d in range(len(lengths))])
        pq.write_table(pa.table({"id": ids}), shards / f"{stem}.parquet")
        data = (shards / f"{stem}.parquet").read_bytes()
        entries.append(
            {
                "name": f"{stem}.parquet",
                "rows": len(lengths),
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        left -= len(stream)
        s += 1
    shards_manifest = json.dumps({"kind": "shards", "shards": entries}).encode()
    (shards / "_MANIFEST.json").write_bytes(shards_manifest)
    bins = [f for f in files if f["name"].endswith(".bin")]
    manifest = {
        "kind": "tokens",
        "build_id": f"corpus/{name}/bench/000000000000",
        "tokenizer": {"id": "bench", "sha256": None},
        "vocab_size": VOCAB,
        "eos_id": EOS,
        "dtype": "uint16",
        "idx_dtype": "uint64",
        "byte_order": "little",
        "files": files,
        "totals": {
            "documents": sum(f["documents"] for f in bins),
            "tokens": sum(f["tokens"] for f in bins),
        },
        "shards_manifest": f"../../shards/{name}/_MANIFEST.json",
        "shards_manifest_sha256": hashlib.sha256(shards_manifest).hexdigest(),
    }
    (out / "_MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    return out


def run_mix(config: Path, root: Path, workers: int) -> tuple[float, float, dict[str, Any]]:
    """`corpus mix` as a subprocess: wall seconds, peak RSS (MB) of its largest process, summary."""
    argv = [sys.executable, "-m", "corpus_assets.cli", "mix", str(config), "--root", str(root)]
    argv += ["--workers", str(workers)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"corpus mix failed:\n{done.stderr.decode()}")
    # the only child so far: its peak, or that of a worker of its pool if larger
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return wall, rss_mb, json.loads(done.stdout)


def bare_positions(ds: MixtureDataset, n: int) -> tuple[list[np.memmap], list[int], list[int]]:
    """Per sample: which `.bin` memmap and the offset in it of its first token."""
    maps, which, offsets = [], [], []
    firsts = []
    for part in ds._parts:
        starts = [0]
        first = len(maps)
        folder = Path(part.ds.folder)
        for f in part.ds.manifest["files"]:
            if f["name"].endswith(".bin"):
                maps.append(np.memmap(folder / f["name"], dtype="<u2", mode="r"))
                starts.append(starts[-1] + f["tokens"])
        firsts.append((first, starts))
    for i in range(n):
        c, g = int(ds._component[i]), int(ds._position[i])
        first, starts = firsts[c]
        k = int(np.searchsorted(starts, g, side="right")) - 1
        local = min(g - starts[k], len(maps[first + k]) - n_tokens(ds))
        which.append(first + k)
        offsets.append(local)
    return maps, which, offsets


def n_tokens(ds: MixtureDataset) -> int:
    return ds.seq_len + 1


def time_mixture(ds: MixtureDataset, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        ds[i]
    return n / (time.perf_counter() - start)


def time_bare(maps: list[Any], which: list[int], offsets: list[int], size: int) -> float:
    start = time.perf_counter()
    for m, o in zip(which, offsets, strict=True):
        np.array(maps[m][o : o + size])
    return len(which) / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--work", type=Path, default=Path("bench/out/mixture"))
    p.add_argument("--gb", type=float, default=1.0, help="token bytes of the three builds")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--samples", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    load_before = round(os.getloadavg()[0], 2)
    print(f"load before: {load_before:.2f} (1 min), {os.cpu_count()} cores", flush=True)

    start = time.perf_counter()
    total = int(args.gb * 1e9) // 2
    comps = []
    for seed, (name, share) in enumerate(SHARES.items()):
        build = write_build(args.work, name, int(total * share), seed)
        comps.append({"name": name, "tokens": str(build.resolve()), "weight": share})
    token_bytes = sum(f.stat().st_size for f in (args.work / "tokens").rglob("*.bin"))
    documents = sum(
        json.loads((args.work / "tokens" / n / "_MANIFEST.json").read_text())["totals"]["documents"]
        for n in SHARES
    )
    print(
        f"builds: 3, {token_bytes / 1e9:.3f} GB of token files ({token_bytes // 2:,} tokens, "
        f"{documents:,} documents), written in {time.perf_counter() - start:.1f} s",
        flush=True,
    )
    config = args.work / "mix.json"
    config.write_text(
        json.dumps(
            {
                "name": "bench",
                "seq_len": args.seq_len,
                "validation_share": 0.01,
                "components": comps,
            }
        )
    )
    wall, rss, summary = run_mix(config, args.work / "root", args.workers)
    print(
        f"index build: corpus mix --workers {args.workers}: {wall:.2f} s wall, peak RSS "
        f"{rss:,.0f} MB; {summary['train']['samples']:,} training samples, "
        f"{summary['validation']['samples']:,} validation samples",
        flush=True,
    )
    for name, c in summary["components"].items():
        print(f"  {name}: share {c['share']:.4f} (asked {c['asked']}), epochs {c['epochs']}")

    ds = MixtureDataset(summary["folder"])
    n = min(args.samples, len(ds))
    maps, which, offsets = bare_positions(ds, n)
    size = n_tokens(ds)
    views = [m.view(np.ndarray) for m in maps]
    time_mixture(ds, n)  # warm: the pages of every mapping
    time_bare(maps, which, offsets, size)
    time_bare(views, which, offsets, size)
    rates: dict[str, list[float]] = {"mixture": [], "memmap": [], "views": []}
    for _ in range(args.rounds):
        rates["mixture"].append(time_mixture(ds, n))
        rates["memmap"].append(time_bare(maps, which, offsets, size))
        rates["views"].append(time_bare(views, which, offsets, size))
    print(f"reader: {n:,} samples of {size} tokens, {args.rounds} rounds, samples/s best / median")
    for name, label in (
        ("mixture", "MixtureDataset[i]"),
        ("memmap", "bare loop, np.memmap slices"),
        ("views", "bare loop, ndarray views of the memmaps"),
    ):
        best = max(rates[name]) / max(rates["memmap"])
        median = statistics.median(rates[name]) / statistics.median(rates["memmap"])
        print(
            f"  {label:42s} {max(rates[name]):>10,.0f} {statistics.median(rates[name]):>10,.0f}"
            f"   vs memmap loop {best:.2f} / {median:.2f}",
            flush=True,
        )
    load_after = os.getloadavg()[0]
    print(f"load after: {load_after:.2f} (1 min)")
    summary_line = {
        "token_bytes": token_bytes,
        "documents": documents,
        "index_build_s": round(wall, 3),
        "index_build_rss_mb": round(rss),
        "train_samples": summary["train"]["samples"],
        "reader_samples": n,
        "samples_per_s": {k: [round(r) for r in v] for k, v in rates.items()},
        "ratio_best": round(max(rates["mixture"]) / max(rates["memmap"]), 3),
        "ratio_median": round(
            statistics.median(rates["mixture"]) / statistics.median(rates["memmap"]), 3
        ),
        "load_before": load_before,
        "load_after": round(load_after, 2),
    }
    print(json.dumps(summary_line, sort_keys=True))


if __name__ == "__main__":
    main()
