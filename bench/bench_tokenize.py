"""Benchmark the tokenize stage against the raw `tokenizers` library, plus `bytes` speed and RSS.

    .venv/bin/python bench/bench_tokenize.py [--work DIR] [--mb 20] [--big-mb 100] [--rounds 3]

1. Builds the benchmark corpus (`bench/make_corpus.py`) and writes it as a shards folder
   in the shard stage's format (Parquet `id,text,source,license` of about `--shard-mb` text each,
   row groups of 1,024, and `_MANIFEST.json`), where `corpus run --stage tokenize` looks for it.
2. GPT-2: the stage against the raw baseline (`Tokenizer.encode_batch_fast` over the same texts
   in batches of 1,000 in one process, the library's threads on every core; reading the texts
   and loading the tokenizer excluded). The stage is timed twice: `corpus run --stage tokenize
   --workers 2` as a subprocess (wall: interpreter start-up, imports, tokenizer load, shard
   verification, reading, tokenizing, writing, hashing, fsync, publish), and `run_stage` inside
   a fresh process (the same minus interpreter start-up and the CLI's imports). Rounds alternate;
   medians and best-of are compared (other load on a shared machine skews medians). Run once with
   shards of `--shard-mb` (default 64, the shard stage's default: one shard for 20 MB) and once
   with 4 MB shards (5 shards). With 2 workers both run in the stage's own process with 2
   encoding threads (`corpus_assets.core.stages.tokenize_pool.plan`; `--compare-modes` times the
   alternatives: the library's own threads, and 2 worker processes).
3. `bytes`: the encoder alone (Arrow text -> uint16 ids with EOS), one shard tokenized by a
   worker (read, encode, hash, write, fsync), and the whole stage (2 worker processes), MB/s.
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

from corpus_assets.core.config import load_config
from corpus_assets.core.stages.tokenize_pool import ShardTask
from corpus_assets.core.store.atomic import write_json
from corpus_assets.core.store.layout import Layout

REPO = Path(__file__).resolve().parents[1]
MAKE_CORPUS = REPO / "bench" / "make_corpus.py"
GPT2 = REPO / "data" / "tokenizers" / "gpt2" / "tokenizer.json"
SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("source", pa.string()), ("license", pa.string())]
)

BASELINE = r"""
import glob, json, os, sys, time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
folder, tokenizer, batch, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if mode == "threads":
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
else:
    os.environ.pop("TOKENIZERS_PARALLELISM", None)
import pyarrow.parquet as pq
from tokenizers import Tokenizer
texts = []
for f in sorted(glob.glob(folder + "/shard-*.parquet")):
    texts += pq.read_table(f, columns=["text"]).column(0).to_pylist()
tok = Tokenizer.from_file(tokenizer)
batches = [texts[s : s + batch] for s in range(0, len(texts), batch)]
t0, c0 = time.perf_counter(), time.process_time()
if mode == "threads":  # batches on 2 threads of ours, the library's own threads off
    with ThreadPoolExecutor(2) as pool:
        results = pool.map(tok.encode_batch_fast, batches)
        tokens = sum(len(e) for encodings in results for e in encodings)
else:  # the library's own (Rayon) threads across each batch
    tokens = sum(len(e) for b in batches for e in tok.encode_batch_fast(b))
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"seconds": seconds, "cpu": cpu, "tokens": tokens}))
"""

IN_PROCESS = r"""
import json, os, sys, time
from pathlib import Path
import corpus_assets.core.stages.tokenize as T
from corpus_assets.core.stages.run import run_stage
mode = sys.argv[4]
if mode == "processes":  # one worker process per core, one encoding thread each
    T.plan = lambda info, workers, shards: (min(workers, shards), 1)
elif mode == "library":  # this process, the library's own threads across each batch
    T.plan = lambda info, workers, shards: (1, 1)
    T.PARALLELISM_ENV = "CORPUS_BENCH_UNUSED"
t0 = time.perf_counter()
summary = run_stage("tokenize", Path(sys.argv[1]), Path(sys.argv[2]), workers=int(sys.argv[3]))
print(json.dumps({"seconds": time.perf_counter() - t0, "result": summary}))
"""

RSS = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
seconds = time.perf_counter() - t0
if proc.returncode:
    sys.exit(proc.stderr)
use = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = use.ru_utime + use.ru_stime
result = json.loads(proc.stdout)
print(json.dumps({"seconds": seconds, "cpu": cpu, "maxrss_kb": use.ru_maxrss, "result": result}))
"""


def make_corpus(work: Path, mb: float) -> Path:
    out = work / f"corpus-{mb:g}mb"
    if not (out / "truth.json").exists():
        cmd = [sys.executable, str(MAKE_CORPUS), "--out", str(out), "--mb", str(mb)]
        subprocess.run(cmd, check=True, capture_output=True)
    return out


def write_config(work: Path, name: str, tokenizer: dict[str, str]) -> Path:
    path = work / f"{name}.json"
    # every stage pre-flights the config's sources: name a real file (the shards are made here)
    (work / "input.jsonl").write_text('{"text": "shards are written by the bench"}\n')
    source = {"name": "bench", "kind": "jsonl", "path": "input.jsonl", "license": "mit"}
    config = {"dataset": "bench", "version": name, "tokenizer": tokenizer, "sources": [source]}
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


def run_stage_timed(config: Path, root: Path, workers: int, mode: str = "plan") -> dict[str, Any]:
    """The stage from scratch, timed inside its process (interpreter start-up excluded)."""
    shutil.rmtree(root / "tokens", ignore_errors=True)
    shutil.rmtree(root / "work", ignore_errors=True)
    cmd = [sys.executable, "-c", IN_PROCESS, str(config), str(root), str(workers), mode]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def run_baseline(folder: Path, mode: str) -> dict[str, Any]:
    cmd = [sys.executable, "-c", BASELINE, str(folder), str(GPT2), "1000", mode]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def wait_for_quiet(limit_s: float = 60.0) -> float:
    """Wait (up to `limit_s`) until the machine was >= 85% idle for a second; seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        a = _cpu_times()
        time.sleep(1.0)
        b = _cpu_times()
        if (b[1] - a[1]) >= 0.85 * (b[0] - a[0]):
            break
    return time.monotonic() - t0


def _cpu_times() -> tuple[int, int]:
    """(total, idle) jiffies from /proc/stat (zeros elsewhere)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except OSError:
        return 0, 0
    return sum(fields[:8]), fields[3] + fields[4]


def text_bytes(folder: Path) -> int:
    return sum(
        sum(len(t.encode("utf-8")) for t in pq.read_table(p, columns=["text"])["text"].to_pylist())
        for p in sorted(folder.glob("shard-*.parquet"))
    )


def compare(work: Path, parts: Path, shard_mb: float, rounds: int, modes: bool) -> float:
    config = write_config(work, f"gpt2-{shard_mb:g}", {"id": "gpt2", "path": str(GPT2)})
    root = work / "root"
    folder = Layout(root).shards(load_config(config))
    manifest = write_shards(parts, folder, shard_mb)
    nbytes = text_bytes(folder)
    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    ratios: list[float] = []
    waited = 0.0
    tokens = 0

    def record(label: str, result: dict[str, Any]) -> float:
        runs.setdefault(label, []).append(result["seconds"])
        if "cpu" in result:
            cpu.setdefault(label, []).append(result["cpu"])
        return float(result["seconds"])

    for _ in range(rounds):
        waited += wait_for_quiet()
        best = min(
            record("raw, library threads", run_baseline(folder, "library")),
            record("raw, 2 threads of ours", run_baseline(folder, "threads")),
        )
        stage = run_stage(config, root, 2)
        ratios.append(best / record("stage, `corpus run`", stage))
        record("stage, in its process", run_stage_timed(config, root, 2))
        if modes:
            record("  mode: library threads", run_stage_timed(config, root, 2, "library"))
            record("  mode: 2 processes", run_stage_timed(config, root, 2, "processes"))
        tokens = stage["result"]["tokens"] - stage["result"]["documents"]  # without EOS
    print(
        f"\nGPT-2, {nbytes / 1e6:.1f} MB of text, {tokens:,} tokens, "
        f"{len(manifest['shards'])} shard(s) of <= {shard_mb:g} MB, 2 workers, {rounds} rounds "
        f"(waited {waited:.0f} s for a quiet machine)"
    )
    for label, times in runs.items():
        median = statistics.median(times)
        used = f", CPU {statistics.median(cpu[label]):.1f} s" if label in cpu else ""
        print(
            f"  {label:<24} {tokens / median:>10,.0f} tok/s {nbytes / 1e6 / median:6.2f} MB/s"
            f"  (median {median:.2f} s of {', '.join(f'{x:.2f}' for x in times)}{used})"
        )
    ratio = statistics.median(ratios)
    print(
        f"  stage / best raw, per round: {', '.join(f'{r:.3f}' for r in ratios)}; "
        f"median {ratio:.3f} (target >= 0.85)"
    )
    return ratio


def bytes_speed(work: Path, parts: Path) -> None:
    from corpus_assets.core.stages.tokenize import read_shards
    from corpus_assets.core.stages.tokenize_pool import TEXT_BATCH_BYTES, _by_size, run_task
    from corpus_assets.core.text.tokenizer import BytesEncoder, resolve_tokenizer

    config = write_config(work, "bytes", {"id": "bytes"})
    cfg = load_config(config)
    root = work / "root"
    folder = Layout(root).shards(cfg)
    write_shards(parts, folder, 4)
    texts = [pq.read_table(p, columns=["text"])["text"] for p in sorted(folder.glob("shard-*"))]
    arrays = [chunk for column in texts for chunk in column.chunks]
    sizes = [int(pc.sum(pc.binary_length(a)).as_py()) for a in arrays]
    nbytes = sum(sizes)
    encoder = BytesEncoder()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for array in arrays:
            for piece, _n in _by_size(array, TEXT_BATCH_BYTES):
                encoder.encode(piece)
        best = min(best, time.perf_counter() - t0)
    print(f"\nbytes tokenizer, {nbytes / 1e6:.1f} MB of text in 4 MB shards")
    print(f"  encoder (Arrow text -> uint16 ids + EOS)      {nbytes / 1e6 / best:8.1f} MB/s")
    shards = read_shards(folder)
    entry, out = shards.shards[0], work / "bytes-task"
    one = float("inf")
    for _ in range(3):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        task = ShardTask(
            entry["name"], str(folder / entry["name"]), entry["sha256"], entry["rows"],
            entry["bytes"], str(out), str(out / "marker.json"), resolve_tokenizer(cfg), 1000,
        )  # fmt: skip
        t0 = time.perf_counter()
        run_task(task)
        one = min(one, time.perf_counter() - t0)
    shard_bytes = sum(len(t.encode("utf-8")) for t in texts[0].to_pylist())
    print(f"  one shard in a worker (read..fsync)           {shard_bytes / 1e6 / one:8.1f} MB/s")
    cli = min(run_stage(config, root, 2)["seconds"] for _ in range(2))
    inner = min(run_stage_timed(config, root, 2)["seconds"] for _ in range(2))
    print(f"  stage, `corpus run` (2 worker processes)      {nbytes / 1e6 / cli:8.1f} MB/s")
    print(f"  stage, in its process (2 worker processes)    {nbytes / 1e6 / inner:8.1f} MB/s")


def peak_rss(work: Path, mbs: list[float]) -> None:
    print("\npeak RSS of the tokenize stage (GPT-2, 2 workers, 64 MB shards; largest process)")
    floor = (
        "import corpus_assets.core.stages.run, corpus_assets.core.stages.tokenize as t;"
        "from corpus_assets.core.text.tokenizer import load_hf;"
        f"load_hf(t.Path({str(GPT2)!r}), 'gpt2'); print('{{}}')"
    )
    # ru_maxrss survives exec: measure children of a small helper, never of this big process
    cmd = [sys.executable, "-c", RSS, sys.executable, "-c", floor]
    idle = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    floor_mb = idle["maxrss_kb"] / 1024
    print(f"  (imports + GPT-2 tokenizer loaded, nothing tokenized: {floor_mb:.1f} MB)")
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
    ap.add_argument("--compare-modes", action="store_true", help="also time other stage modes")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print(
        f"cores: {os.cpu_count()}, "
        f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM')}"
    )
    parts = make_corpus(args.work, args.mb)
    shard_sizes = (args.shard_mb, 4.0)
    ratios = [compare(args.work, parts, mb, args.rounds, args.compare_modes) for mb in shard_sizes]
    bytes_speed(args.work, parts)
    if not args.skip_rss:
        peak_rss(args.work, [args.mb, args.big_mb])
    print(
        "\nstage (`corpus run`, 2 workers) / best raw baseline, median of rounds (target >= 0.85):"
    )
    for ratio, mb in zip(ratios, shard_sizes, strict=True):
        print(f"  {mb:>4g} MB shards: {ratio:.3f}")


if __name__ == "__main__":
    main()
