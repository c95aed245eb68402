"""Fetching a remote compressed source: our download against curl, and what decompression costs.

    python bench/bench_fetch.py [--mb 200] [--runs 3] [--out bench/out/fetch] [--check]

Writes a `.jsonl.zst` of about `--mb` MB (JSONL documents of random letters, zstd level 3; the
same data uncompressed beside it), serves it from a local nginx (tests/support/mirrors.py, on
loopback), and times, alternating, `--runs` times each:

- `curl`: `curl -s -o FILE URL` (the reference download);
- `download`: our downloader alone (`core/store/remote.download`, in this process), to a file
  (ranged GET, fsync at the end; like curl, it takes no hash);
- `sha256`: the sha256 of the downloaded file, which the fetch stage takes in a thread while
  it parses the file (timed alone here, so the table shows what it costs);
- `fetch`: the whole fetch stage on the URL (`corpus run --stage fetch`: download, decompress,
  parse, write the raw Parquet parts), and the same stage on the local `.jsonl.zst` and on the
  local uncompressed `.jsonl` (what decompression adds to a fetch);
- `shard`: the shard stage after each local fetch (it reads the raw Parquet parts, so it costs
  the same whatever the source's compression).

Prints one JSON object: the best wall time of each (and all of them), MB/s of the compressed
file for the downloads, and the ratios `download_vs_curl` (our MB/s over curl's; goal >= 0.9),
`fetch_url_vs_zst` (the fetch stage's wall time on the URL over the local .jsonl.zst's: what
downloading and hashing add to a fetch) and `fetch_zst_vs_plain` (on the .jsonl.zst over the
.jsonl's).
With --check it exits 1 when `download_vs_curl` is under 0.9.

S3 (`--s3-objects N`, 2,000 by default, 0 to skip; `--part s3` runs it alone): N small JSONL
objects in moto's S3 server on loopback (tests/support/mirrors.py), downloaded in this process
from a glob over them, alternating, `--runs` times each:

- `s3_today`: the request pattern the fetch had before its S3 client: an fsspec glob, then per
  object, one at a time, a ranged GET and a HEAD (`remote._Store(..., via_fsspec=True)`), each
  into a part file, fsynced and renamed;
- `s3_serial`: the fetch's S3 download (one GET per object, checked against the listing's ETag
  and MD5, its identity kept beside it), one object at a time;
- `s3_parallel`: the same, `parallel.WORKERS` objects at a time (what the fetch stage does);
- `s3_fetch`: the whole fetch stage on the glob (`corpus run --stage fetch`).

It prints the best of each and `s3_parallel_vs_today` (today's time over the parallel one's;
goal >= 5; --check exits 1 under it) and `s3_parallel_vs_serial`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zstandard

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.mirrors import nginx, s3_client, s3_server  # noqa: E402

from corpus_assets.core.store import parallel, remote  # noqa: E402
from corpus_assets.core.store.atomic import fsync_dir  # noqa: E402
from corpus_assets.core.store.digests import file_sha256  # noqa: E402

LETTERS = bytes((97 + b % 26) if b % 32 < 26 else 32 for b in range(256))
GOAL = 0.9
S3_GOAL = 5.0


def write_source(folder: Path, mb: float, seed: int = 0) -> tuple[Path, Path]:
    """`docs.jsonl` and `docs.jsonl.zst` of the same documents, about `mb` MB compressed."""
    plain, packed = folder / "docs.jsonl", folder / "docs.jsonl.zst"
    if packed.exists() and plain.exists():
        return plain, packed
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    compressor = zstandard.ZstdCompressor(level=3)
    n = 0
    with (
        open(plain, "wb") as out,
        open(packed, "wb") as raw,
        compressor.stream_writer(raw) as zout,
    ):
        while raw.tell() < mb * 1e6:
            text = rng.randbytes(8_000_000).translate(LETTERS).decode("ascii")
            lines = []
            pos = 0
            while pos < len(text):
                size = rng.randint(400, 3000)
                lines.append(json.dumps({"id": f"d{n:08d}", "text": text[pos : pos + size]}))
                pos += size
                n += 1
            block = ("\n".join(lines) + "\n").encode("ascii")
            out.write(block)
            zout.write(block)
            zout.flush()
    return plain, packed


def config(folder: Path, name: str, path: str) -> Path:
    out = folder / f"{name}.json"
    source = {"name": name, "kind": "jsonl", "path": path, "id_field": "id", "license": "cc0-1.0"}
    spec = {"dataset": "bench", "version": name, "tokenizer": {"id": "bytes"}, "sources": [source]}
    out.write_text(json.dumps(spec), encoding="utf-8")
    return out


def corpus(*args: str) -> float:
    """Run `corpus ARGS`; its wall seconds."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "corpus_assets.cli", *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"corpus {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return time.perf_counter() - start


def timed_curl(url: str, dest: Path) -> float:
    dest.unlink(missing_ok=True)
    start = time.perf_counter()
    subprocess.run(["curl", "-s", "-f", "-o", str(dest), url], check=True)
    return time.perf_counter() - start


def timed_download(url: str, dest: Path) -> float:
    dest.unlink(missing_ok=True)
    start = time.perf_counter()
    (item,) = remote.list_files("bench", url)
    remote.download("bench", item, dest)
    return time.perf_counter() - start


def timed_sha256(path: Path) -> float:
    start = time.perf_counter()
    file_sha256(path)
    return time.perf_counter() - start


def stage_pair(out: Path, name: str, path: str) -> tuple[float, float]:
    """The fetch stage, then the shard stage, on a fresh root: their wall seconds."""
    root = out / f"root-{name}"
    shutil.rmtree(root, ignore_errors=True)
    cfg = str(config(out, name, path))
    fetch = corpus("run", "--stage", "fetch", "--config", cfg, "--root", str(root))
    shard = corpus("run", "--stage", "shard", "--config", cfg, "--root", str(root))
    shutil.rmtree(root, ignore_errors=True)
    return fetch, shard


def put_objects(env: dict[str, str], n: int) -> str:
    """`n` small JSONL objects in a new bucket; the glob over them."""
    from concurrent.futures import ThreadPoolExecutor

    client = s3_client(env)
    client.create_bucket(Bucket="bench")

    def put(i: int) -> None:
        doc = {"id": f"d{i:06d}", "text": f"small object {i} " + "x" * (i % 300)}
        client.put_object(Bucket="bench", Key=f"many/part-{i:06d}.jsonl", Body=json.dumps(doc))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(n)))
    return "s3://bench/many/part-*.jsonl"


def timed_s3_today(url: str, folder: Path) -> float:
    """The old request pattern: fsspec glob; per object a ranged GET, then a HEAD; serial."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    start = time.perf_counter()
    store = remote._Store("bench", remote._quiet, via_fsspec=True)
    for item in store.list(url):
        part = folder / f"{item.name}.part"
        with remote._Sink(part) as sink:
            store.fetch(item, sink)
        part.rename(folder / item.name)
        fsync_dir(folder)
    seconds = time.perf_counter() - start
    shutil.rmtree(folder, ignore_errors=True)
    return seconds


def timed_s3_download(url: str, folder: Path, workers: int) -> float:
    """The fetch's S3 listing and downloads, `workers` at a time."""
    from corpus_assets.core.store.progress import Progress, silent

    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    items = remote.list_files("bench", url)
    parallel.download_all(
        "bench",
        items,
        lambda item, p: remote.download("bench", item, folder / item.name, p.note),
        Progress("bench", silent),
        workers,
    )
    seconds = time.perf_counter() - start
    shutil.rmtree(folder, ignore_errors=True)
    return seconds


def bench_s3(out: Path, objects: int, runs: int) -> dict[str, Any]:
    """Times of the S3 part (see the module docstring), and their ratios."""
    import os

    times: dict[str, list[float]] = {}
    with s3_server(out / "moto") as env:
        os.environ.update(env)  # this process's clients (and the stage's) find the server
        url = put_objects(env, objects)
        for _ in range(runs):
            times.setdefault("s3_today", []).append(timed_s3_today(url, out / "s3-today"))
            times.setdefault("s3_serial", []).append(timed_s3_download(url, out / "s3-1", 1))
            times.setdefault("s3_parallel", []).append(
                timed_s3_download(url, out / "s3-n", parallel.WORKERS)
            )
            root = out / "root-s3"
            shutil.rmtree(root, ignore_errors=True)
            cfg = str(config(out, "s3", url))
            times.setdefault("s3_fetch", []).append(
                corpus("run", "--stage", "fetch", "--config", cfg, "--root", str(root))
            )
            shutil.rmtree(root, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    return {
        "s3_objects": objects,
        "s3_workers": parallel.WORKERS,
        "s3_best_s": {k: round(v, 2) for k, v in best.items()},
        "s3_all_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "s3_parallel_vs_today": round(best["s3_today"] / best["s3_parallel"], 2),
        "s3_parallel_vs_serial": round(best["s3_serial"] / best["s3_parallel"], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200.0, help="size of the .jsonl.zst, MB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "fetch")
    ap.add_argument("--check", action="store_true", help=f"exit 1 below {GOAL}x curl")
    ap.add_argument("--s3-objects", type=int, default=2000, help="small S3 objects; 0: no S3")
    ap.add_argument("--part", choices=("all", "http", "s3"), default="all")
    args = ap.parse_args()
    out = args.out.resolve()
    s3: dict[str, Any] = {}
    if args.part != "http" and args.s3_objects:
        s3 = bench_s3(out, args.s3_objects, args.runs)
    if args.part == "s3":
        print(json.dumps(s3, indent=2))
        check_s3(s3, args.check)
        return
    plain, packed = write_source(out / f"served-{args.mb:g}mb", args.mb)
    mb = packed.stat().st_size / 1e6
    times: dict[str, list[float]] = {}
    with nginx(packed.parent, out / "nginx") as base:
        url = f"{base}/{packed.name}"
        for _ in range(args.runs):  # alternating, so a change of load hits all alike
            times.setdefault("curl", []).append(timed_curl(url, out / "curl.bin"))
            times.setdefault("download", []).append(timed_download(url, out / "ours.bin"))
            times.setdefault("sha256", []).append(timed_sha256(out / "ours.bin"))
            remote_fetch, _ = stage_pair(out, "url", url)
            times.setdefault("fetch_url", []).append(remote_fetch)
            for name, path in (("zst", packed), ("plain", plain)):
                fetch, shard = stage_pair(out, name, str(path))
                times.setdefault(f"fetch_{name}", []).append(fetch)
                times.setdefault(f"shard_{name}", []).append(shard)
    (out / "curl.bin").unlink(missing_ok=True)
    (out / "ours.bin").unlink(missing_ok=True)
    best = {k: min(v) for k, v in times.items()}
    report: dict[str, Any] = {
        "compressed_mb": round(mb, 1),
        "uncompressed_mb": round(plain.stat().st_size / 1e6, 1),
        "best_s": {k: round(v, 2) for k, v in best.items()},
        "all_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "mb_per_s": {
            k: round(mb / best[k], 1) for k in ("curl", "download", "sha256", "fetch_url")
        },
        "download_vs_curl": round(best["curl"] / best["download"], 2),
        "fetch_url_vs_zst": round(best["fetch_url"] / best["fetch_zst"], 2),
        "fetch_zst_vs_plain": round(best["fetch_zst"] / best["fetch_plain"], 2),
        "shard_zst_vs_plain": round(best["shard_zst"] / best["shard_plain"], 2),
        **s3,
    }
    print(json.dumps(report, indent=2))
    if args.check and report["download_vs_curl"] < GOAL:
        sys.exit(f"download at {report['download_vs_curl']}x curl, under the goal of {GOAL}x")
    check_s3(s3, args.check)


def check_s3(s3: dict[str, Any], check: bool) -> None:
    """With --check, exit 1 when the parallel S3 download is under S3_GOAL times today's."""
    if check and s3 and s3["s3_parallel_vs_today"] < S3_GOAL:
        sys.exit(f"S3 at {s3['s3_parallel_vs_today']}x today's, under the goal of {S3_GOAL}x")


if __name__ == "__main__":
    main()
