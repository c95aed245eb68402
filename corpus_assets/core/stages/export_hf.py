"""`corpus export-hf` of a verified corpus build: its shards as a Hugging Face `datasets` dataset.

How it streams: pyarrow reads the shards record batch by record batch (`iter_batches`, one row
group at a time) and appends each batch to one Arrow IPC stream file in a scratch folder inside
the staging folder. `datasets.Dataset.from_file` memory-maps that file (nothing is copied into
memory) and `save_to_disk` rewrites it, batch by batch, as the `load_from_disk` layout. No list
of rows is ever built, and the `datasets` cache is not used at all: `Dataset.from_generator`
would turn every row into a Python dict and write a second copy under `HF_DATASETS_CACHE`
(fingerprinted by the generator), which is why it is not used here. The scratch folder is
removed before the staging folder is renamed to DEST, so DEST holds only the dataset, the card
(`README.md`) and `corpus_source.json`; a failed export leaves no DEST and no staging.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.stages.export_card import dataset_card
from corpus_assets.core.stages.shard_verify import verify_shards
from corpus_assets.core.stages.shard_writer import SHARD_SCHEMA
from corpus_assets.core.store.atomic import (
    MANIFEST,
    disk_error,
    fsync_dir,
    fsync_tree,
    write_bytes,
    write_json,
)
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.progress import Emit, Progress, silent
from corpus_assets.core.store.records import load_object

EXPORT_SOURCE = "corpus_source.json"
CARD = "README.md"
COLUMNS = SHARD_SCHEMA.names  # id, text, source, license: the dataset's columns, in this order
BATCH_ROWS = 1024


@dataclass(frozen=True)
class CorpusExport:
    """What an export wrote: the dataset folder, its rows and the build it came from."""

    dest: Path
    rows: int
    build_id: str
    licenses: dict[str, int]


def shards_manifest_of(path: Path) -> Path | None:
    """The shards `_MANIFEST.json` at `path` (the file or its folder), None if it is none."""
    manifest = path / MANIFEST if path.is_dir() else path
    if manifest.name != MANIFEST or not manifest.is_file():
        return None
    doc = load_object(manifest, "manifest")
    return manifest if doc.get("kind") == "shards" else None


def refuse_existing(dest: Path) -> Path:
    """`dest` made absolute; ConfigError (exit 64) naming it when anything is there already."""
    target = Path(dest).absolute()
    if target.exists() or target.is_symlink():
        raise ConfigError(f"{target} already exists; choose a new folder")
    return target


def export_corpus(manifest_path: Path, dest: Path, emit: Emit | None = None) -> CorpusExport:
    """Verify a shards build and write its rows, a card and corpus_source.json to new `dest`."""
    target = refuse_existing(dest)
    problems = verify_shards(manifest_path)
    if problems:
        raise DataError(f"{manifest_path}: not exported: {'; '.join(problems)}")
    manifest = load_object(manifest_path, "shards manifest")
    folder = manifest_path.parent
    shards = [folder / s["name"] for s in manifest["shards"]]
    staging = target.with_name(f".{target.name}.staging-{os.getpid()}")
    progress = Progress("export-hf", emit or silent)
    try:
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        licenses, rows = _save_dataset(shards, staging, progress)
        if rows != manifest["documents_out"]:
            raise DataError(
                f"{manifest_path}: shards hold {rows} rows, documents_out says "
                f"{manifest['documents_out']}"
            )
        source = _source(manifest, manifest_path, rows)
        write_bytes(staging / CARD, dataset_card(manifest, source, licenses).encode("utf-8"))
        write_json(staging / EXPORT_SOURCE, source)
        _publish(staging, target)
    except OSError as exc:
        raise disk_error(exc, staging) from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return CorpusExport(target, rows, manifest["build_id"], licenses)


def _save_dataset(
    shards: list[Path], staging: Path, progress: Progress
) -> tuple[dict[str, int], int]:
    """Stream the shards into staging as a `save_to_disk` dataset; license counts and rows."""
    import datasets  # slow to import: only when exporting

    scratch = staging / ".rows"
    scratch.mkdir()
    licenses: Counter[str] = Counter()
    rows = 0
    arrow = scratch / "rows.arrow"
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_stream(sink, SHARD_SCHEMA) as writer:
        for batch in _batches(shards):
            writer.write_batch(batch)
            counts = pc.value_counts(batch.column("license")).to_pylist()
            licenses.update({c["values"]: c["counts"] for c in counts})
            rows += batch.num_rows
            progress.add(batch.num_rows, batch.nbytes)
    dataset = datasets.Dataset.from_file(str(arrow))
    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # the CLI's own progress lines are on stderr
    try:
        dataset.save_to_disk(str(staging))
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()
    del dataset
    shutil.rmtree(scratch)
    return dict(sorted(licenses.items())), rows


def _batches(shards: list[Path]) -> Iterator[pa.RecordBatch]:
    """Every shard's rows as record batches with the dataset's columns (DataError if one lacks)."""
    for path in shards:
        parquet = pq.ParquetFile(path)
        missing = [c for c in COLUMNS if c not in parquet.schema_arrow.names]
        if missing:
            have = ", ".join(parquet.schema_arrow.names)
            raise DataError(f"{path}: no column {', '.join(missing)} (has {have}); cannot export")
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=COLUMNS):
            try:
                yield batch.select(COLUMNS).cast(SHARD_SCHEMA)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                types = ", ".join(f"{f.name}: {f.type}" for f in batch.schema)
                raise DataError(f"{path}: columns ({types}) are not strings: {exc}") from None


def _source(manifest: dict[str, Any], manifest_path: Path, rows: int) -> dict[str, Any]:
    """corpus_source.json: which build this dataset is, so it can be traced back and verified."""
    return {
        "kind": "corpus_build",
        "build_id": manifest["build_id"],
        "partition_key": manifest.get("partition_key"),
        "config_sha256": manifest.get("config_sha256"),
        "manifest_sha256": file_sha256(manifest_path),
        "manifest_path": str(manifest_path.absolute()),
        "rows": rows,
    }


def _publish(staging: Path, target: Path) -> None:
    """fsync every file and folder (datasets does not), then rename staging to `target`."""
    for dirpath, _dirs, files in os.walk(staging):
        for name in files:
            fd = os.open(Path(dirpath) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fsync_tree(staging)
    refuse_existing(target)  # os.replace would silently replace an empty folder made meanwhile
    os.replace(staging, target)
    fsync_dir(target.parent)
