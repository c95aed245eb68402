"""A tiny real fastText quality classifier and generated documents for it to score."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.text.quality import classifier_text

GOOD = [
    "river",
    "harbour",
    "lantern",
    "meadow",
    "orchard",
    "library",
    "garden",
    "morning",
    "window",
    "village",
    "teacher",
    "careful",
    "patient",
    "gentle",
    "bright",
    "quiet",
    "story",
    "letter",
    "journey",
    "mountain",
]
BAD = [
    "click",
    "cheap",
    "offer",
    "casino",
    "bonus",
    "winner",
    "prize",
    "discount",
    "deal",
    "hurry",
    "subscribe",
    "unlimited",
    "free",
    "guaranteed",
    "instant",
    "promo",
    "coupon",
    "jackpot",
    "lottery",
]
COMMON = ["the", "a", "of", "and", "to", "in", "was", "with", "for", "on", "at", "by", "from"]


def sentence(rng: random.Random, good_share: float, words: int) -> str:
    """`words` words, each from GOOD with probability `good_share` (else BAD), with COMMON ones."""
    out = []
    for _ in range(words):
        pool = COMMON if rng.random() < 0.3 else GOOD if rng.random() < good_share else BAD
        out.append(rng.choice(pool))
    return " ".join(out).capitalize() + "."


def documents(n: int, seed: int = 3) -> list[str]:
    """`n` distinct documents of 30-60 words with good shares spread over [0, 1]."""
    rng = random.Random(seed)
    return [sentence(rng, rng.random(), rng.randint(30, 60)) for _ in range(n)]


def train(folder: Path) -> Path:
    """`folder/model.bin`: labels `hq` (GOOD words) and `lq` (BAD ones)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.bin"
    path.write_bytes(_trained())
    return path


@cache
def _trained() -> bytes:
    """The model's bytes, trained once per process with one thread and a fixed seed, in a fresh
    interpreter (a second `train_supervised` in one process can stop with "Encountered NaN" in
    this fastText build)."""
    rng = random.Random(11)
    lines = []
    for i in range(400):
        label = "hq" if i % 2 else "lq"
        text = sentence(rng, 0.85 if label == "hq" else 0.15, 40)
        lines.append(f"__label__{label} {classifier_text(text)}\n")
    with tempfile.TemporaryDirectory() as tmp:
        data, path = Path(tmp) / "train.txt", Path(tmp) / "model.bin"
        data.write_text("".join(lines), encoding="utf-8")
        subprocess.run([sys.executable, "-c", TRAIN, str(data), str(path)], check=True)
        return path.read_bytes()


TRAIN = """
import sys, fasttext
model = fasttext.train_supervised(
    sys.argv[1], epoch=10, lr=0.1, dim=16, wordNgrams=2, bucket=10_000, thread=1, seed=1,
    minCount=1, verbose=0,
)
model.save_model(sys.argv[2])
"""


def built_classifier(root: Path, key: str, model: Path, **fields: Any) -> Path:
    """A classifier folder under `root` as its build leaves it: model.bin and MANIFEST.json
    (the keys the shard stage reads, `fields` over them)."""
    folder = root / "classifiers" / key
    folder.mkdir(parents=True)
    (folder / "model.bin").write_bytes(model.read_bytes())
    manifest = {
        "kind": "classifier",
        "name": key.rsplit("-", 1)[0],
        "partition_key": key,
        "model": {
            "name": "model.bin",
            "sha256": file_sha256(folder / "model.bin"),
            "bytes": model.stat().st_size,
        },
        "labels": ["hq", "lq"],
        "positive_label": "hq",
        "lowercase": False,
        **fields,
    }
    (folder / "MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder
