"""`corpus mix`: a mixture config's sample index over its token builds, resumable, byte-stable.

Files of `mixtures/<name>-<hash12>/` (numpy `.npy`, little-endian, each written atomically):
- `train.npy`: one row per training sample in the shuffled order (`INDEX_DTYPE`: component,
  document, offset of the sample's first token in that document, and `position`, the same place
  as a token offset in the component's whole token stream). A sample is `seq_len + 1` tokens of
  the component's training documents from there on (validation documents are skipped).
- `validation.npy`: the validation samples, the same rows, in component and stream order.
- `runs.npy`: per component and split, the stretches of consecutive documents of that split
  (`RUN_DTYPE`: component, split 0 train / 1 validation, start and length in tokens).
- `_MANIFEST.json` last (kind `mixture`): the sha256 of every component's token manifest it
  read, per component its training and validation tokens, samples, epochs and realized share
  against the asked weight, and the digest of each file.

A document is held out for validation when the first 8 bytes of blake2b(its id) read as a
little-endian integer fall below `validation_share * 2**64`: a document's split depends on its id
alone, so it stays when a component grows. Component k of the training samples takes its
windows `j * seq_len` (j = 0, 1, ...) of its training stream in order, again from the start once
it runs out (an epoch); the rows of all components are then permuted by numpy's PCG64(seed).

The document hashes are computed per (component, shard) by `workers` processes and kept under
`work/mixtures/<key>/` (each file atomic), so a killed run redoes only the shards it had not
finished; the index is computed from them in this process, the same bytes for any worker count.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from corpus_assets.core.errors import ConfigError, DataError, UpstreamMissing
from corpus_assets.core.mixture_config import Component, LoadedMixtureConfig
from corpus_assets.core.stages.mixture_index import Stream, sample_counts, save
from corpus_assets.core.store import registry
from corpus_assets.core.store.atomic import (
    MANIFEST,
    atomic_writer,
    private_dir,
    publish_dir,
    remove_tree,
    write_json,
)
from corpus_assets.core.store.digests import verify_files
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.dataset import TokenDataset
from corpus_assets.mixture import (
    INDEX_FILES,
    TRAIN,
    VALIDATION,
    ComponentChanged,
    check_components,
    document_spans,
    manifest_sha256,
)

MIXTURES = "mixtures"


@dataclass(frozen=True)
class MixResult:
    """What `corpus mix` built (or found built): where, and the manifest."""

    partition_key: str
    folder: Path
    manifest: dict[str, Any]
    cached: bool


@dataclass(frozen=True)
class _Input:
    """One component as read: its token build and the sha256 of its manifest."""

    spec: Component
    location: str
    manifest_sha256: str
    dataset: TokenDataset


def mixture_folder(root: Path, partition_key: str) -> Path:
    return root / MIXTURES / partition_key


def mix(cfg: LoadedMixtureConfig, layout: Layout, workers: int, progress: Progress) -> MixResult:
    """Build the mixture's index and publish it with its manifest (a built one is kept)."""
    key = cfg.partition_key
    final = mixture_folder(layout.root, key)
    work = layout.work_root / MIXTURES / key
    with ExitStack() as locks:
        locks.enter_context(
            build_lock(layout.stage_lock(cfg.hash12, "mixture"), f"mixture {key}", progress.note)
        )
        for spec in cfg.model.components:  # a build under this root is read under its lock,
            if spec.kind == "key":  # shared: never while it is tokenized again or cleaned up
                lock = layout.stage_lock(spec.tokens[-12:], "tokenize")
                locks.enter_context(
                    build_lock(lock, f"the tokens of {spec.tokens}", progress.note, True)
                )
        inputs = [_open(cfg, spec, layout) for spec in cfg.model.components]
        built = _published(final)
        if built is not None:
            try:
                check_components(built, final, {i.spec.name: i.manifest_sha256 for i in inputs})
            except ComponentChanged as exc:
                raise DataError(str(exc)) from None
            progress.note(f"mixture already built in {final}")
            return MixResult(key, final, built, cached=True)
        _check_tokenizers(inputs)
        private_dir(layout.work_root)
        hashes = _document_hashes(cfg, inputs, work / "hashes", workers, progress)
        out = work / "out"
        if out.exists():
            remove_tree(out)
        out.mkdir(parents=True)
        doc = _build(cfg, inputs, hashes, final, out)
        write_json(out / MANIFEST, doc)
        publish_dir(out, final)
        remove_tree(work)
    progress.note(f"{doc[TRAIN]['samples']:,} training samples in {final}")
    return MixResult(key, final, doc, cached=False)


def _open(cfg: LoadedMixtureConfig, spec: Component, layout: Layout) -> _Input:
    if spec.kind == "key":
        location = str(layout.tokens(registry.load(layout, spec.tokens)))
    elif spec.kind == "url":
        location = spec.tokens
    else:
        location = str(cfg.resolve(spec.tokens).resolve())
    try:
        sha = manifest_sha256(location)
    except FileNotFoundError:
        raise UpstreamMissing(
            "tokens", f"component {spec.name!r}: no token build manifest at {location}"
        ) from None
    try:
        return _Input(spec, location, sha, TokenDataset(location))
    except (ValueError, KeyError) as exc:
        raise DataError(f"component {spec.name!r}: {location}: {exc}") from None


def _published(final: Path) -> dict[str, Any] | None:
    """The published manifest if it is whole and its index files match it."""
    try:
        doc = json.loads((final / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or verify_files(final, doc.get("files", [])):
        return None
    return doc


def _check_tokenizers(inputs: list[_Input]) -> None:
    def identity(i: _Input) -> tuple[Any, ...]:
        m = i.dataset.manifest
        return (m["tokenizer"]["id"], m["tokenizer"]["sha256"], m["dtype"], m["eos_id"])

    first = inputs[0]
    for other in inputs[1:]:
        if identity(other) != identity(first):
            raise ConfigError(
                f"component {other.spec.name!r} is tokenized by {identity(other)[0]!r} "
                f"(eos {identity(other)[3]}), {first.spec.name!r} by {identity(first)[0]!r} "
                f"(eos {identity(first)[3]}); a mixture's components share one tokenizer"
            )


def _document_hashes(
    cfg: LoadedMixtureConfig,
    inputs: list[_Input],
    folder: Path,
    workers: int,
    progress: Progress,
) -> list[npt.NDArray[np.uint64] | None]:
    """Per component, the hash of every document's id (None when nothing is held out)."""
    if cfg.model.validation_share == 0:
        return [None for _ in inputs]
    tasks = []
    for i in inputs:
        for shard in _shards(i.dataset):
            out = folder / i.manifest_sha256[:16] / f"{Path(shard).stem}.npy"
            if not out.is_file():
                tasks.append((i.location, shard, str(out)))
    if tasks:
        progress.note(f"hashing the document ids of {len(tasks)} shards")
    try:
        if workers > 1 and len(tasks) > 1:
            with ProcessPoolExecutor(min(workers, len(tasks))) as pool:
                for _ in pool.map(_hash_shard, tasks):
                    progress.beat("hashing document ids")
        else:
            for task in tasks:
                _hash_shard(task)
                progress.beat("hashing document ids")
    except FileNotFoundError as exc:  # the validation split needs the shards' document ids
        raise DataError(f"{exc}; or set validation_share = 0") from None
    return [
        np.concatenate(
            [
                np.load(folder / i.manifest_sha256[:16] / f"{Path(s).stem}.npy")
                for s in _shards(i.dataset)
            ]
            or [np.zeros(0, dtype="<u8")]
        )
        for i in inputs
    ]


def _shards(ds: TokenDataset) -> list[str]:
    return [f["shard"] for f in ds.manifest["files"] if f["name"].endswith(".bin")]


_OPEN: dict[str, TokenDataset] = {}


def _hash_shard(task: tuple[str, str, str]) -> None:
    """The 8-byte blake2b of each document id of one shard, written atomically."""
    location, shard, out = task
    if location not in _OPEN:  # one per process: opening maps every token file of the build
        _OPEN[location] = TokenDataset(location)
    ids = _OPEN[location].document_ids(shard)
    digests = b"".join(hashlib.blake2b(i.encode("utf-8"), digest_size=8).digest() for i in ids)
    hashes = np.frombuffer(digests, dtype="<u8")
    with atomic_writer(Path(out)) as fh:
        np.save(fh, hashes, allow_pickle=False)


def _build(
    cfg: LoadedMixtureConfig,
    inputs: list[_Input],
    hashes: list[npt.NDArray[np.uint64] | None],
    final: Path,
    out: Path,
) -> dict[str, Any]:
    m = cfg.model
    threshold = np.uint64(min(int(m.validation_share * 2**64), 2**64 - 1))
    streams = []
    for c, (i, h) in enumerate(zip(inputs, hashes, strict=True)):
        starts, lengths = document_spans(i.dataset)
        held = np.zeros(len(lengths), dtype=bool) if h is None else h < threshold
        if len(held) != len(lengths):
            raise DataError(
                f"component {i.spec.name!r}: {len(held)} document ids for {len(lengths)} "
                "token documents; the shards and the token build disagree"
            )
        streams.append((Stream(c, starts, lengths, ~held), Stream(c, starts, lengths, held)))
    counts = sample_counts(cfg.model, [t for t, _ in streams])
    train = np.concatenate(
        [t.samples(n, m.seq_len) for (t, _), n in zip(streams, counts, strict=True)]
    )
    order = np.random.Generator(np.random.PCG64(m.seed)).permutation(len(train))
    train = train[order]
    validation = np.concatenate([v.samples(v.windows(m.seq_len), m.seq_len) for _, v in streams])
    runs = np.concatenate([s.runs(split) for pair in streams for split, s in enumerate(pair)])
    files = []
    for name, array in zip(INDEX_FILES, (train, validation, runs), strict=True):
        files.append(save(out / name, array))
    total = int(sum(counts)) * m.seq_len
    return {
        "kind": "mixture",
        "name": m.name,
        "partition_key": cfg.partition_key,
        "config_sha256": cfg.sha256,
        "seq_len": m.seq_len,
        "seed": m.seed,
        "validation_share": m.validation_share,
        "tokenizer": inputs[0].dataset.manifest["tokenizer"],
        "dtype": inputs[0].dataset.manifest["dtype"],
        "eos_id": inputs[0].dataset.eos_id,
        "vocab_size": max(i.dataset.vocab_size for i in inputs),
        "components": [
            _component(cfg, i, t, v, n, total, final)
            for i, (t, v), n in zip(inputs, streams, counts, strict=True)
        ],
        TRAIN: {"samples": len(train), "tokens": total},
        VALIDATION: {
            "samples": len(validation),
            "documents": sum(int(v.keep.sum()) for _, v in streams),
            "tokens": sum(v.tokens for _, v in streams),
        },
        "files": files,
        "code_version": CODE_VERSION,
    }


def _component(
    cfg: LoadedMixtureConfig,
    i: _Input,
    train: Stream,
    validation: Stream,
    samples: int,
    total: int,
    final: Path,
) -> dict[str, Any]:
    windows = train.windows(cfg.model.seq_len)
    weights = [c.weight or 0.0 for c in cfg.model.components]
    location = i.location if "://" in i.location else os.path.relpath(i.location, final)
    return {
        "name": i.spec.name,
        "tokens": i.spec.tokens,
        "location": location,
        "manifest_sha256": i.manifest_sha256,
        "build_id": i.dataset.manifest.get("build_id"),
        "documents": len(train.keep),
        "training_documents": int(train.keep.sum()),
        "training_tokens": train.tokens,
        "validation_documents": int(validation.keep.sum()),
        "validation_tokens": validation.tokens,
        "samples": samples,
        "realized_tokens": samples * cfg.model.seq_len,
        "epochs": round(samples / windows, 6),
        "share": round(samples * cfg.model.seq_len / total, 6) if total else 0.0,
        "asked": (
            {"token_budget": i.spec.token_budget}
            if i.spec.token_budget is not None
            else {"weight": round((i.spec.weight or 0.0) / sum(weights), 6)}
        ),
    }
