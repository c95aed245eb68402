"""Benchmark the tokenize stage against the raw `tokenizers` library, plus `bytes` speed and RSS.

    .venv/bin/python bench/bench_tokenize.py [--work DIR] [--mb 20] [--big-mb 100] [--rounds 3]

1. Builds the benchmark corpus (`../shared/bench/make_corpus.py`) and writes it as a shards folder
   in the shard stage's format (Parquet `id,text,source,license` of about `--shard-mb` text each,
   row groups of 1,024, and `_MANIFEST.json`), where `corpus run --stage tokenize` looks for it.
2. GPT-2: the whole stage (`corpus run --stage tokenize --workers 2`, wall time of the subprocess:
   start-up, shard verification, reading, tokenizing, writing, hashing, fsync, publish) against
   the raw baseline (`Tokenizer.encode_batch_fast` over the same texts in batches of 1,000 in one
   process, the library's threads on every core; tokenizer load and reading excluded). Rounds
   alternate and the medians are compared. Run once with shards of `--shard-mb` (default 64, the
   shard stage's default: one shard per 20 MB, so the stage runs one worker with 2 library
   threads) and once with 4 MB shards (several shards: 2 worker processes, 1 thread each).
3. `bytes`: the encoder alone (Arrow text -> uint16 ids with EOS) and the whole stage, MB/s.
4. Peak RSS (largest process of the stage: parent or worker) for the `--mb` and `--big-mb` corpora.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_assets.core.atomic import write_json
from corpus_assets.core.config import load_config
from corpus_assets.core.layout import Layout

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MAKE_CORPUS = SHARED / "bench" / "make_corpus.py"
GPT2 = SHARED / "data" / "tokenizers" / "gpt2" / "tokenizer.json"
SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("source", pa.string()), ("license", pa.string())]
)

BASELINE = r"""
import glob, json, sys, time
import pyarrow.parquet as pq
from tokenizers import Tokenizer
folder, tokenizer, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
texts = []
for f in sorted(glob.glob(folder + "/shard-*.parquet")):
    texts += pq.read_table(f, columns=["text"]).column(0).to_pylist()
tok = Tokenizer.from_file(tokenizer)
t0 = time.perf_counter()
tokens = 0
for s in range(0, len(texts), batch):
    tokens += sum(len(e) for e in tok.encode_batch_fast(texts[s : s + batch]))
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "tokens": tokens}))
"""

RSS = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
seconds = time.perf_counter() - t0
if proc.returncode:
    sys.exit(proc.stderr)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": seconds, "maxrss_kb": rss, "result": json.loads(proc.stdout)}))
"""


def make_corpus(work: Path, mb: float) -> Path:
    out = work / f"corpus-{mb:g}mb"
    if not (out / "truth.json").exists():
        cmd = [sys.executable, str(MAKE_CORPUS), "--out", str(out), "--mb", str(mb)]
        subprocess.run(cmd, check=True, capture_output=True)
    return out


def write_config(work: Path, name: str, tokenizer: dict[str, str]) -> Path:
    path = work / f"{name}.json"
    config = {"dataset": "bench", "version": name, "tokenizer": tokenizer}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def write_shards(parts: Path, folder: Path, shard_mb: float) -> dict[str, Any]:
    """The jsonl parts as Parquet shards of about `shard_mb` MB of text, plus the manifest."""
    if (folder / "_MANIFEST.json").exists():
        return dict(json.loads((folder / "_MANIFEST.json").read_text()))
    folder.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    rows: list[dict[str, str]] = []
    state = {"writer": None, "rows": 0, "bytes": 0}

    def flush() -> None:
        if not rows:
            return
        if state["writer"] is None:
            name = folder / f"shard-{len(entries):05d}.parquet"
            state["writer"] = pq.ParquetWriter(name, SCHEMA, compression="zstd")
        state["writer"].write_table(pa.Table.from_pylist(rows, SCHEMA), row_group_size=1024)
        rows.clear()

    def close() -> None:
        flush()
        if state["writer"] is None:
            return
        state["writer"].close()
        path = folder / f"shard-{len(entries):05d}.parquet"
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        entries.append(
            {"name": path.name, "sha256": sha, "bytes": len(data), "rows": state["rows"]}
        )
        state.update(writer=None, rows=0, bytes=0)

    documents = 0
    for part in sorted(parts.glob("part-*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            rows.append({"id": doc["id"], "text": doc["text"], "source": "bench", "license": "mit"})
            state["rows"] += 1
            state["bytes"] += len(doc["text"].encode("utf-8"))
            documents += 1
            if len(rows) == 1024:
                flush()
            if state["bytes"] >= shard_mb * 1e6:
                close()
    close()
    manifest = {"kind": "shards", "shards": entries, "documents_out": documents}
    write_json(folder / "_MANIFEST.json", manifest)
    return manifest


def corpus_cmd(config: Path, root: Path, workers: int) -> list[str]:
    return [
        sys.executable, "-m", "corpus_assets.cli", "run", "--stage", "tokenize",
        "--config", str(config), "--root", str(root), "--workers", str(workers),
    ]  # fmt: skip


def run_stage(config: Path, root: Path, workers: int) -> dict[str, Any]:
    """The stage in a subprocess from scratch: wall seconds, peak RSS, its summary."""
    shutil.rmtree(root / "tokens", ignore_errors=True)
    shutil.rmtree(root / "work", ignore_errors=True)
    cmd = [sys.executable, "-c", RSS, *corpus_cmd(config, root, workers)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def run_baseline(folder: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("TOKENIZERS_PARALLELISM",)}
    cmd = [sys.executable, "-c", BASELINE, str(folder), str(GPT2), "1000"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return dict(json.loads(out.stdout))


def text_bytes(folder: Path) -> int:
    return sum(
        sum(len(t.encode("utf-8")) for t in pq.read_table(p, columns=["text"])["text"].to_pylist())
        for p in sorted(folder.glob("shard-*.parquet"))
    )


def compare(work: Path, parts: Path, shard_mb: float, rounds: int) -> float:
    config = write_config(work, f"gpt2-{shard_mb:g}", {"id": "gpt2", "path": str(GPT2)})
    root = work / "root"
    folder = Layout(root).shards(load_config(config))
    manifest = write_shards(parts, folder, shard_mb)
    nbytes = text_bytes(folder)
    stage_s, base_s, tokens = [], [], 0
    for _ in range(rounds):
        base = run_baseline(folder)
        stage = run_stage(config, root, 2)
        base_s.append(base["seconds"])
        stage_s.append(stage["seconds"])
        tokens = stage["result"]["tokens"] - stage["result"]["documents"]  # without EOS
        assert tokens == base["tokens"], (tokens, base["tokens"])
    b, s = statistics.median(base_s), statistics.median(stage_s)
    print(
        f"\nGPT-2, {nbytes / 1e6:.1f} MB of text, {tokens:,} tokens, "
        f"{len(manifest['shards'])} shard(s) of <= {shard_mb:g} MB, {rounds} alternating rounds"
    )
    print(f"  raw encode_batch_fast  {tokens / b:>12,.0f} tok/s  {nbytes / 1e6 / b:6.2f} MB/s"
          f"  (median {b:.2f} s of {', '.join(f'{x:.2f}' for x in base_s)})")  # fmt: skip
    print(f"  tokenize stage (2 w.)  {tokens / s:>12,.0f} tok/s  {nbytes / 1e6 / s:6.2f} MB/s"
          f"  (median {s:.2f} s of {', '.join(f'{x:.2f}' for x in stage_s)})")  # fmt: skip
    print(f"  ratio stage / raw: {b / s:.3f}  (target >= 0.85)")
    return b / s


def bytes_speed(work: Path, parts: Path) -> None:
    from corpus_assets.core.tokenize import TEXT_BATCH_BYTES, _by_size
    from corpus_assets.core.tokenizer import BytesEncoder

    config = write_config(work, "bytes", {"id": "bytes"})
    root = work / "root"
    folder = Layout(root).shards(load_config(config))
    write_shards(parts, folder, 64)
    texts = [pq.read_table(p, columns=["text"])["text"] for p in sorted(folder.glob("shard-*"))]
    arrays = [chunk for column in texts for chunk in column.chunks]
    nbytes = sum(int(pc.sum(pc.binary_length(a)).as_py()) for a in arrays)
    encoder = BytesEncoder()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for array in arrays:
            for piece, _n in _by_size(array, TEXT_BATCH_BYTES):
                encoder.encode(piece)
        best = min(best, time.perf_counter() - t0)
    stage = min((run_stage(config, root, 2) for _ in range(2)), key=lambda r: r["seconds"])
    print(f"\nbytes tokenizer, {nbytes / 1e6:.1f} MB of text")
    print(f"  encoder (Arrow text -> uint16 ids + EOS)  {nbytes / 1e6 / best:8.1f} MB/s")
    print(
        f"  whole stage (subprocess, 2 workers)       {nbytes / 1e6 / stage['seconds']:8.1f} MB/s"
        f"  ({stage['seconds']:.2f} s)"
    )


def peak_rss(work: Path, mbs: list[float]) -> None:
    print("\npeak RSS of the tokenize stage (GPT-2, 2 workers, 64 MB shards; largest process)")
    for mb in mbs:
        parts = make_corpus(work, mb)
        config = write_config(work, f"rss-{mb:g}", {"id": "gpt2", "path": str(GPT2)})
        root = work / "root"
        folder = Layout(root).shards(load_config(config))
        manifest = write_shards(parts, folder, 64)
        stage = run_stage(config, root, 2)
        print(
            f"  {mb:>5g} MB corpus, {len(manifest['shards'])} shard(s): "
            f"{stage['maxrss_kb'] / 1024:7.1f} MB  ({stage['seconds']:.1f} s)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench-tokenize"))
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--big-mb", type=float, default=100.0)
    ap.add_argument("--shard-mb", type=float, default=64.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-rss", action="store_true")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print(
        f"cores: {os.cpu_count()}, "
        f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM')}"
    )
    parts = make_corpus(args.work, args.mb)
    ratios = [compare(args.work, parts, mb, args.rounds) for mb in (args.shard_mb, 4.0)]
    bytes_speed(args.work, parts)
    if not args.skip_rss:
        peak_rss(args.work, [args.mb, args.big_mb])
    print(f"\nratio stage / raw: {', '.join(f'{r:.3f}' for r in ratios)} (target >= 0.85)")


if __name__ == "__main__":
    main()
