"""`corpus classifier train` end to end on `--examples` documents per class, default settings.

    python bench/bench_classifier_train.py [--examples 100000] [--out bench/out/classifier-train]

`hq` documents are 5-15 sentences drawn (seeded) from the TinyStories sample in `data/`; `cc`
documents are tests/support/junk.py's generated pages. Both are written as JSONL, then one
`corpus classifier train` (a fresh data root, the classifier defaults: word bigrams, dim 16,
5 epochs, 2,000,000 buckets, one thread) is timed, its progress lines stamped to split the
phases: fetch (into the raw cache), reading and choosing the examples, writing the training
file and fastText's training, and scoring the validation examples and publishing. Prints one
JSON line; the load average before and after goes with it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.junk import STORIES, junk_document, junk_source  # noqa: E402


def write_examples(folder: Path, count: int) -> tuple[Path, Path]:
    rng = random.Random(0)
    text = STORIES.read_text(encoding="utf-8")
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.replace("<|endoftext|>", " "))]
    sentences = [s for s in sentences if len(s) > 20]
    good, bad = folder / "hq.jsonl", folder / "cc.jsonl"
    with open(good, "w", encoding="utf-8") as fh:
        for i in range(count):
            doc = " ".join(rng.choices(sentences, k=rng.randint(5, 15)))
            fh.write(json.dumps({"id": f"hq-{i}", "text": doc}) + "\n")
    with open(bad, "w", encoding="utf-8") as fh:
        for i in range(count):
            fh.write(json.dumps({"id": f"cc-{i}", "text": junk_document(rng)}) + "\n")
    return good, bad


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=100_000)
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "classifier-train")
    args = p.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    good, bad = write_examples(args.out, args.examples)
    config = {
        "name": "bench",
        "positive": [{**junk_source(good, "hq"), "license": "cdla-sharing-1.0"}],
        "negative": [junk_source(bad, "cc")],
    }
    (args.out / "bench.json").write_text(json.dumps(config), encoding="utf-8")
    load_before = os.getloadavg()
    argv = [sys.executable, "-m", "corpus_assets.cli", "classifier", "train"]
    argv += [str(args.out / "bench.json"), "--root", str(args.out / "root"), "--json"]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stamps: dict[str, float] = {}
    assert proc.stderr is not None
    for line in proc.stderr:
        now = time.monotonic() - start
        for phase, mark in (
            ("fetched", "fetch done"),
            ("read", "classifier: training on"),
            ("trained", "classifier: trained in"),
        ):
            if mark in line and phase not in stamps:
                stamps[phase] = now
    out = proc.stdout.read() if proc.stdout else ""
    wall = time.monotonic() - start
    if proc.wait() != 0:
        raise SystemExit(f"corpus classifier train failed (exit {proc.returncode})")
    summary = json.loads(out)
    result: dict[str, Any] = {
        "examples_per_class": args.examples,
        "wall_s": round(wall, 1),
        "fetch_s": round(stamps["fetched"], 1),
        "read_and_choose_s": round(stamps["read"] - stamps["fetched"], 1),
        "write_and_train_s": round(stamps["trained"] - stamps["read"], 1),
        "score_and_publish_s": round(wall - stamps["trained"], 1),
        "model_bytes": (Path(summary["folder"]) / "model.bin").stat().st_size,
        "roc_auc": summary["validation"]["roc_auc"],
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
