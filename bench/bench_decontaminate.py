"""The shard stage with and without `[decontaminate]` against a 10k-item eval set, side by side.

    python bench/bench_decontaminate.py [--mb 20] [--items 10000] [--seeded 100] [--runs 3]
                                        [--workers 2] [--out bench/out/decontaminate]

Builds the benchmark corpus (bench/make_corpus.py, as bench_shard.py does) plus one part of
`--seeded` extra documents, each a story of the corpus with one eval item's question pasted in.
The eval set is `--items` generated question/answer items (30-60 and 5-20 words drawn with
their frequencies from the words of `data/`), written as JSONL. Both configs read the same
input; the second adds `[decontaminate]` (13-grams, drop). The eval index is built once
(timed inside the stage, recorded in its `_INDEX.json`), then the two shard runs alternate
`--runs` times each, the build's outputs removed between runs (`corpus cleanup`). Prints the
wall and CPU times, the throughput ratio (decontaminated / plain), the index size and build
time, the CPU time of the screening alone (in this process, best of 3), and how many seeded
documents were dropped (all of them should be).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench_shard import MAKE_CORPUS, REPO, corpus, read_shards, timed_shard

DATA = [REPO / "data" / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"]
PLAYS = REPO / "data" / "shakespeare" / "plays.jsonl"


def vocabulary() -> tuple[list[str], list[int]]:
    """The words of data/ with their counts (for frequency-weighted sampling)."""
    text = DATA[0].read_text(encoding="utf-8")
    text += "".join(json.loads(line)["text"] for line in PLAYS.open(encoding="utf-8"))
    counts = Counter(re.findall(r"[A-Za-z']+", text))
    words = sorted(counts)
    return words, [counts[w] for w in words]


def eval_set(path: Path, items: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    words, weights = vocabulary()

    def sentence(lo: int, hi: int) -> str:
        return " ".join(rng.choices(words, weights, k=rng.randint(lo, hi)))

    rows = [
        {"id": f"item-{i:05d}", "question": sentence(30, 60) + "?", "answer": sentence(5, 20)}
        for i in range(items)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def seeded_part(data: Path, rows: list[dict[str, str]], count: int, seed: int) -> list[str]:
    """A part file of unique corpus documents with an eval question pasted in; their ids."""
    rng = random.Random(seed)
    unique = set(json.loads((data / "truth.json").read_text(encoding="utf-8"))["unique"])
    rows_0 = [json.loads(line) for line in (data / "part-00000.jsonl").open(encoding="utf-8")]
    stories = [r["text"] for r in rows_0 if r["id"] in unique][:count]
    docs = []
    for i, story in enumerate(stories):
        paragraphs = story.split("\n\n")
        at = rng.randint(0, len(paragraphs))
        paragraphs.insert(at, rows[rng.randrange(len(rows))]["question"])
        docs.append({"id": f"seeded-{i:04d}", "text": "\n\n".join(paragraphs)})
    (data / "seeded.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    return [d["id"] for d in docs]


def screen_cpu(data: Path, index_folder: Path) -> float:
    """CPU seconds of the screening alone, in this process: n-gram hashes of every document in
    batches of 1,024, then the index lookup (what each shard task adds)."""
    from corpus_assets.core.stages.screen_index import EvalIndexInfo, load_eval_index
    from corpus_assets.core.text.contamination import find
    from corpus_assets.core.text.ngrams import ngram_hashes

    texts = [json.loads(line)["text"] for p in sorted(data.glob("*.jsonl")) for line in p.open()]
    index = load_eval_index(EvalIndexInfo("evals", index_folder, {}))
    start = time.process_time()
    for i in range(0, len(texts), 1024):
        find(ngram_hashes(texts[i : i + 1024], 13), index)
    return time.process_time() - start


def write_config(path: Path, data: Path, version: str, decontaminate: bool) -> Path:
    body = (
        f'dataset = "bench"\nversion = "{version}"\ntokenizer = {{id = "bytes"}}\n'
        f'[[sources]]\nname = "bench"\nkind = "jsonl"\npath = "{data}/*.jsonl"\n'
        f'id_field = "id"\nlicense = "cdla-sharing-1.0"\n'
    )
    if decontaminate:
        body += (
            '[decontaminate]\nngram = 13\nmode = "drop"\n[[decontaminate.sets]]\n'
            f'name = "evals"\npath = "{data.parent}/evals.jsonl"\n'
            'fields = ["question", "answer"]\nid_field = "id"\n'
        )
    path.write_text(body, encoding="utf-8")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--seeded", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "decontaminate")
    args = ap.parse_args()
    out = args.out.resolve()
    data = out / f"corpus-{args.mb:g}mb"
    if not (data / "truth.json").exists():
        make = [sys.executable, str(MAKE_CORPUS), "--out", str(data), "--mb", str(args.mb)]
        subprocess.run([*make, "--seed", "0"], check=True, capture_output=True)
    rows = eval_set(out / "evals.jsonl", args.items, seed=16)
    seeded = seeded_part(data, rows, args.seeded, seed=16)
    root = out / "root"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    plain = write_config(out / "plain.toml", data, "plain", False)
    decon = write_config(out / "decon.toml", data, "decon", True)
    for cfg in (plain, decon):
        corpus(["run", "--stage", "fetch", "--config", str(cfg), "--root", str(root)])
    first, index_wall, _ = timed_shard(decon, root, args.workers)  # builds the eval index
    (index,) = (root / "raw" / "_decontam").iterdir()
    record = json.loads((index / "_INDEX.json").read_text(encoding="utf-8"))
    times: dict[str, list[tuple[float, float]]] = {"plain": [], "decon": []}
    summaries = {}
    for _ in range(args.runs):
        for name, cfg in (("plain", plain), ("decon", decon)):
            corpus(["cleanup", "--config", str(cfg), "--root", str(root)])
            summary, wall, cpu = timed_shard(cfg, root, args.workers)
            times[name].append((wall, cpu))
            summaries[name] = summary
    mb = sum(p.stat().st_size for p in data.glob("*.jsonl")) / 1e6
    wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
    manifest = json.loads((root / summaries["decon"]["manifest"]).read_text(encoding="utf-8"))
    audit = (root / summaries["decon"]["manifest"]).parent / "audit.jsonl"
    dropped = {json.loads(line)["id"] for line in audit.open(encoding="utf-8")}
    left = set(read_shards(root, str(summaries["decon"]["manifest"]))) & set(seeded)
    report = {
        "input_mb": round(mb, 2),
        "documents_in": summaries["plain"]["documents_in"],
        "workers": args.workers,
        "runs": args.runs,
        "wall_s": {k: [round(w, 2) for w, _ in v] for k, v in times.items()},
        "cpu_s": {k: [round(c, 2) for _, c in v] for k, v in times.items()},
        "mb_per_s_wall_median": {k: round(mb / w, 2) for k, w in wall.items()},
        "throughput_ratio_wall": round(wall["plain"] / wall["decon"], 3),
        "throughput_ratio_cpu": round(cpu["plain"] / cpu["decon"], 3),
        "eval_items": record["items"],
        "eval_ngrams_indexed": record["ngrams"],
        "index_bytes": record["index_bytes"],
        "index_files_bytes": sum(p.stat().st_size for p in index.iterdir()),
        "index_build_s": record["build_seconds"],
        "screen_only_cpu_s_in_process": round(min(screen_cpu(data, index) for _ in range(3)), 3),
        "first_decon_run_wall_s": round(index_wall, 2),
        "seeded_documents": len(seeded),
        "seeded_dropped": sum(i in dropped for i in seeded),
        "seeded_left_in_shards": len(left),
        "contaminated_total": first["dropped"].get("contaminated", 0),
        "decontamination": manifest["decontamination"],
        "documents_out": {k: s["documents_out"] for k, s in summaries.items()},
    }
    print(json.dumps(report, indent=1))
    return 0 if report["seeded_dropped"] == len(seeded) else 1


if __name__ == "__main__":
    sys.exit(main())
