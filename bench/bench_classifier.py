"""A fastText quality classifier: agreement with datatrove, the shard stage's cost, training time.

    python bench/bench_classifier.py [--mb 20] [--workers 2] [--train 100000]
        [--out bench/out/classifier] [--check]

1. Training: a fastText supervised model with the classifier defaults (word bigrams, dim 16,
   5 epochs, 2,000,000 buckets, one thread, seed 0) on `--train` examples: `hq` are the real
   stories and scenes of `data/` (drawn with replacement), `cc` are texts of
   bench/make_corpus.py's Markov chains and its junk. Reported: the seconds a training takes
   (in a process of its own, as the stage trains), and the model's sha256 for two trainings
   in a row (equal: the same examples and settings give the same bytes).
2. Agreement: the documents of a benchmark corpus (bench/make_corpus.py, `--mb`) scored by
   our `Scorer` (core/text/quality.py) and filtered by datatrove's `FastTextClassifierFilter`
   on the same model file, `keep_labels=("hq", t)`, for thresholds t of 0.1, 0.5 and 0.9:
   keep/drop agreement, and every disagreement with both scores. datatrove replaces newlines
   with `newline_replacement`, "" by default (it joins the last word of a line to the first
   of the next); we give it " ", as DCLM's scorer does, and also report its default.
3. Cost: the shard stage (`corpus run --stage shard`, `--workers`) on the same corpus without
   a classifier and with `[[filters.classifiers]]` (the model, `min_score = 0.5`): CPU seconds
   of each (the stage and its workers), and their ratio. Goal <= 1.3x. Part of the cost does
   not grow with the corpus: the model's sha256 and fastText's load (measured on their own);
   `cpu_ratio_per_document` is the ratio without it, what a large corpus approaches.
4. Dims (`--dims 16,64`): the same examples trained at each `dim` on 90 %, scored on the other
   10 %: the model's size, its validation ROC AUC, and `predict`'s CPU a benchmark document.

A table goes to stderr, one JSON line to stdout. With --check it exits 1 when agreement at
0.5 is under 99.9 % or the cost ratio over 1.3x. Needs the `bench` extra (datatrove).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import make_corpus  # noqa: E402
import numpy as np  # noqa: E402

from corpus_assets.core.classifier_config import TrainingSpec  # noqa: E402
from corpus_assets.core.stages.classifier import fasttext_settings, roc_auc  # noqa: E402
from corpus_assets.core.stages.classifier_fit import fit  # noqa: E402
from corpus_assets.core.text.quality import Scorer, classifier_text  # noqa: E402

THRESHOLDS = (0.1, 0.5, 0.9)
AGREEMENT_GOAL = 0.999
COST_GOAL = 1.3
SETTINGS = fasttext_settings(TrainingSpec())  # the classifier defaults


def examples(n: int, seed: int = 0) -> list[str]:
    """`n` fastText lines, half `hq` (real text), half `cc` (Markov text and junk)."""
    rng = random.Random(seed)
    real_stories, real_scenes = make_corpus.stories(), make_corpus.scenes()
    real = real_stories + real_scenes
    chains = {"stories": make_corpus.Markov(real_stories), "plays": make_corpus.Markov(real_scenes)}
    lines = []
    for i in range(n):
        if i % 2 == 0:
            text, label = rng.choice(real), "hq"
        elif rng.random() < 0.2:
            text, label = make_corpus.junk(rng, real_stories)[1], "cc"
        else:
            chain = chains["plays" if rng.random() < 0.4 else "stories"]
            text, label = chain.generate(rng, rng.choice([60, 120, 200])), "cc"
        lines.append(f"__label__{label} {classifier_text(text)}")
    rng.shuffle(lines)
    return lines


def train(lines: list[str], folder: Path) -> tuple[Path, float, list[str]]:
    """The model trained twice on `lines`, each in a process of its own (classifier_fit: fastText
    keeps state between trainings in one process); its path, the first's seconds, both sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "train.txt"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    digests, seconds = [], 0.0
    for n in range(2):
        path = folder / f"model-{n}.bin"
        start = time.perf_counter()
        fit(SETTINGS, str(data), str(path), lambda _line: None)
        seconds = seconds or time.perf_counter() - start
        digests.append(hashlib.sha256(path.read_bytes()).hexdigest())
    return folder / "model-0.bin", seconds, digests


def dims(lines: list[str], docs: list[dict[str, str]], folder: Path, sizes: list[int]) -> dict:
    """Per `dim`: the model's MB, its validation ROC AUC (trained on 90 % of `lines`, scored
    on the other 10 %) and `predict`'s microseconds a document of the benchmark corpus."""
    folder.mkdir(parents=True, exist_ok=True)
    cut = len(lines) * 9 // 10
    data = folder / "train.txt"
    data.write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
    held = [line.partition(" ") for line in lines[cut:]]
    positive = np.array([label == "__label__hq" for label, _, _ in held])
    texts = [classifier_text(d["text"]) for d in docs]
    out = {}
    for dim in sizes:
        path = folder / f"dim-{dim}.bin"
        fit({**SETTINGS, "dim": dim}, str(data), str(path), lambda _line: None)
        scorer = Scorer(path, "hq")
        scores = np.array(scorer.many([text for _, _, text in held]))
        start = time.process_time()
        scorer.many(texts)
        per_doc = (time.process_time() - start) / len(texts)
        out[str(dim)] = {
            "model_mb": round(path.stat().st_size / 1e6, 1),
            "roc_auc": round(roc_auc(scores, positive) or 0.0, 5),
            "predict_us_per_document": round(per_doc * 1e6, 1),
        }
    return out


def documents(folder: Path) -> list[dict[str, str]]:
    docs = []
    for part in sorted(folder.glob("part-*.jsonl")):
        docs.extend(json.loads(line) for line in part.read_text(encoding="utf-8").splitlines())
    return docs


def agreement(model: Path, docs: list[dict[str, str]]) -> dict[str, Any]:
    """Our keep/drop against datatrove's, per threshold (and datatrove's default newlines)."""
    from datatrove.data import Document
    from datatrove.pipeline.filters import FastTextClassifierFilter

    ours = Scorer(model, "hq").many([d["text"] for d in docs])
    out: dict[str, Any] = {"documents": len(docs)}
    for replacement, name in ((" ", "space"), ("", "datatrove_default")):
        for t in THRESHOLDS:
            theirs = FastTextClassifierFilter(
                str(model),
                keep_labels=("hq", t),
                newline_replacement=replacement,
                save_labels_in_metadata=True,
            )
            differ = []
            for doc, score in zip(docs, ours, strict=True):
                d = Document(text=doc["text"], id=doc["id"])
                kept = bool(theirs.filter(d))
                if kept != (score >= t):
                    differ.append(
                        {"id": doc["id"], "ours": score, "datatrove": d.metadata["__label__hq"]}
                    )
            key = f"{name}@{t}"
            out[key] = {"agreement": 1 - len(differ) / len(docs), "disagreements": differ[:20]}
    return out


def corpus(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "corpus_assets.cli", *args]
    proc = subprocess.run(
        cmd, text=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr}")
    return proc


def write_config(path: Path, source: Path, version: str, model: Path | None) -> Path:
    text = (
        f'dataset = "bench"\nversion = "{version}"\ntokenizer = {{id = "bytes"}}\n'
        f'[[sources]]\nname = "bench"\nkind = "jsonl"\npath = "{source}/part-*.jsonl"\n'
        'id_field = "id"\nlicense = "cc-by-4.0"\n'
    )
    if model is not None:
        text += (
            f'[[filters.classifiers]]\nname = "hq"\nmodel = "{model}"\nlabel = "hq"\n'
            "min_score = 0.5\n"
        )
    path.write_text(text, encoding="utf-8")
    return path


def shard_cpu(config: Path, root: Path, workers: int) -> tuple[float, float]:
    """CPU seconds (the stage and its children) and wall seconds of one shard stage."""
    corpus("run", "--stage", "fetch", "--config", str(config), "--root", str(root))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    corpus(
        "run", "--stage", "shard", "--config", str(config), "--root", str(root),
        "--workers", str(workers),
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def cost(out: Path, source: Path, model: Path, workers: int, runs: int) -> dict[str, Any]:
    """The shard stage's CPU without and with the classifier, alternating, best of `runs`."""
    times: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
    for n in range(runs):
        for name, m in (("without", None), ("with", model)):
            root = out / f"root-{name}"
            shutil.rmtree(root, ignore_errors=True)
            config = write_config(out / f"{name}.toml", source, name, m)
            times[name].append(shard_cpu(config, root, workers))
            if n == runs - 1:
                shutil.rmtree(root, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    fixed = model_cost(model)
    return {
        "cpu_s": {k: round(v[0], 2) for k, v in best.items()},
        "wall_s": {k: round(v[1], 2) for k, v in best.items()},
        "cpu_ratio": round(best["with"][0] / best["without"][0], 3),
        "model_hash_and_load_cpu_s": round(fixed, 2),
        "cpu_ratio_per_document": round((best["with"][0] - fixed) / best["without"][0], 3),
    }


def model_cost(model: Path) -> float:
    """CPU seconds a stage spends on the model once, whatever the corpus: its sha256 (the
    config's pin) and fastText's load, in a process of their own."""
    code = (
        "import resource, sys\n"
        "from corpus_assets.core.store.digests import file_sha256\n"
        "from corpus_assets.core.text.quality import load_model\n"
        "r = resource.getrusage(resource.RUSAGE_SELF)\n"
        "file_sha256(sys.argv[1]); load_model(sys.argv[1])\n"
        "s = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print(s.ru_utime - r.ru_utime + s.ru_stime - r.ru_stime)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(model)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0, help="benchmark corpus size, MB")
    ap.add_argument("--train", type=int, default=100_000, help="training examples")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "classifier")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--skip-agreement", action="store_true", help="only training and cost")
    ap.add_argument(
        "--dims", default="16,64", help="dims to compare (quality, predict time); '' for none"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    model, train_s, digests = train(examples(args.train), args.out / "model")
    source = args.out / f"corpus-{args.mb:g}mb"
    if not (source / "truth.json").exists():
        make_corpus.write(make_corpus.build(args.mb, 0), source, 8, args.mb)
    os.environ.setdefault("HF_HOME", str(args.out / "hf"))  # datatrove's copy of the model
    agree = {} if args.skip_agreement else agreement(model, documents(source))
    spend = cost(args.out, source, model, args.workers, args.runs)
    sizes = [int(d) for d in args.dims.split(",") if d]
    by_dim = dims(examples(args.train), documents(source), args.out / "dims", sizes)
    result = {
        "load_average_before": load,
        "train_examples": args.train,
        "train_s": round(train_s, 2),
        "same_model_bytes": digests[0] == digests[1],
        "model_sha256": digests[0],
        "agreement": agree,
        "cost": spend,
        "dims": by_dim,
    }
    print(f"training {args.train:,} examples: {train_s:.1f} s", file=sys.stderr)
    for key, value in agree.items():
        if isinstance(value, dict):
            print(f"agreement {key:24} {value['agreement']:.5f}", file=sys.stderr)
    print(
        f"shard CPU with / without: {spend['cpu_ratio']}x {spend['cpu_s']}; the model's sha256 "
        f"and load {spend['model_hash_and_load_cpu_s']} s; per document "
        f"{spend['cpu_ratio_per_document']}x",
        file=sys.stderr,
    )
    for dim, row in by_dim.items():
        print(
            f"dim {dim:>4}: {row['model_mb']} MB, ROC AUC {row['roc_auc']}, predict "
            f"{row['predict_us_per_document']} us a document",
            file=sys.stderr,
        )
    print(json.dumps(result))
    problems = []
    if agree and agree["space@0.5"]["agreement"] < AGREEMENT_GOAL:
        problems.append(f"agreement {agree['space@0.5']['agreement']:.5f} < {AGREEMENT_GOAL}")
    if spend["cpu_ratio"] > COST_GOAL:
        problems.append(f"shard CPU {spend['cpu_ratio']}x > {COST_GOAL}x")
    if args.check and problems:
        sys.exit("; ".join(problems))


if __name__ == "__main__":
    main()
