"""Score and time the shard stage on a benchmark corpus with known duplicates, PII and junk.

    python bench/bench_shard.py [--mb 20] [--seed 0] [--footers 0.02] [--workers 2]
        [--out bench/out/shard] [--check]

Builds the corpus with bench/make_corpus.py (it writes truth.json), fetches it, runs the shard
stage in a subprocess (wall time and the children's CPU time), then scores the published shards
against the truth: exact, near and partial copies, junk, unique documents and PII by format.
With --check it exits 1 when a quality bar is missed (CI runs it on a small corpus). Also
checks that both editions of every Shakespeare play that has two are kept (they are not near
duplicates). If datatrove is installed (the bench extra),
bench_datatrove.py then runs datatrove's equivalent chain on the same corpus; the report adds
its numbers and our speedup over it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
from truth_score import score

REPO = Path(__file__).resolve().parent.parent
MAKE_CORPUS = REPO / "bench" / "make_corpus.py"
PLAYS = REPO / "data" / "shakespeare" / "plays.jsonl"
BARS = {
    "exact_removed": 0.995,
    "near_removed": 0.95,
    "unique_kept": 0.99,
    "junk_removed": 0.95,
    "partial_new_kept": 0.95,
}


def corpus(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "corpus_assets.cli", *args]
    proc = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr}")
    return proc


def write_config(path: Path, source_path: Path, name: str, license: str) -> Path:
    path.write_text(
        f'dataset = "bench"\nversion = "{name}"\ntokenizer = {{id = "bytes"}}\n'
        f'[[sources]]\nname = "{name}"\nkind = "jsonl"\npath = "{source_path}"\n'
        f'id_field = "id"\nlicense = "{license}"\n',
        encoding="utf-8",
    )
    return path


def timed_shard(config: Path, root: Path, workers: int) -> tuple[dict[str, object], float, float]:
    """Run the shard stage; return its summary, wall seconds and children's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = corpus(
        [
            "run",
            "--stage",
            "shard",
            "--config",
            str(config),
            "--root",
            str(root),
            "--workers",
            str(workers),
        ]
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.stdout), wall, cpu


def read_shards(root: Path, manifest: str) -> dict[str, str]:
    path = root / manifest
    m = json.loads(path.read_text(encoding="utf-8"))
    texts: dict[str, str] = {}
    for s in m["shards"]:
        t = pq.read_table(path.parent / s["name"], columns=["id", "text"])
        texts.update(zip(t.column("id").to_pylist(), t.column("text").to_pylist(), strict=True))
    return texts


def editions_kept(out: Path) -> tuple[int, int]:
    """(plays with two editions, of which both were kept) after a shard run over the plays."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = write_config(out / "plays.toml", PLAYS, "plays", "public-domain")
    corpus(["run", "--stage", "fetch", "--config", str(cfg), "--root", str(out / "root")])
    summary, _, _ = timed_shard(cfg, out / "root", 2)
    kept = read_shards(out / "root", str(summary["manifest"]))
    titles: dict[str, list[str]] = {}
    for line in PLAYS.read_text(encoding="utf-8").splitlines():
        play = json.loads(line)
        titles.setdefault(play["title"], []).append(play["id"])
    pairs = [ids for ids in titles.values() if len(ids) > 1]
    return len(pairs), sum(all(i in kept for i in ids) for ids in pairs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0, help="make_corpus.py's seed")
    ap.add_argument("--footers", type=float, default=0.0, help="make_corpus.py's footer rate")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "shard")
    ap.add_argument("--check", action="store_true", help="exit 1 when a quality bar is missed")
    ap.add_argument("--no-datatrove", action="store_true", help="skip the datatrove comparison")
    args = ap.parse_args()
    out = args.out.resolve()
    data = out / (f"corpus-{args.mb:g}mb" + (f"-s{args.seed}" if args.seed else ""))
    data = data.with_name(data.name + (f"-f{args.footers:g}" if args.footers else ""))
    if not (data / "truth.json").exists():
        make = [sys.executable, str(MAKE_CORPUS), "--out", str(data), "--mb", str(args.mb)]
        make += ["--footers", str(args.footers)]
        subprocess.run([*make, "--seed", str(args.seed)], check=True, capture_output=True)
    truth = json.loads((data / "truth.json").read_text(encoding="utf-8"))
    root = out / f"root-{args.mb:g}mb-w{args.workers}"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    cfg = write_config(out / "bench.toml", data / "part-*.jsonl", "bench", "cdla-sharing-1.0")
    corpus(["run", "--stage", "fetch", "--config", str(cfg), "--root", str(root)])
    summary, wall, cpu = timed_shard(cfg, root, args.workers)
    result = score(truth, read_shards(root, str(summary["manifest"])))
    mb = truth["bytes"] / 1e6
    pairs, both = editions_kept(out / "plays")
    report = {
        "corpus_mb": round(mb, 2),
        "documents": truth["documents"],
        "truth": {k: len(truth[k]) for k in ("unique", "exact", "near", "partial", "junk", "pii")},
        "workers": args.workers,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "mb_per_s_wall": round(mb / wall, 2),
        "mb_per_cpu_s": round(mb / cpu, 2),
        **{k: (round(v, 5) if isinstance(v, float) else v) for k, v in result.items()},
        "shakespeare_two_editions_both_kept": f"{both}/{pairs}",
        "dropped": summary["dropped"],
        "duplicates": summary["duplicates"],
        "partial_copies": summary["partial_copies"],
        "pii_replaced": summary["pii"],
    }
    if args.no_datatrove:
        report["datatrove"] = "skipped: --no-datatrove"
    elif importlib.util.find_spec("datatrove") is None:
        report["datatrove"] = "skipped: datatrove is not installed (the optional bench extra)"
    else:  # its equivalent chain on the same input (bench_datatrove.py), for the ratio
        from bench_datatrove import run_datatrove

        dt = run_datatrove(data, out / f"datatrove-{args.mb:g}mb-w{args.workers}", args.workers)
        report["datatrove"] = dt
        report["speedup_vs_datatrove_wall"] = round(dt["wall_s"] / wall, 2)
        report["speedup_vs_datatrove_cpu"] = round(dt["cpu_s"] / cpu, 2)
    print(json.dumps(report, indent=1))
    failed = [k for k, bar in BARS.items() if float(result[k]) < bar]
    failed += [f"pii_left.{k}" for k, v in result["pii_left"].items() if v]
    if both != pairs:
        failed.append("shakespeare editions")
    if failed:
        print(f"below the bar: {', '.join(failed)}", file=sys.stderr)
    return 1 if (failed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
