"""The snapshot: aligned JSONL files and a manifest, written in staging, published by one rename.

`write_snapshot` streams the rows into `public.jsonl`, `references.jsonl` and `train.jsonl`,
digesting as it goes, then writes `probes.jsonl`, `report.json` and, last, `manifest.json`.
`load_snapshot` re-digests every file, recomputes the `dataset_id` and checks the row alignment;
any problem is one `DataError` line naming the file. `Snapshot.training_rows()` checks again the
same way. (`tasks/export.py` exports a snapshot to
Hugging Face `datasets`.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from corpus_assets.core.config import canon, sha256_hex
from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.store.atomic import disk_error, dump_json, fsync_dir, fsync_tree
from corpus_assets.core.store.remote import RemotePath
from corpus_assets.tasks.files import (
    jsonl_line,
    private_dir,
    private_writer,
)
from corpus_assets.tasks.types import JSON, PublicTask

Folder = Path | RemotePath
"""Where a snapshot's files are read: a folder on disk, or the URL it was published to."""

PUBLIC = "public.jsonl"
REFERENCES = "references.jsonl"
TRAIN = "train.jsonl"
PROBES = "probes.jsonl"
REPORT = "report.json"
DATA_FILES = (PUBLIC, REFERENCES, TRAIN, PROBES, REPORT)
JSONL_FILES = (PUBLIC, REFERENCES, TRAIN, PROBES)
ALIGNED_FILES = (PUBLIC, REFERENCES, TRAIN)
MANIFEST = "manifest.json"
SNAPSHOT_FORMAT = 1
RESERVED_KEYS = ("format", "dataset_id", "rows", "files")
PUBLIC_KEYS = frozenset({"task_id", "input", "metadata"})
REFERENCE_KEYS = frozenset({"task_id", "reference"})
CHUNK = 1 << 20


def dataset_id_of(file_digests: Mapping[str, str]) -> str:
    """The content identity: sha256 of the canonical JSON of `{name: sha256}` of DATA_FILES."""
    missing = [name for name in DATA_FILES if name not in file_digests]
    if missing:
        raise ValueError(f"no sha256 for {', '.join(missing)}; need all of {', '.join(DATA_FILES)}")
    return sha256_hex(canon({name: file_digests[name] for name in DATA_FILES}))


class _Alignment:
    """Row checks shared by writing and loading: aligned ids, distinct ids, ordered probes."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.last_probe: tuple[int, int] = (-1, -1)
        self.probes = 0

    def row(self, public: Any, reference: Any, train: Any) -> None:
        """Check the next row triple; ValueError naming the file and row."""
        number = len(self.index) + 1
        task_id = _task_id(public, PUBLIC, number)
        if not isinstance(public, dict) or set(public) != PUBLIC_KEYS:
            raise ValueError(f"{PUBLIC} row {number}: keys must be {sorted(PUBLIC_KEYS)}")
        if not isinstance(public["metadata"], dict):
            raise ValueError(f"{PUBLIC} row {number}: metadata must be an object")
        if task_id in self.index:
            first = self.index[task_id] + 1
            raise ValueError(f"{PUBLIC} row {number}: duplicate task_id {task_id!r} (row {first})")
        ref_id = _task_id(reference, REFERENCES, number)
        if set(reference) != REFERENCE_KEYS:
            raise ValueError(f"{REFERENCES} row {number}: keys must be {sorted(REFERENCE_KEYS)}")
        _same_id(ref_id, task_id, REFERENCES, number)
        if not isinstance(train, dict):
            raise ValueError(f"{TRAIN} row {number}: not a JSON object")
        if "task_id" in train:
            _same_id(train["task_id"], task_id, TRAIN, number)
        self.index[task_id] = number - 1

    def probe(self, probe: Any) -> None:
        """Check the next probe row: a public task id, probes in (public order, repeat) order."""
        self.probes += 1
        number = self.probes
        task_id = _task_id(probe, PROBES, number)
        if task_id not in self.index:
            raise ValueError(f"{PROBES} row {number}: task_id {task_id!r} is not in {PUBLIC}")
        repeat = probe.get("repeat")
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 0:
            raise ValueError(f"{PROBES} row {number}: repeat must be an integer >= 0")
        key = (self.index[task_id], repeat)
        if key <= self.last_probe:
            raise ValueError(
                f"{PROBES} row {number}: out of order (want {PUBLIC} order, then repeat)"
            )
        self.last_probe = key


def _task_id(row: Any, name: str, number: int) -> str:
    """The row's string task_id, else ValueError naming the file and row."""
    if not isinstance(row, dict) or not isinstance(row.get("task_id"), str):
        raise ValueError(f"{name} row {number}: no string task_id")
    task_id: str = row["task_id"]
    return task_id


def _same_id(found: object, want: str, name: str, number: int) -> None:
    if found != want:
        raise ValueError(f"{name} row {number}: task_id {found!r} does not match {PUBLIC} {want!r}")


class _DigestWriter:
    """Counts bytes and rows and digests what goes into one open file."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.sha = hashlib.sha256()
        self.bytes = 0
        self.rows = 0

    def write_row(self, row: Any) -> None:
        data = jsonl_line(row)
        self.fh.write(data)
        self.sha.update(data)
        self.bytes += len(data)
        self.rows += 1

    def entry(self) -> dict[str, JSON]:
        return {"sha256": self.sha.hexdigest(), "bytes": self.bytes, "rows": self.rows}


def write_snapshot(
    staging: Path,
    final: Path,
    rows: Iterable[tuple[dict[str, JSON], dict[str, JSON], dict[str, JSON]]],
    probes: Iterable[dict[str, JSON]],
    report: Mapping[str, JSON],
    provenance: Mapping[str, JSON],
) -> dict[str, JSON]:
    """Write a snapshot in `staging`, manifest last, and publish it as `final`; the manifest."""
    reserved = sorted(set(RESERVED_KEYS) & set(provenance))
    if reserved:
        raise ValueError(f"provenance must not set {', '.join(reserved)} (the manifest's own keys)")
    _refuse_existing(final)
    if staging.exists():  # left over from a crash
        shutil.rmtree(staging)
    private_dir(staging)
    alignment = _Alignment()
    files = _write_rows(staging, rows, alignment)
    files[PROBES] = _write_probes(staging, probes, alignment)
    report_bytes = dump_json(dict(report))
    _write_file(staging / REPORT, report_bytes)
    files[REPORT] = {"sha256": sha256_hex(report_bytes), "bytes": len(report_bytes)}
    digests = {name: str(entry["sha256"]) for name, entry in files.items()}
    manifest: dict[str, JSON] = {
        "format": SNAPSHOT_FORMAT,
        "dataset_id": dataset_id_of(digests),
        "rows": len(alignment.index),
        "files": {name: files[name] for name in DATA_FILES},
        **provenance,
    }
    _write_file(staging / MANIFEST, dump_json(manifest))
    publish_folder(staging, final)
    return manifest


def _write_rows(
    staging: Path,
    rows: Iterable[tuple[dict[str, JSON], dict[str, JSON], dict[str, JSON]]],
    alignment: _Alignment,
) -> dict[str, dict[str, JSON]]:
    """Stream the row triples into the three aligned files; their manifest entries."""
    with ExitStack() as stack:
        writers = [
            _DigestWriter(stack.enter_context(private_writer(staging / name)))
            for name in ALIGNED_FILES
        ]
        for triple in rows:
            public, reference, train = triple
            alignment.row(public, reference, train)
            for writer, row in zip(writers, triple, strict=True):
                writer.write_row(row)
    return {name: w.entry() for name, w in zip(ALIGNED_FILES, writers, strict=True)}


def _write_probes(
    staging: Path, probes: Iterable[dict[str, JSON]], alignment: _Alignment
) -> dict[str, JSON]:
    """Stream the probe rows into probes.jsonl; its manifest entry."""
    with private_writer(staging / PROBES) as fh:
        writer = _DigestWriter(fh)
        for probe in probes:
            alignment.probe(probe)
            writer.write_row(probe)
    return writer.entry()


def _write_file(path: Path, data: bytes) -> None:
    with private_writer(path) as fh:
        fh.write(data)


def _refuse_existing(final: Path) -> None:
    if final.exists():
        raise ConfigError(f"{final} already exists; a snapshot is never overwritten")


def publish_folder(staging: Path, final: Path) -> None:
    """Rename the complete staging folder to `final` (which must not exist) durably."""
    fsync_tree(staging)
    _refuse_existing(final)  # os.replace would silently replace an empty folder
    try:
        os.replace(staging, final)
    except OSError as exc:
        raise disk_error(exc, final) from exc
    fsync_dir(final.parent)


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot folder (or published URL: a `RemotePath`) and its manifest.

    `training_rows()` verifies the folder again and returns a list; the other row readers
    stream their file line by line as it is now.
    """

    path: Folder
    manifest: dict[str, Any]

    @property
    def dataset_id(self) -> str:
        """The content identity (see `dataset_id_of`)."""
        return str(self.manifest["dataset_id"])

    @property
    def report(self) -> dict[str, Any]:
        """The parsed report.json."""
        report: dict[str, Any] = _parse(self.path, REPORT, (self.path / REPORT).read_bytes(), 1)
        return report

    @property
    def rows(self) -> int:
        """How many tasks the snapshot holds."""
        return int(self.manifest["rows"])

    def public_tasks(self) -> Iterator[PublicTask]:
        """The public tasks, in order."""
        for row in _read_jsonl(self.path, PUBLIC):
            yield PublicTask(row["task_id"], row["input"], row["metadata"])

    def references(self) -> Iterator[dict[str, Any]]:
        """The reference rows `{"task_id", "reference"}`, aligned with `public_tasks`."""
        return _read_jsonl(self.path, REFERENCES)

    def training_rows(self) -> list[dict[str, Any]]:
        """The recipe's training rows, aligned with `public_tasks`, verified again first.

        The folder is checked as `load_snapshot` checks it, against this snapshot's manifest,
        and the rows come from the very bytes whose digest matched: a file changed since
        loading is the `DataError` that `load_snapshot` would raise.
        """
        _verify(self.path, self.manifest)
        data = (self.path / TRAIN).read_bytes()
        _check_digest(self.path, TRAIN, self.manifest["files"][TRAIN], sha256_hex(data))
        lines = data.split(b"\n")[:-1]  # the digest matched: every row ends in a newline
        return [_parse(self.path, TRAIN, line, n) for n, line in enumerate(lines, start=1)]

    def probes(self) -> Iterator[dict[str, Any]]:
        """The calibration probe rows (none without calibration)."""
        return _read_jsonl(self.path, PROBES)


def _read_jsonl(folder: Folder, name: str) -> Iterator[dict[str, Any]]:
    """The rows of one JSONL file; a bad line is a DataError naming the file and line."""
    with (folder / name).open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                raise DataError(f"snapshot {folder}: {name} line {number}: truncated (no newline)")
            yield _parse(folder, name, line, number)


def _parse(folder: Folder, name: str, data: bytes, number: int) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise DataError(f"snapshot {folder}: {name} line {number}: not JSON ({exc})") from None


def load_snapshot(path: str | Path) -> Snapshot:
    """The verified snapshot at `path` (or in `path/dataset`); any problem is one DataError.

    `path` may be the URL a snapshot was published to (`corpus publish`: `s3://…`, `https://…`,
    any fsspec URL): its files are verified and read where they are, streaming.
    """
    where = str(path)
    folder = _snapshot_folder(RemotePath(where) if "://" in where else Path(path))
    manifest = _read_manifest(folder)
    _verify(folder, manifest)
    return Snapshot(folder, manifest)


def _verify(folder: Folder, manifest: dict[str, Any]) -> None:
    """The files in `folder` against `manifest`: listing, digests, identity, row alignment."""
    _check_listing(folder)
    _check_files(folder, manifest)
    _check_alignment(folder)


def _snapshot_folder(path: Folder) -> Folder:
    """The snapshot folder: `path` itself, or the `dataset/` of a job folder."""
    if not path.is_dir():
        raise DataError(f"snapshot {path}: no such folder")
    if not (path / MANIFEST).exists() and (path / "dataset").is_dir():
        return path / "dataset"
    return path


def _read_manifest(folder: Folder) -> dict[str, Any]:
    """The parsed manifest with the shape `load_snapshot` relies on, else DataError."""
    where = f"snapshot {folder}: {MANIFEST}"
    if not (folder / MANIFEST).is_file():
        raise DataError(f"{where} missing (an unfinished or foreign folder?)")
    manifest = _parse(folder, MANIFEST, (folder / MANIFEST).read_bytes(), 1)
    if not isinstance(manifest, dict):
        raise DataError(f"{where}: not a JSON object")
    if manifest.get("format") != SNAPSHOT_FORMAT:
        raise DataError(f"{where}: unknown format {manifest.get('format')!r}; allowed: 1")
    files = manifest.get("files")
    if not isinstance(files, dict) or sorted(files) != sorted(DATA_FILES):
        listed = sorted(files) if isinstance(files, dict) else files
        raise DataError(f"{where}: files must list {', '.join(DATA_FILES)}, got {listed}")
    for name in DATA_FILES:
        _check_entry(where, name, files[name])
    rows = manifest.get("rows")
    if not _is_count(rows) or not isinstance(manifest.get("dataset_id"), str):
        raise DataError(f"{where}: needs an integer 'rows' and a string 'dataset_id'")
    return manifest


def _check_entry(where: str, name: str, entry: Any) -> None:
    """One `files` entry: sha256, bytes and, for JSONL files, rows."""
    keys = {"sha256", "bytes", "rows"} if name in JSONL_FILES else {"sha256", "bytes"}
    ok = isinstance(entry, dict) and set(entry) == keys and isinstance(entry["sha256"], str)
    if not ok or not all(_is_count(entry[k]) for k in keys - {"sha256"}):
        raise DataError(f"{where}: bad entry for {name}; want {sorted(keys)}")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_listing(folder: Folder) -> None:
    """Only the data files and the manifest (dotfiles aside); each data file present."""
    names = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    unknown = sorted(names - {*DATA_FILES, MANIFEST})
    if unknown:
        raise DataError(f"snapshot {folder}: unexpected file {unknown[0]}")
    for name in DATA_FILES:
        if not (folder / name).is_file():
            raise DataError(f"snapshot {folder}: {name} missing")


def _check_files(folder: Folder, manifest: dict[str, Any]) -> None:
    """Every data file's sha256, size and row count as listed; the dataset_id recomputed."""
    digests: dict[str, str] = {}
    for name in DATA_FILES:
        entry = manifest["files"][name]
        sha, size, lines = _digest(folder / name)
        _check_digest(folder, name, entry, sha)
        if size != entry["bytes"] or ("rows" in entry and lines != entry["rows"]):
            raise DataError(f"snapshot {folder}: {name} size or row count differs from manifest")
        digests[name] = sha
        if name in ALIGNED_FILES and lines != manifest["rows"]:
            raise DataError(
                f"snapshot {folder}: {name} has {lines} rows, manifest says {manifest['rows']}"
            )
    found = dataset_id_of(digests)
    if found != manifest["dataset_id"]:
        raise DataError(
            f"snapshot {folder}: dataset_id mismatch "
            f"(manifest {manifest['dataset_id'][:12]}…, files {found[:12]}…)"
        )


def _check_digest(folder: Folder, name: str, entry: dict[str, Any], sha: str) -> None:
    if sha != entry["sha256"]:
        raise DataError(
            f"snapshot {folder}: {name} sha256 mismatch "
            f"(manifest {entry['sha256'][:12]}…, file {sha[:12]}…)"
        )


def _digest(path: Folder) -> tuple[str, int, int]:
    """sha256, byte size and newline count of a file, in one streaming pass."""
    sha = hashlib.sha256()
    size = lines = 0
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    return sha.hexdigest(), size, lines


def _check_alignment(folder: Folder) -> None:
    """Row i has one task_id across the aligned files; ids distinct; probes ordered."""
    alignment = _Alignment()
    readers = [_read_jsonl(folder, name) for name in ALIGNED_FILES]
    try:
        for public, reference, train in zip(*readers, strict=True):
            alignment.row(public, reference, train)
        for probe in _read_jsonl(folder, PROBES):
            alignment.probe(probe)
    except ValueError as exc:  # zip's length check too, though the digests pass caught it
        raise DataError(f"snapshot {folder}: {exc}") from None
