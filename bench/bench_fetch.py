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
file for the downloads, and the ratios `download_vs_curl` (our MB/s over curl's; goal >= 0.8),
`fetch_url_vs_zst` (the fetch stage's wall time on the URL over the local .jsonl.zst's: what
downloading and hashing add to a fetch) and `fetch_zst_vs_plain` (on the .jsonl.zst over the
.jsonl's).
With --check it exits 1 when `download_vs_curl` is under 0.8.
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

from support.mirrors import nginx  # noqa: E402

from corpus_assets.core.store import remote  # noqa: E402
from corpus_assets.core.store.digests import file_sha256  # noqa: E402

LETTERS = bytes((97 + b % 26) if b % 32 < 26 else 32 for b in range(256))
GOAL = 0.8


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200.0, help="size of the .jsonl.zst, MB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "fetch")
    ap.add_argument("--check", action="store_true", help=f"exit 1 below {GOAL}x curl")
    args = ap.parse_args()
    out = args.out.resolve()
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
    }
    print(json.dumps(report, indent=2))
    if args.check and report["download_vs_curl"] < GOAL:
        sys.exit(f"download at {report['download_vs_curl']}x curl, under the goal of {GOAL}x")


if __name__ == "__main__":
    main()
