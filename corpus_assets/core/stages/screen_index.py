"""The indexes the shard stage screens documents against, built once before its tasks run.

Eval sets (`[decontaminate]`): the word n-gram hashes of every item, built once per eval file
into the shared raw cache, `raw/_decontam/<set>-<key>/`, keyed by the file's sha256, the n-gram
length, the fields and the id field (`hashes.npy` sorted uint64, `items.npy` the first item of
each hash, `ids.json`, then `_INDEX.json` last). Two configs with the same eval set share it.

Exclusion lists (`[exclude]`): the xxh3-64 hashes of the ids of an id list, or of an earlier
build's document ids plus the 128-bit exact-dedup keys of its texts, sorted, written to the
build's work folder (they are cheap to make again, and an earlier build may change).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import xxhash

from corpus_assets.core.config import (
    EarlierBuildSpec,
    EvalSetSpec,
    IdListSpec,
    LoadedConfig,
    canon,
    sha256_hex,
)
from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.stages.shard_verify import verify_shards
from corpus_assets.core.store import registry
from corpus_assets.core.store.atomic import (
    MANIFEST,
    atomic_writer,
    fresh_dir,
    publish_dir,
    write_json,
)
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.evalsets import eval_items, id_list
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import hold
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text.contamination import CutSpec, NgramIndex, build_index
from corpus_assets.core.text.ngrams import HASH_VERSION
from corpus_assets.core.text.normalize import exact_key

INDEX_FORMAT = 1
INDEX_RECORD = "_INDEX.json"
Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class EvalIndexInfo:
    """An eval set's index on disk and what it holds."""

    name: str
    folder: Path
    record: dict[str, Any]


@dataclass(frozen=True)
class ExcludeInfo:
    """An exclusion list prepared in the work folder."""

    name: str
    kind: str
    folder: Path
    entries: int


@dataclass(frozen=True)
class Screens:
    """What the shard tasks screen against (paths only: cheap to send to worker processes)."""

    ngram: int = 13
    mode: str = "drop"
    cut: CutSpec = field(default_factory=CutSpec)
    sets: tuple[EvalIndexInfo, ...] = ()
    lists: tuple[ExcludeInfo, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.sets or self.lists)


NO_SCREENS = Screens()


def prepare(cfg: LoadedConfig, layout: Layout, work: Path, progress: Progress) -> Screens:
    """Build (or find) every index the config's `[decontaminate]` and `[exclude]` name."""
    d, x = cfg.model.decontaminate, cfg.model.exclude
    sets: list[EvalIndexInfo] = []
    if d is not None:
        sets = [eval_index(cfg, layout, s, d.ngram, progress) for s in d.sets]
    lists: list[ExcludeInfo] = []
    if x is not None:
        lists += [_id_list(cfg, s, work / "exclude") for s in x.ids]
        lists += [_earlier_build(cfg, layout, s, work / "exclude", progress) for s in x.builds]
    if d is None:
        return Screens(sets=(), lists=tuple(lists))
    cut = CutSpec(d.window, d.min_chars, d.max_pieces)
    return Screens(d.ngram, d.mode, cut, tuple(sets), tuple(lists))


def eval_input(cfg: LoadedConfig, spec: EvalSetSpec) -> Path | None:
    """The local eval file of a set (None for a hub set); ConfigError if it is not there."""
    if spec.path is None:
        return None
    path = cfg.resolve(spec.path)
    if not path.is_file():
        raise ConfigError(f"eval set {spec.name!r}: file not found: {path}")
    if path.suffix not in (".jsonl", ".json", ".parquet"):
        raise ConfigError(
            f"eval set {spec.name!r}: {path.name} is not .jsonl, .json (JSON lines) or .parquet"
        )
    return path


def eval_digest(cfg: LoadedConfig, spec: EvalSetSpec) -> str:
    """The local file's sha256 (checked against a `sha256` pin), or the hub id's own digest."""
    path = eval_input(cfg, spec)
    if path is None:
        return sha256_hex(canon({"hf": spec.hf, "subset": spec.subset, "split": spec.split}))
    digest = file_sha256(path)
    if spec.sha256 is not None and digest != spec.sha256:
        raise DataError(f"eval set {spec.name!r}: {path} has sha256 {digest}, pinned {spec.sha256}")
    return digest


def eval_index(
    cfg: LoadedConfig, layout: Layout, spec: EvalSetSpec, ngram: int, progress: Progress
) -> EvalIndexInfo:
    """The eval set's index in the raw cache, built under a lock if it is not there yet."""
    digest = eval_digest(cfg, spec)
    key = sha256_hex(
        canon(
            {
                "eval_sha256": digest,
                "ngram": ngram,
                "fields": list(spec.fields),
                "id_field": spec.id_field,
                "format": INDEX_FORMAT,
                "hash": HASH_VERSION,
            }
        )
    )[:16]
    folder = layout.raw / "_decontam" / f"{spec.name}-{key}"
    record = _read_record(folder)
    if record is not None:
        return EvalIndexInfo(spec.name, folder, record)
    with hold(layout.eval_index_lock(folder.name), f"the eval index {spec.name!r}", progress.note):
        record = _read_record(folder)
        if record is None:
            progress.note(f"indexing eval set {spec.name!r} ({ngram}-grams)")
            record = _build_eval_index(cfg, layout, spec, ngram, digest, folder, progress)
    return EvalIndexInfo(spec.name, folder, record)


def _read_record(folder: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((folder / INDEX_RECORD).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _build_eval_index(
    cfg: LoadedConfig,
    layout: Layout,
    spec: EvalSetSpec,
    ngram: int,
    digest: str,
    folder: Path,
    progress: Progress,
) -> dict[str, Any]:
    started = time.perf_counter()

    def items() -> Iterator[tuple[str, list[str]]]:
        for n, item in enumerate(eval_items(spec, eval_input(cfg, spec))):
            progress.beat(f"indexing eval set {spec.name!r}: {n:,} items")  # the heartbeat
            yield item

    index, short = build_index(items(), ngram)
    staging = fresh_dir(layout.raw / ".staging" / f"_decontam-{folder.name}")
    _save(staging / "hashes.npy", index.hashes)
    _save(staging / "items.npy", index.items)
    write_json(staging / "ids.json", list(index.ids))
    record = {
        "eval_set": spec.name,
        "eval": spec.path or spec.hf,
        "eval_sha256": digest,
        "ngram": ngram,
        "fields": list(spec.fields),
        "id_field": spec.id_field,
        "items": len(index.ids),
        "short_items": short,
        "ngrams": len(index.hashes),
        "index_bytes": int(index.hashes.nbytes + index.items.nbytes),
        "build_seconds": round(time.perf_counter() - started, 3),
    }
    write_json(staging / INDEX_RECORD, record)
    publish_dir(staging, folder)
    return record


def _save(path: Path, array: Array) -> None:
    with atomic_writer(path) as fh:
        np.save(fh, array, allow_pickle=False)


_LOADED: dict[Path, Any] = {}


def load_eval_index(info: EvalIndexInfo) -> NgramIndex:
    """The index of `info` (loaded once per process)."""
    if info.folder not in _LOADED:
        ids = json.loads((info.folder / "ids.json").read_text(encoding="utf-8"))
        _LOADED[info.folder] = NgramIndex(
            np.load(info.folder / "hashes.npy"), np.load(info.folder / "items.npy"), tuple(ids)
        )
    index: NgramIndex = _LOADED[info.folder]
    return index


def id_hashes(ids: list[str]) -> Array:
    """The 64-bit hashes exclusion lists compare ids by."""
    return np.fromiter((xxhash.xxh3_64_intdigest(i.encode("utf-8")) for i in ids), np.uint64)


def _save_sorted(folder: Path, ids: Array, keys: Array | None) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    ids = np.unique(ids)
    _save(folder / "ids.npy", ids)
    if keys is not None:
        _save(folder / "keys.npy", _key_view(keys))
    return len(ids)


def _key_view(keys: Array) -> Array:
    """128-bit keys as sorted unique 16-byte strings (searchsorted compares them as bytes)."""
    return np.unique(np.ascontiguousarray(keys).view("S16").ravel())


def _id_list(cfg: LoadedConfig, spec: IdListSpec, work: Path) -> ExcludeInfo:
    path = cfg.resolve(spec.path)
    if not path.is_file():
        raise ConfigError(f"exclude list {spec.name!r}: file not found: {path}")
    if spec.sha256 is not None and file_sha256(path) != spec.sha256:
        raise DataError(f"exclude list {spec.name!r}: {path} differs from its sha256 pin")
    entries = _save_sorted(work / spec.name, id_hashes(list(id_list(spec, path))), None)
    return ExcludeInfo(spec.name, "ids", work / spec.name, entries)


def earlier_manifest(cfg: LoadedConfig, layout: Layout, spec: EarlierBuildSpec) -> Path:
    """The shards manifest an `[[exclude.builds]]` table names (a path or a partition key)."""
    if spec.manifest is not None:
        path = cfg.resolve(spec.manifest)
        path = path / MANIFEST if path.is_dir() else path
    else:
        earlier = registry.load(layout, str(spec.partition))
        path = layout.shards(earlier) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"exclude build {spec.name!r}: no shards manifest at {path}")
    return path


def _earlier_build(
    cfg: LoadedConfig, layout: Layout, spec: EarlierBuildSpec, work: Path, progress: Progress
) -> ExcludeInfo:
    path = earlier_manifest(cfg, layout, spec)
    problems = verify_shards(path)
    if problems:
        raise DataError(f"exclude build {spec.name!r}: {path} does not verify: {problems[0]}")
    progress.note(f"reading earlier build {spec.name!r} for exclusions")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    ids: list[Array] = []
    keys: list[bytes] = []
    for shard in manifest["shards"]:
        for batch in pq.ParquetFile(path.parent / shard["name"]).iter_batches(
            columns=["id", "text"]
        ):
            ids.append(id_hashes([str(i) for i in batch.column(0).to_pylist()]))
            keys.extend(exact_key(t) for t in batch.column(1).to_pylist())
            progress.beat(f"reading earlier build {spec.name!r}")
    key_array = np.frombuffer(b"".join(keys), dtype="<u8").reshape(-1, 2)
    all_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint64)
    entries = _save_sorted(work / spec.name, all_ids, key_array)
    return ExcludeInfo(spec.name, "build", work / spec.name, entries)


def load_exclude(info: ExcludeInfo) -> tuple[Array, Array | None]:
    """(sorted id hashes, sorted 16-byte exact keys or None) of an exclusion list."""
    ids, keys = info.folder / "ids.npy", info.folder / "keys.npy"
    stat = ids.stat()  # the folder is rewritten by every build: reload what changed
    cached = (info.folder, stat.st_mtime_ns, stat.st_ino)
    if _LOADED.get(info.folder, (None,))[0] != cached:
        _LOADED[info.folder] = (cached, np.load(ids), np.load(keys) if keys.exists() else None)
    _key, id_hashes, exact_keys = _LOADED[info.folder]
    return id_hashes, exact_keys
