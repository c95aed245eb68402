"""The fetch stage: read each source into the shared raw cache, once, under a file lock."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_assets.core.config import LoadedConfig, SourceSpec, canon
from corpus_assets.core.errors import DataError
from corpus_assets.core.secrets import mask_data
from corpus_assets.core.store import ledger, parallel, remote
from corpus_assets.core.store.atomic import fresh_dir, publish_dir, remove_tree, write_json
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import hold
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.store.records import load_object, require, require_files
from corpus_assets.core.store.remote import is_remote
from corpus_assets.core.store.sources import (
    Dropped,
    InputFile,
    RawDoc,
    describe_inputs,
    expand_inputs,
    inputs_sha256,
    is_local,
    read_source,
)
from corpus_assets.core.version import CODE_VERSION

SOURCE_FILE = "_SOURCE.json"
DOWNLOADS = ".downloads"
"""raw/.downloads/<source key>/: a remote source's files while they download (kept when the
fetch is killed, so the next one resumes them; removed once the source is in the raw cache)."""
RAW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("source", pa.string()),
        ("license", pa.string()),
        ("meta", pa.string()),
    ]
)
ROW_GROUP_ROWS = 1024
PART_TEXT_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class SourceResult:
    """What fetching one source did: its key, document count and whether it was already there."""

    source_key: str
    documents: int
    text_bytes: int
    cached: bool
    too_large: int = 0  # documents skipped as over the source's max_document_bytes


@dataclass(frozen=True)
class FetchResult:
    sources: tuple[SourceResult, ...]

    @property
    def documents(self) -> int:
        return sum(s.documents for s in self.sources)


def fetch(
    cfg: LoadedConfig, layout: Layout, progress: Progress, refresh: bool = False
) -> FetchResult:
    """Fetch every source of the config that the raw cache does not hold yet.

    A remote source already in the raw cache is used without asking its server (a built config
    rebuilds offline); with `refresh` its server is listed and a source that changed since it
    was fetched is refused.
    """
    policy = remote.RetryPolicy.from_env(os.environ)  # a bad setting fails before the network
    # every local input must exist before any source is fetched (a typo fails first)
    inputs = [expand_inputs(cfg, s) if is_local(cfg, s) else None for s in cfg.model.sources]
    results = [
        fetch_source(cfg, spec, layout, progress, files, refresh, policy)
        for spec, files in zip(cfg.model.sources, inputs, strict=True)
    ]
    cached = sum(r.documents for r in results if r.cached)
    progress.done(f"; {cached:,} documents already in the raw cache" if cached else "")
    return FetchResult(tuple(results))


def fetch_source(
    cfg: LoadedConfig,
    spec: SourceSpec,
    layout: Layout,
    progress: Progress,
    files: list[Path] | None = None,
    refresh: bool = False,
    policy: remote.RetryPolicy = remote.DEFAULT_POLICY,
) -> SourceResult:
    key = cfg.source_key(spec)
    final = layout.raw_source(key)
    if files is None and is_local(cfg, spec):
        files = expand_inputs(cfg, spec)
    with hold(layout.raw_lock(key), f"the raw cache of source {spec.name!r}", progress.note):
        if (final / SOURCE_FILE).exists():
            record = _read_record(final / SOURCE_FILE, key)
            if files is not None:
                _check_unchanged(spec, key, record, describe_inputs(files))
            if refresh and is_remote(spec.path):
                now = remote.list_files(spec.name, spec.path, progress.note, policy)
                _check_remote_unchanged(spec, key, record, now)
            ledger.record(layout, _ledger_entry(record))
            progress.note(
                f"source {spec.name} already in raw/{key} ({record['documents']:,} documents)"
            )
            too_large = record.get("dropped", {}).get("too_large", 0)
            return SourceResult(key, record["documents"], record["text_bytes"], True, too_large)
        downloads = layout.raw / DOWNLOADS / key
        listed = (
            remote.list_files(spec.name, spec.path, progress.note, policy)
            if is_remote(spec.path)
            else None
        )
        if listed is not None:
            got = parallel.download_all(
                spec.name,
                listed,
                lambda item, p: _download(spec, item, downloads, p, policy),
                progress,
            )
            digests = _Digests([(item.name, d.path) for item, d in zip(listed, got, strict=True)])
            files = digests.files
            inputs = digests.inputs() if spec.sha256 is not None else None
        else:
            inputs = describe_inputs(files) if files is not None else []
        staging = fresh_dir(layout.raw_staging(key))
        progress.note(f"fetching source {spec.name} into raw/{key}")

        def docs(dropped: Dropped | None = None) -> Iterator[RawDoc]:
            return read_source(cfg, spec, files, layout.raw / ".hf-cache", dropped)

        ids, dropped = array("Q"), Dropped()
        try:
            if spec.sha256 is not None:
                _check_pin(spec, inputs or [])
            rows = _normalized(docs(dropped), spec, key, ids)
            parts, count, nbytes = _write_parts(rows, staging, progress)
            if dropped.too_large:
                progress.note(dropped.line(spec))
            _refuse_repeated_ids(ids, docs, spec)
            if inputs is None:
                inputs = digests.inputs()
        except DataError:
            remove_tree(staging)
            remove_tree(downloads)  # bad bytes are never reused: the next fetch downloads anew
            raise
        except BaseException:
            remove_tree(staging)
            raise
        if count == 0:
            remove_tree(staging)
            raise DataError(f"source {spec.name!r} ({spec.path}) holds no documents")
        record = _source_record(cfg, spec, key, inputs, parts, count, nbytes)
        record["dropped"] = {"too_large": dropped.too_large}
        if listed is not None:
            record["remote"] = _remote_record([d.remote for d in got], inputs)
        write_json(staging / SOURCE_FILE, record)
        publish_dir(staging, final)
        remove_tree(downloads)  # the documents are in the raw parts now
        ledger.record(layout, _ledger_entry(record))
        return SourceResult(key, count, nbytes, False, dropped.too_large)


def _download(
    spec: SourceSpec,
    item: remote.RemoteFile,
    folder: Path,
    progress: Progress,
    policy: remote.RetryPolicy,
) -> remote.Downloaded:
    """A listed remote file in `folder`: a finished download of the same identity (left by a
    fetch killed later) as it is, else downloaded (resuming a killed fetch's part), with the
    identity of the bytes kept."""
    dest = folder / _safe_name(spec, item.name)
    done = remote.reusable(dest, item)
    return done or remote.download(spec.name, item, dest, progress.note, policy)


class _Digests:
    """The sha256 of downloaded files, taken in a thread from the moment they are all there:
    while the fetch parses them, the bytes are in the page cache and the parse leaves the
    other core free, so the hash adds no wall time (`inputs()` waits for it)."""

    def __init__(self, named: list[tuple[str, Path]]) -> None:
        self.files = [path for _, path in named]
        self._inputs: list[InputFile] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._hash, args=(named,), daemon=True)
        self._thread.start()

    def _hash(self, named: list[tuple[str, Path]]) -> None:
        try:
            for name, path in named:
                self._inputs.append(InputFile(name, path, file_sha256(path), path.stat().st_size))
        except BaseException as exc:  # re-raised by inputs() in the fetch's thread
            self._error = exc

    def inputs(self) -> list[InputFile]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._inputs


def _safe_name(spec: SourceSpec, name: str) -> str:
    """A listed object's name as a path below the downloads folder (no `..`, not absolute)."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise DataError(f"source {spec.name!r}: remote object name {name!r} is not a safe path")
    return "/".join(parts)


def _remote_record(listed: list[remote.RemoteFile], inputs: list[InputFile]) -> list[Any]:
    """What identifies each remote file: its shown URL, size, ETag, version, date and sha256."""
    return [{**item.identity(), "sha256": i.sha256} for item, i in zip(listed, inputs, strict=True)]


def _check_remote_unchanged(
    spec: SourceSpec, key: str, record: dict[str, Any], listed: list[remote.RemoteFile]
) -> None:
    """A remote source in the raw cache whose objects changed since is refused, never mixed.

    Each listed object is compared with what was fetched like with like: a validator (ETag,
    version, Last-Modified) or size that both have must be equal, and one must be there on
    both sides (a glob's listing has no S3 version id; the download recorded one).
    """
    fetched = [remote.record_identity(r) for r in record.get("remote", [])]
    same = len(fetched) == len(listed) and all(
        f is not None and remote.same_content(f, item)
        for f, item in zip(fetched, listed, strict=True)
    )
    if not same:
        raise DataError(
            f"source {spec.name!r}: {remote.shown(spec.path)} changed since it was fetched into "
            f"raw/{key} (ETag, version, size or file list); give the source a new name or a "
            "sha256 pin to fetch the new content"
        )


RECORD_FIELDS: dict[str, type] = {
    "source_key": str,
    "source": str,
    "license": str,
    "documents": int,
    "text_bytes": int,
}


def _read_record(path: Path, key: str) -> dict[str, Any]:
    """The raw folder's _SOURCE.json, checked: a corrupt one is DataError naming the file."""
    fix = f"delete raw/{key} to fetch the source again"
    record = load_object(path, "source record", fix)
    require(record, RECORD_FIELDS, str(path), "source record", fix)
    require_files(record, "files", str(path), "source record", fix, extra={"rows": int})
    if not isinstance(record.get("input_sha256"), str | None):
        raise DataError(f"{path}: corrupt source record: 'input_sha256' is not a string; {fix}")
    return record


def _check_pin(spec: SourceSpec, inputs: list[InputFile]) -> None:
    if not inputs:
        raise DataError(f"source {spec.name!r}: a sha256 pin needs local input files")
    actual = inputs_sha256(inputs)
    if actual != spec.sha256:
        raise DataError(
            f"source {spec.name!r}: sha256 of {spec.path} is {actual}, "
            f"but the config pins {spec.sha256}"
        )


def _check_unchanged(
    spec: SourceSpec, key: str, record: dict[str, Any], inputs: list[InputFile]
) -> None:
    if record.get("input_sha256") and record["input_sha256"] != inputs_sha256(inputs):
        raise DataError(
            f"source {spec.name!r}: {spec.path} changed since it was fetched into raw/{key}; "
            "give the source a new name or a sha256 pin to fetch the new content"
        )


def _normalized(
    docs: Iterator[RawDoc], spec: SourceSpec, key: str, ids: array[int]
) -> Iterator[dict[str, str]]:
    """The raw cache's rows; the 64-bit hash of each document's own id goes to `ids`."""
    for row, doc in enumerate(docs):
        if doc.source_id is not None:
            ids.append(_id_hash(doc.source_id))
        yield {
            "id": doc.source_id if doc.source_id is not None else f"{key}:{row}",
            "text": doc.text,
            "source": spec.name,
            "license": spec.license,
            "meta": json.dumps(doc.meta, sort_keys=True, ensure_ascii=False, default=str),
        }


def _id_hash(source_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(source_id.encode("utf-8"), digest_size=8).digest())


def _refuse_repeated_ids(
    ids: array[int], docs: Callable[[], Iterator[RawDoc]], spec: SourceSpec
) -> None:
    """DataError naming the first document whose id an earlier one of the source has, and it.

    The rows whose id hash repeats are the suspects (8 bytes a row); a second read of the source
    compares their ids exactly, so a hash collision alone is never an error.
    """
    hashes = np.frombuffer(ids, dtype=np.uint64)
    order = np.argsort(hashes, kind="stable")
    repeats = np.flatnonzero(hashes[order][1:] == hashes[order][:-1])
    if not len(repeats):
        return
    suspects = set(order[repeats].tolist()) | set(order[repeats + 1].tolist())
    first: dict[str, str] = {}
    for row, doc in enumerate(docs()):
        if row not in suspects or doc.source_id is None:
            continue
        if doc.source_id in first:
            shown = doc.source_id if len(doc.source_id) <= 60 else doc.source_id[:57] + "..."
            raise DataError(
                f"{doc.where}: duplicate id {shown!r} (id_field {spec.id_field!r}), "
                f"first at {first[doc.source_id]}; ids must be unique within a source"
            )
        first[doc.source_id] = doc.where


def _write_parts(
    rows: Iterator[dict[str, str]], staging: Path, progress: Progress
) -> tuple[list[dict[str, Any]], int, int]:
    """Parquet parts of about PART_TEXT_BYTES text each, in row groups of ROW_GROUP_ROWS.

    A full row group or part is written when the next row arrives (or the rows end): by then
    the readers have let go of the last row, so its text is held once, by the batch, and freed
    once in Arrow. The text column has no dictionary and no min/max statistics (the writer
    would hold more copies of a long document for them), and pages are Parquet's version 2 (a
    version 1 page of one long document costs the writer twice its size, a version 2 once).
    """
    parts: list[dict[str, Any]] = []
    writer: pq.ParquetWriter | None = None
    batch: list[dict[str, str]] = []
    part_bytes = part_rows = total = total_bytes = 0

    def flush() -> None:
        nonlocal writer
        if not batch:
            return
        if writer is None:
            writer = pq.ParquetWriter(
                staging / f"part-{len(parts):05d}.parquet",
                RAW_SCHEMA,
                compression="zstd",
                use_dictionary=[n for n in RAW_SCHEMA.names if n != "text"],
                write_statistics=[n for n in RAW_SCHEMA.names if n != "text"],
                data_page_version="2.0",
            )
        table = pa.Table.from_pylist(batch, schema=RAW_SCHEMA)
        batch.clear()
        writer.write_table(table)

    def close_part() -> None:
        nonlocal writer, part_bytes, part_rows
        flush()
        if writer is None:
            return
        writer.close()
        name = f"part-{len(parts):05d}.parquet"
        parts.append(_fsynced_file_entry(staging / name, part_rows))
        writer, part_bytes, part_rows = None, 0, 0

    for row in rows:
        if part_bytes >= PART_TEXT_BYTES:
            close_part()
        elif len(batch) >= ROW_GROUP_ROWS:
            flush()
        size = utf8_length(row["text"])
        batch.append(row)
        part_bytes += size
        part_rows += 1
        total += 1
        total_bytes += size
        progress.add(1, size)
        del row  # the batch holds it; the loop must not, once the rows end
    close_part()
    return parts, total, total_bytes


def utf8_length(text: str, chunk: int = 1 << 20) -> int:
    """len(text.encode("utf-8")) without a copy of a long text (a chunk at a time)."""
    if text.isascii():
        return len(text)
    return sum(len(text[i : i + chunk].encode("utf-8")) for i in range(0, len(text), chunk))


def _fsynced_file_entry(path: Path, rows: int) -> dict[str, Any]:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())
    return {
        "name": path.name,
        "sha256": file_sha256(path),
        "bytes": path.stat().st_size,
        "rows": rows,
    }


def _source_record(
    cfg: LoadedConfig,
    spec: SourceSpec,
    key: str,
    inputs: list[InputFile],
    parts: list[dict[str, Any]],
    count: int,
    nbytes: int,
) -> dict[str, Any]:
    written = next(s for s in cfg.raw["sources"] if s["name"] == spec.name)
    raw_spec = json.loads(canon(mask_data(written)))  # the spec as written, URL secrets masked
    return {
        "source_key": key,
        "source": spec.name,
        "kind": spec.kind,
        "license": spec.license,
        "spec": raw_spec,
        "inputs": [{"name": i.name, "sha256": i.sha256, "bytes": i.bytes} for i in inputs],
        "input_sha256": inputs_sha256(inputs) if inputs else None,
        "files": parts,
        "documents": count,
        "text_bytes": nbytes,
        "code_version": CODE_VERSION,
    }


def _ledger_entry(record: dict[str, Any]) -> dict[str, Any]:
    keys = ("source_key", "source", "license", "input_sha256", "files", "documents")
    return {k: record[k] for k in keys}
