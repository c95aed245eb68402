"""`corpus export-tokens`: a verified token build in a format a training framework reads.

The export reads our token files, never the text: each `.bin` is copied as it is (the formats
keep the ids' bytes), and the index files are made from the `.idx` offsets
(`token_formats.py`). Shard NNNNN becomes rank NNNNN's files. Every token file is checked
against the tokens manifest's sha256 as it is read; a mismatch is DataError and nothing is
published.

The export folder holds the framework's files and `_MANIFEST.json` (kind `token_export`): the
format, the source tokens manifest's sha256, build id and tokenizer, and every file with its
sha256, size, shard, tokens and documents. Frameworks ignore it (Megatron-LM is given file
prefixes, nanotron globs `*.ds`).

To a folder: built in a staging folder beside it (`.NAME.staging-PID`; one a killed export left
is removed by the next) and renamed into place, the manifest last. A folder that holds this very
export already is kept (no work); any other existing path is refused, but for `export_build`
(the `token_exports` asset), which replaces its own export of an older build at
`<root>/exports/<format>/<partition>/`, holding the build's tokenize lock shared (the tokens are
not rebuilt or cleaned meanwhile) and the export's own lock.

To a URL (`s3://...`, any fsspec URL): staged in a temporary folder (the token files linked, not
copied) and uploaded by `corpus publish`'s code: claim, data files, read back, manifest last.

From a published build (its URL, as `corpus publish` left it): the manifest and `.idx` files are
read whole, each `.bin` streamed into the export (to a URL: into the temporary folder first),
all checked against the tokens manifest; a read the network breaks is retried as `corpus
publish` retries.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.errors import ConfigError, DataError, UpstreamMissing
from corpus_assets.core.stages.publish import check_destination, publish
from corpus_assets.core.stages.token_formats import (
    FORMATS,
    file_names,
    megatron_index,
    nanotron_metadata,
    token_size,
)
from corpus_assets.core.store.atomic import (
    MANIFEST,
    atomic_writer,
    disk_error,
    dump_json,
    fsync_dir,
    fsync_tree,
    remove_tree,
    write_bytes,
)
from corpus_assets.core.store.digests import verify_files
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.core.store.records import load_object, parse_object, require, require_files
from corpus_assets.core.store.remote import filesystem, retrying, shown, store_errors
from corpus_assets.core.text.tokenizer import IDX_DTYPE
from corpus_assets.core.version import CODE_VERSION

EXPORT_KIND = "token_export"
EXPORTS = "exports"
COPY_BLOCK = 8 << 20
FIX = "run `corpus verify` on the token build, and rebuild it if it fails"


@dataclass(frozen=True)
class Planned:
    """One file of an export: small ones built in memory, token files copied from `source`."""

    name: str
    sha256: str
    size: int
    shard: str
    tokens: int
    documents: int
    data: bytes | None = None
    source: str | None = None  # a path, or the URL of a published build's file

    def entry(self) -> dict[str, Any]:
        """The file's entry in the export manifest."""
        return {
            "name": self.name,
            "sha256": self.sha256,
            "bytes": self.size,
            "shard": self.shard,
            "tokens": self.tokens,
            "documents": self.documents,
        }


@dataclass(frozen=True)
class TokenExport:
    """What an export wrote (or found already there) and where."""

    format: str
    dest: str
    files: int
    documents: int
    tokens: int
    reused: bool
    published: dict[str, Any] | None = None


def tokens_manifest_of(path: Path | str) -> Path | str:
    """The tokens `_MANIFEST.json` at `path` (the file or its folder, on disk or at a URL);
    ConfigError otherwise."""
    if "://" in str(path):
        url = str(path).rstrip("/")
        url = url if url.endswith(f"/{MANIFEST}") else f"{url}/{MANIFEST}"
        doc = parse_object(_read(url), shown(url), "manifest", FIX)
        _check_kind(doc, shown(url))
        return url
    path = Path(path)
    manifest = path / MANIFEST if path.is_dir() else path
    if manifest.name != MANIFEST or not manifest.is_file():
        raise ConfigError(f"{path}: no {MANIFEST}; give a token build's folder or its manifest")
    _check_kind(load_object(manifest, "manifest"), str(manifest))
    return manifest


def _check_kind(doc: dict[str, Any], where: str) -> None:
    kind = doc.get("kind")
    if kind != "tokens":
        raise ConfigError(f"{where}: a {kind!r} manifest; export-tokens needs a tokens build")


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; allowed: {', '.join(FORMATS)}")
    return fmt


def export_tokens(
    manifest_path: Path | str, fmt: str, to: str, note: Callable[[str], None]
) -> TokenExport:
    """Export the token build of `manifest_path` (a path, or a published build's URL) as `fmt`
    to a new folder or a URL."""
    check_format(fmt)
    if "://" in to:
        check_destination(to)
    plan, doc = plan_export(manifest_path, fmt)
    if "://" in to:
        return _to_url(plan, doc, fmt, to, note)
    return _to_folder(plan, doc, fmt, Path(to).absolute(), note)


def export_build(
    cfg: LoadedConfig, layout: Layout, fmt: str, note: Callable[[str], None]
) -> TokenExport:
    """Export the build's tokens as `fmt` to `<root>/exports/<fmt>/<partition>/`, replacing
    an export of an older build there."""
    check_format(fmt)
    manifest = layout.tokens(cfg) / MANIFEST
    target = layout.root / EXPORTS / fmt / cfg.partition_key
    with (
        build_lock(layout.stage_lock(cfg.hash12, "tokenize"), "the tokens", note, True),
        build_lock(layout.stage_lock(cfg.hash12, f"export-{fmt}"), f"the {fmt} export", note),
    ):
        if not manifest.is_file():
            raise UpstreamMissing("tokens", f"no tokens manifest at {manifest}")
        plan, doc = plan_export(manifest, fmt)
        if not _holds(target, dump_json(doc)) and _kind(target) == EXPORT_KIND:
            note(f"export-tokens: replacing {target} (an export of another build)")
            remove_tree(target)
        return _to_folder(plan, doc, fmt, target, note)


def _kind(target: Path) -> object:
    try:
        return load_object(target / MANIFEST, "export manifest").get("kind")
    except (OSError, DataError):
        return None


def plan_export(manifest_path: Path | str, fmt: str) -> tuple[list[Planned], dict[str, Any]]:
    """Every file of the export and its manifest, from the tokens manifest and `.idx` files."""
    location = str(manifest_path)
    where = shown(location)
    raw = _read(location)
    manifest = parse_object(raw, where, "tokens manifest", FIX)
    folder = location.rsplit("/", 1)[0] if "://" in location else str(Path(location).parent)
    fields = {"build_id": str, "dtype": str, "eos_id": int, "vocab_size": int}
    require(manifest, fields, where, "tokens manifest", FIX)
    files = require_files(manifest, "files", where, "tokens manifest", FIX, {"tokens": int})
    size = token_size(manifest["dtype"])
    tokenizer = manifest.get("tokenizer") or {}
    plan: list[Planned] = []
    pairs = _pairs(files, where)
    for rank, (bin_entry, idx_entry) in enumerate(pairs):
        ends = _read_ends(_join(folder, idx_entry["name"]), idx_entry)
        plan += _rank_files(fmt, rank, bin_entry, folder, ends, size, tokenizer)
    doc = {
        "kind": EXPORT_KIND,
        "format": fmt,
        "source": {
            "build_id": manifest["build_id"],
            "manifest_sha256": hashlib.sha256(raw).hexdigest(),
            "tokenizer": tokenizer,
            "vocab_size": manifest["vocab_size"],
            "eos_id": manifest["eos_id"],
            "dtype": manifest["dtype"],
        },
        "token_size": size,
        "files": [p.entry() for p in plan],
        "totals": {
            "documents": sum(int(b["documents"]) for b, _ in pairs),
            "tokens": sum(int(b["tokens"]) for b, _ in pairs),
        },
        "code_version": CODE_VERSION,
    }
    return plan, doc


def _pairs(files: list[dict[str, Any]], where: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_name = {f["name"]: f for f in files}
    bins = sorted((f for f in files if f["name"].endswith(".bin")), key=lambda f: f["name"])
    pairs = []
    for entry in bins:
        idx = by_name.get(entry["name"][: -len(".bin")] + ".idx")
        if idx is None or 2 * len(bins) != len(files):
            raise DataError(f"{where}: token files are not .bin/.idx pairs; {FIX}")
        pairs.append((entry, idx))
    return pairs


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if "://" in folder else str(Path(folder) / name)


def _read(location: str) -> bytes:
    """A whole file of a token build, on disk or at a URL (DataError when it is missing)."""
    if "://" not in location:
        try:
            return Path(location).read_bytes()
        except FileNotFoundError:
            raise DataError(f"{location}: missing; {FIX}") from None
    fs, path = filesystem(location, "export-tokens")
    out: list[bytes] = []

    def attempt() -> int:
        out.clear()
        with store_errors("export-tokens", location):
            out.append(fs.cat_file(path))
        return 0

    retrying("export-tokens", location, attempt)
    return out[0]


def _read_ends(location: str, entry: dict[str, Any]) -> Any:
    """The document ends of an `.idx`, checked against its manifest entry."""
    raw = _read(location)
    if len(raw) != entry["bytes"] or hashlib.sha256(raw).hexdigest() != entry["sha256"]:
        raise DataError(f"{shown(location)}: does not match its manifest (size or sha256); {FIX}")
    return np.frombuffer(raw, dtype=IDX_DTYPE)


def _rank_files(
    fmt: str,
    rank: int,
    bin_entry: dict[str, Any],
    folder: str,
    ends: Any,
    size: int,
    tokenizer: dict[str, Any],
) -> list[Planned]:
    """The files of one rank: the token file as it is, then its index (and metadata)."""
    names = file_names(fmt, rank)
    tokens, documents = int(bin_entry["tokens"]), int(bin_entry["documents"])
    if int(ends[-1] if ends.size else 0) != tokens or ends.size != documents:
        where = shown(_join(folder, bin_entry["name"]))
        raise DataError(f"{where}: its .idx does not end at {tokens}; {FIX}")
    shard = str(bin_entry["name"])
    copied = Planned(
        names[0], bin_entry["sha256"], bin_entry["bytes"], shard, tokens, documents,
        source=_join(folder, shard),
    )  # fmt: skip
    if fmt == "megatron":
        made = [b"".join(megatron_index(ends, size))]
    else:
        name = str(tokenizer.get("id") or "Unknown Tokenizer")
        made = [ends.astype("<u8").tobytes(), nanotron_metadata(name, size, tokens)]
    return [copied] + [
        Planned(n, hashlib.sha256(d).hexdigest(), len(d), shard, tokens, documents, data=d)
        for n, d in zip(names[1:], made, strict=True)
    ]


def _result(
    fmt: str, dest: str, doc: dict[str, Any], reused: bool, published: dict[str, Any] | None
) -> TokenExport:
    totals = doc["totals"]
    return TokenExport(
        fmt, dest, len(doc["files"]), totals["documents"], totals["tokens"], reused, published
    )


def _to_folder(
    plan: list[Planned], doc: dict[str, Any], fmt: str, target: Path, note: Callable[[str], None]
) -> TokenExport:
    body = dump_json(doc)
    if _holds(target, body):
        note(f"export-tokens: {target} already holds this export")
        return _result(fmt, str(target), doc, True, None)
    _refuse(target)
    _sweep_staging(target, note)
    staging = target.with_name(f".{target.name}.staging-{os.getpid()}")
    try:
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        _write_files(plan, staging, note)
        write_bytes(staging / MANIFEST, body)
        fsync_tree(staging)
        if _holds(target, body):  # another export of the same build got there first
            return _result(fmt, str(target), doc, True, None)
        _refuse(target)  # os.replace would silently replace an empty folder made meanwhile
        os.replace(staging, target)
        fsync_dir(target.parent)
    except OSError as exc:
        raise disk_error(exc, staging) from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return _result(fmt, str(target), doc, False, None)


def _sweep_staging(target: Path, note: Callable[[str], None]) -> None:
    """Remove the staging folders that exports to `target` left when their process died."""
    for old in target.parent.glob(f".{glob.escape(target.name)}.staging-*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            note(f"export-tokens: removing {old.name}, left by process {pid} (gone)")
            shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _holds(target: Path, body: bytes) -> bool:
    try:
        return (target / MANIFEST).read_bytes() == body
    except OSError:
        return False


def _refuse(target: Path) -> None:
    if target.exists() or target.is_symlink():
        raise ConfigError(f"{target} already exists and holds something else; choose a new folder")


def _write_files(plan: Iterable[Planned], staging: Path, note: Callable[[str], None]) -> None:
    for item in plan:
        if item.data is not None:
            with atomic_writer(staging / item.name, sync_dir=False) as out:
                out.write(item.data)
            continue
        assert item.source is not None
        note(f"export-tokens: {item.shard} -> {item.name} ({item.size:,} bytes)")
        _copy_checked(item, staging / item.name)


def _copy_checked(item: Planned, dest: Path) -> None:
    """Copy a token file (from disk, or streamed from a URL), checking its size and sha256
    against the tokens manifest."""
    source = item.source
    assert source is not None
    if "://" not in source:
        try:
            with open(source, "rb") as src:
                _copy_stream(item, src, dest)
        except FileNotFoundError:
            raise DataError(f"{source}: missing; {FIX}") from None
        return
    fs, path = filesystem(source, "export-tokens")

    def attempt() -> int:  # the whole file again after a break: its digest is of every byte
        with store_errors("export-tokens", source), fs.open(path, "rb") as src:
            _copy_stream(item, src, dest)
        return 0

    retrying("export-tokens", source, attempt)


def _copy_stream(item: Planned, src: Any, dest: Path) -> None:
    digest, size = hashlib.sha256(), 0
    with atomic_writer(dest, sync_dir=False) as out:
        while block := src.read(COPY_BLOCK):
            digest.update(block)
            size += len(block)
            out.write(block)
        if (digest.hexdigest(), size) != (item.sha256, item.size):
            where = shown(item.source or "")
            raise DataError(f"{where}: does not match its manifest (sha256); {FIX}")


def _to_url(
    plan: list[Planned], doc: dict[str, Any], fmt: str, url: str, note: Callable[[str], None]
) -> TokenExport:
    """Stage the export in a temporary folder (token files on disk linked, published ones
    copied) and publish it to `url`."""
    local = [Path(p.source) for p in plan if p.source is not None and "://" not in p.source]
    for folder in {path.parent for path in local}:
        listed = [
            {"name": p.source.rsplit("/", 1)[-1], "sha256": p.sha256, "bytes": p.size}
            for p in plan
            if p.source is not None and "://" not in p.source and Path(p.source).parent == folder
        ]
        problems = verify_files(folder, listed)
        if problems:
            raise DataError(f"{problems[0]}; {FIX}")
    with tempfile.TemporaryDirectory(prefix="corpus-export-") as tmp:
        staging = Path(tmp) / "export"
        staging.mkdir()
        for item in plan:
            if item.source is not None and "://" in item.source:
                note(f"export-tokens: {item.shard} -> {item.name} ({item.size:,} bytes)")
                _copy_checked(item, staging / item.name)
            elif item.source is not None:
                os.symlink(Path(item.source).absolute(), staging / item.name)
            else:
                assert item.data is not None
                (staging / item.name).write_bytes(item.data)
        (staging / MANIFEST).write_bytes(dump_json(doc))
        published = publish(staging, url, note)
    reused = published["uploaded"] == 0
    return _result(fmt, published["url"], doc, reused, published)
