"""Train a quality classifier: fetch its examples, fit fastText, score the held-out examples.

The example sources that are files or URLs go through the fetch stage into the shared raw
cache (pins, remote downloads and the cache come with it); a `shards = KEY` source is read from
that corpus build's published shards. Each class keeps at most `max_examples` documents: those
with the smallest hash of (seed, source, id), so the choice depends on nothing but the
documents. A document goes to validation when a hash of its (source, id) says so
(`validation_share` of them), whatever else changes.

fastText reads one training file, `__label__X classifier_text(text)` a line, ordered by that
hash (the classes interleaved); it trains with one thread and the config's seed, so the same
config gives the same model bytes. The folder `classifiers/<name>-<hash12>/` holds `model.bin`
and `MANIFEST.json`, built in the work folder and published by rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from corpus_assets.core.classifier_config import (
    CLASSES,
    LoadedClassifierConfig,
    ShardsSource,
    TrainingSpec,
)
from corpus_assets.core.config import LoadedConfig, SourceSpec
from corpus_assets.core.errors import ConfigError, DataError, UpstreamMissing
from corpus_assets.core.secrets import mask_data
from corpus_assets.core.stages.classifier_fit import fit
from corpus_assets.core.stages.classifier_verify import MANIFEST_FILE as MANIFEST_FILE
from corpus_assets.core.stages.classifier_verify import MODEL_FILE as MODEL_FILE
from corpus_assets.core.stages.classifier_verify import published as published
from corpus_assets.core.stages.fetch import SOURCE_FILE, fetch
from corpus_assets.core.stages.preflight import source_problems
from corpus_assets.core.stages.shard_verify import verify_shards
from corpus_assets.core.store import registry
from corpus_assets.core.store.atomic import (
    MANIFEST,
    atomic_writer,
    fresh_dir,
    publish_dir,
    remove_tree,
    write_json,
)
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text.quality import (
    LABEL_PREFIX,
    SEPARATORS,
    Scorer,
    classifier_text,
    load_model,
)
from corpus_assets.core.text.quality import model_labels as labels_of
from corpus_assets.core.version import CODE_VERSION

THRESHOLD = 0.5
BINS = 20
READ_BATCH = 1024


@dataclass(frozen=True)
class TrainResult:
    """A trained classifier: its key, folder, manifest, and whether it was already there."""

    partition_key: str
    folder: Path
    manifest: dict[str, Any]
    cached: bool

    @property
    def model_sha256(self) -> str:
        return str(self.manifest["model"]["sha256"])


@dataclass(order=True)
class _Example:
    key: int
    validation: bool = field(compare=False)
    label: str = field(compare=False)
    text: str = field(compare=False)


@dataclass
class _Class:
    """The examples of one class as they are read: the `limit` with the smallest keys."""

    label: str
    limit: int
    read: int = 0
    empty: int = 0
    heap: list[tuple[int, int, _Example]] = field(default_factory=list)

    def add(self, example: _Example) -> None:
        self.read += 1
        entry = (-example.key, self.read, example)  # a max-heap of the kept keys
        if len(self.heap) < self.limit:
            heapq.heappush(self.heap, entry)
        elif example.key < -self.heap[0][0]:
            heapq.heapreplace(self.heap, entry)

    def kept(self) -> list[_Example]:
        return [e for _, _, e in self.heap]


def train(
    cfg: LoadedClassifierConfig, layout: Layout, progress: Progress, refresh: bool = False
) -> TrainResult:
    """Train the classifier of `cfg` under `layout` unless it is published and verified.

    One process trains a classifier at a time (the build lock of its hash); a second waits,
    then finds it trained. Bad examples (a class with none, an empty source) are a one-line
    DataError, bad settings a ConfigError, and nothing is published.
    """
    key = cfg.partition_key
    final = layout.classifier(key)
    done = published(final)  # a trained classifier needs none of its sources any more
    if done is None:
        view = cfg.fetch_view()
        problems = source_problems(view) if view.model.sources else []
        if problems:
            raise ConfigError("; ".join(problems))
        shards = {s.name: shards_manifest(layout, s) for s in _shards_sources(cfg)}
        layout.secure()
        lock = layout.stage_lock(cfg.hash12, "classifier")
        with build_lock(lock, f"classifier {key}", progress.note):
            done = published(final)  # trained by the holder we waited for
            if done is None:
                return _train_and_publish(cfg, layout, view, shards, progress, refresh)
    progress.note(f"classifier {key} already trained ({done['model']['sha256'][:12]})")
    return TrainResult(key, final, done, cached=True)


def _train_and_publish(
    cfg: LoadedClassifierConfig,
    layout: Layout,
    view: LoadedConfig,
    shards: dict[str, Path],
    progress: Progress,
    refresh: bool,
) -> TrainResult:
    key = cfg.partition_key
    fetched = fetch(view, layout, Progress("fetch", progress.emit), refresh).sources
    keys = {s.name: r.source_key for s, r in zip(view.model.sources, fetched, strict=True)}
    classes, read = _read_examples(cfg, layout, keys, shards, progress)
    work = fresh_dir(layout.work_root / "classifiers" / key)
    try:
        manifest = _train_in(cfg, work, classes, read, progress)
        publish_dir(work / "staging", layout.classifier(key))
    finally:
        remove_tree(work)  # the training file holds unscrubbed documents
    progress.note(f"classifier {key} published in {layout.classifier(key)}")
    return TrainResult(key, layout.classifier(key), manifest, cached=False)


def _shards_sources(cfg: LoadedClassifierConfig) -> list[ShardsSource]:
    return [s for c in CLASSES for s in cfg.model.sources(c) if isinstance(s, ShardsSource)]


def shards_manifest(layout: Layout, spec: ShardsSource) -> Path:
    """The verified shards manifest of the corpus build a `shards = KEY` source names: found
    through its registered config, else by its hash under `corpus/*/*/`; UpstreamMissing (one
    line) when it is not built there."""
    found: Path | None = None
    with contextlib.suppress(ConfigError):  # not registered here: found by its hash below
        found = layout.shards(registry.load(layout, spec.shards)) / MANIFEST
    if found is None or not found.is_file():
        dataset_version = spec.shards[:-13]
        found = next(
            (
                p
                for p in sorted(layout.root.glob(f"corpus/*/*/{spec.shards[-12:]}/{MANIFEST}"))
                if f"{p.parts[-4]}-{p.parts[-3]}" == dataset_version
            ),
            None,
        )
    if found is None:
        raise UpstreamMissing(
            "shards",
            f"source {spec.name!r}: corpus build {spec.shards} is not built under "
            f"{layout.root} (no corpus/*/*/{spec.shards[-12:]}/{MANIFEST})",
        )
    problems = verify_shards(found)
    if problems:
        raise DataError(f"source {spec.name!r}: {found} does not verify: {problems[0]}")
    return found


def _read_examples(
    cfg: LoadedClassifierConfig,
    layout: Layout,
    keys: dict[str, str],
    shards: dict[str, Path],
    progress: Progress,
) -> tuple[dict[str, _Class], list[dict[str, Any]]]:
    """Each class's kept examples, and a record of every source read."""
    m = cfg.model
    classes = {c: _Class(m.label(c), m.max_examples) for c in CLASSES}
    read: list[dict[str, Any]] = []
    for c in CLASSES:
        for spec in m.sources(c):
            if isinstance(spec, SourceSpec):
                record = _raw_record(layout, keys[spec.name])
                docs = _raw_docs(layout.raw_source(keys[spec.name]), record)
                info = {"source_key": keys[spec.name], "input_sha256": record["input_sha256"]}
            else:
                docs = _shard_docs(shards[spec.name])
                info = {"shards": spec.shards, "manifest_sha256": file_sha256(shards[spec.name])}
            before = classes[c].read
            _add_docs(cfg, spec.name, docs, classes[c], progress)
            read.append(
                {"class": c, "name": spec.name, **info, "documents": classes[c].read - before}
            )
            if classes[c].read == before:
                raise DataError(f"{c} source {spec.name!r} holds no document with text")
    for c, kept in classes.items():
        if not kept.heap:
            raise DataError(f"no {c} example: every {c} document is empty")
    return classes, read


def _raw_record(layout: Layout, key: str) -> dict[str, Any]:
    return dict(json.loads((layout.raw_source(key) / SOURCE_FILE).read_text(encoding="utf-8")))


def _raw_docs(folder: Path, record: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for part in record["files"]:
        yield from _parquet_docs(folder / part["name"])


def _shard_docs(manifest: Path) -> Iterator[tuple[str, str]]:
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    for shard in doc["shards"]:
        yield from _parquet_docs(manifest.parent / shard["name"])


def _parquet_docs(path: Path) -> Iterator[tuple[str, str]]:
    for batch in pq.ParquetFile(path).iter_batches(batch_size=READ_BATCH, columns=["id", "text"]):
        yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)


def _add_docs(
    cfg: LoadedClassifierConfig,
    source: str,
    docs: Iterator[tuple[str, str]],
    into: _Class,
    progress: Progress,
) -> None:
    m = cfg.model
    seed = m.training.seed
    cut = int(m.validation_share * 2**64)
    for doc_id, text in docs:
        line = classifier_text(text or "", m.lowercase)
        progress.add(1, len(text or ""))
        if not line.strip(SEPARATORS):  # no word for fastText to read
            into.empty += 1
            continue
        ident = f"{source}\x00{doc_id}".encode()
        validation = _hash(ident, b"validation") < cut
        into.add(
            _Example(_hash(f"{seed}\x00".encode() + ident, b"select"), validation, into.label, line)
        )


def _hash(data: bytes, person: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=person).digest())


def _train_in(
    cfg: LoadedClassifierConfig,
    work: Path,
    classes: dict[str, _Class],
    read: list[dict[str, Any]],
    progress: Progress,
) -> dict[str, Any]:
    """Write the training file, train, score the validation examples; the staged manifest."""
    m = cfg.model
    examples = sorted(e for c in classes.values() for e in c.kept())
    train_set = [e for e in examples if not e.validation]
    held_out = [e for e in examples if e.validation]
    for c, kept in classes.items():
        if not any(not e.validation for e in kept.kept()):
            raise DataError(
                f"no {c} example left for training: validation_share {m.validation_share} "
                f"took all {len(kept.heap)}; lower it or add examples"
            )
    train_file = work / "train.txt"
    with atomic_writer(train_file) as fh:
        for e in train_set:
            fh.write(f"{LABEL_PREFIX}{e.label} {e.text}\n".encode())
    progress.note(
        f"training on {len(train_set):,} examples, {len(held_out):,} held out for validation"
    )
    staging = work / "staging"
    staging.mkdir()
    model_path = staging / MODEL_FILE
    start = time.monotonic()
    _fit(cfg, train_file, model_path, progress)
    progress.note(
        f"trained in {time.monotonic() - start:,.1f} s; scoring {len(held_out):,} validation "
        "examples"
    )
    validation = _validation(cfg, model_path, held_out)
    manifest = {
        "kind": "classifier",
        "name": m.name,
        "partition_key": cfg.partition_key,
        "config_sha256": cfg.sha256,
        "config": mask_data(cfg.raw),
        "model": {
            "name": MODEL_FILE,
            "sha256": file_sha256(model_path),
            "bytes": model_path.stat().st_size,
        },
        "labels": labels_of(load_model(str(model_path))),
        "positive_label": m.positive_label,
        "negative_label": m.negative_label,
        "lowercase": m.lowercase,
        "training": {**m.training.model_dump(mode="json"), "thread": 1, "loss": "softmax"},
        "examples": {
            **{c: _counts(kept) for c, kept in classes.items()},
            "max_examples": m.max_examples,
            "validation_share": m.validation_share,
            "sources": read,
            "train_sha256": file_sha256(train_file),
            "validation_sha256": _lines_sha256(held_out),
        },
        "validation": validation,
        "fasttext": _fasttext_version(),
        "code_version": CODE_VERSION,
    }
    load_model.cache_clear()  # the staged path is gone once published; never reuse its model
    write_json(staging / MANIFEST_FILE, manifest)
    return manifest


def _fit(
    cfg: LoadedClassifierConfig, train_file: Path, model_path: Path, progress: Progress
) -> None:
    settings = fasttext_settings(cfg.model.training)
    fit(settings, str(train_file), str(model_path), progress.note, progress.every)


def fasttext_settings(t: TrainingSpec) -> dict[str, Any]:
    """`train_supervised`'s keywords for `t`: one thread, quiet, softmax over the labels."""
    return {
        "wordNgrams": t.word_ngrams,
        "dim": t.dim,
        "epoch": t.epoch,
        "lr": t.lr,
        "minCount": t.min_count,
        "bucket": t.bucket,
        "seed": t.seed,
        "loss": "softmax",
        "thread": 1,
        "verbose": 0,
    }


def _counts(kept: _Class) -> dict[str, int]:
    examples = kept.kept()
    held_out = sum(e.validation for e in examples)
    return {
        "read": kept.read + kept.empty,
        "empty": kept.empty,
        "kept": len(examples),
        "train": len(examples) - held_out,
        "validation": held_out,
    }


def _lines_sha256(examples: list[_Example]) -> str:
    h = hashlib.sha256()
    for e in examples:
        h.update(f"{LABEL_PREFIX}{e.label} {e.text}\n".encode())
    return h.hexdigest()


def _validation(
    cfg: LoadedClassifierConfig, model_path: Path, held_out: list[_Example]
) -> dict[str, Any]:
    """Precision and recall of the positive label at THRESHOLD, ROC AUC, and per class a
    histogram of the positive label's score (BINS equal bins over [0, 1])."""
    m = cfg.model
    scorer = Scorer(model_path, m.positive_label, m.lowercase, m.name)
    scores = np.array(scorer.many([e.text for e in held_out]), dtype=np.float64)
    positive = np.array([e.label == m.positive_label for e in held_out], dtype=bool)
    predicted = scores >= THRESHOLD
    tp = int(np.sum(predicted & positive))
    return {
        "examples": {
            m.positive_label: int(positive.sum()),
            m.negative_label: int((~positive).sum()),
        },
        "threshold": THRESHOLD,
        "precision": tp / int(predicted.sum()) if predicted.any() else None,
        "recall": tp / int(positive.sum()) if positive.any() else None,
        "roc_auc": roc_auc(scores, positive),
        "histogram": {
            "bins": BINS,
            m.positive_label: _histogram(scores[positive]),
            m.negative_label: _histogram(scores[~positive]),
        },
    }


def roc_auc(scores: np.ndarray[Any, Any], positive: np.ndarray[Any, Any]) -> float | None:
    """The area under the ROC curve, by ranks (Mann-Whitney U; ties share their mean rank);
    None without an example of each class."""
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mean_rank = (ends - counts + 1 + ends) / 2.0  # ranks start at 1
    ranks = mean_rank[inverse]
    u = float(ranks[positive].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def _histogram(scores: np.ndarray[Any, Any]) -> list[int]:
    counts, _ = np.histogram(scores, bins=BINS, range=(0.0, 1.0))
    return [int(c) for c in counts]


def _fasttext_version() -> str:
    try:
        return f"fasttext-numpy2-wheel {version('fasttext-numpy2-wheel')}"
    except PackageNotFoundError:
        return "fasttext unknown"
