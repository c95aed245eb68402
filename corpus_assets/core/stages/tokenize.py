"""The tokenize stage: every shard to one `.bin`/`.idx` token file pair, in parallel, resumable.

Files (all little-endian), one pair per shard `shard-NNNNN.parquet`:
- `shard-NNNNN.bin`: the token ids of every document in shard order, each followed by EOS;
  uint16 when the vocabulary (EOS included) has at most 65,536 ids, else uint32.
- `shard-NNNNN.idx`: uint64, one per document: the cumulative END offset (in tokens, EOS
  included) of that document in the `.bin`; document i is `bin[idx[i-1]:idx[i]]` (0 for i=0).

`_MANIFEST.json` (kind `tokens`) records build id, config sha256, the tokenizer identity
(`tokenizer: {id, sha256}`; sha256 of its tokenizer.json, null for `bytes`), `vocab_size`, `dtype`,
`eos_id`, `files` (one entry per `.bin` and per `.idx`: name, shard, sha256, bytes, tokens,
documents), `totals` (documents, tokens), the shards manifest it was built from (`shards_manifest`,
relative to this folder) and its sha256. No timestamps or worker counts: byte-identical builds.

Work happens under `work/<hash12>/tokenize/`: `out/` is the staging folder that is published,
`markers/<stem>.json` says a shard's pair is complete (written after its files are durable), so
a killed stage redoes only unfinished shards.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.errors import CorpusError, DataError, UpstreamMissing
from corpus_assets.core.stages.backend import LOCAL, Backend
from corpus_assets.core.stages.tokenize_pool import ShardTask, read_marker, run_shards
from corpus_assets.core.store.atomic import (
    MANIFEST,
    private_dir,
    publish_dir,
    remove_tree,
    write_json,
)
from corpus_assets.core.store.digests import verify_files
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.store.records import parse_object, require_files
from corpus_assets.core.text.tokenizer import (
    TokenizerInfo,
    resolve_tokenizer,
)
from corpus_assets.core.version import CODE_VERSION


@dataclass(frozen=True)
class TokenizeResult:
    """What the stage built: counts, token format and the manifest (relative to the data root)."""

    documents: int
    tokens: int
    shards: int
    tokenizer: str
    vocab_size: int
    eos_id: int
    dtype: str
    manifest: str


@dataclass(frozen=True)
class ShardsInput:
    """The verified shards manifest the stage reads."""

    folder: Path
    sha256: str
    shards: list[dict[str, Any]]


def tokenize(
    cfg: LoadedConfig,
    layout: Layout,
    workers: int,
    progress: Progress,
    backend: Backend = LOCAL,
) -> TokenizeResult:
    """Tokenize every shard of the build and publish the token files with their manifest."""
    info = resolve_tokenizer(cfg)
    final = layout.tokens(cfg)
    work = layout.work(cfg, "tokenize")
    with (
        # the shards are read under their lock, shared: never while rebuilt or cleaned up
        build_lock(layout.stage_lock(cfg.hash12, "shard"), "the shards", progress.note, True),
        build_lock(
            layout.stage_lock(cfg.hash12, "tokenize"),
            f"the tokenize stage of {cfg.build_id}",
            progress.note,
        ),
    ):
        shards = read_shards(layout.shards(cfg))
        published = _published(final, shards, info)
        out, markers = work / "out", work / "markers"
        if published is not None:
            remove_tree(work)  # left if a run was killed right after publishing
            progress.note(f"tokens already built in {final.relative_to(layout.root)}")
            return _result(layout, final, published)
        private_dir(layout.work_root)  # shard texts pass through there: owner-only
        out.mkdir(parents=True, exist_ok=True)
        markers.mkdir(parents=True, exist_ok=True)
        tasks = [_task(cfg, info, shards, entry, out, markers) for entry in shards.shards]
        pending = [t for t in tasks if read_marker(t) is None]
        if len(pending) < len(tasks):
            progress.note(f"resuming: {len(tasks) - len(pending)} of {len(tasks)} shards done")
        run_shards(pending, workers, progress, backend)
        stats = [read_marker(t, check_files=False) for t in tasks]
        if any(s is None for s in stats):  # a marker vanished under us: someone else is here
            raise CorpusError(f"tokenize staging {work} changed during the run; run it again")
        files = [f for s in stats if s is not None for f in s["files"]]
        _sweep(out, {f["name"] for f in files})
        doc = _manifest(cfg, info, shards, files, os.path.relpath(shards.folder, final))
        write_json(out / MANIFEST, doc)
        publish_dir(out, final)
        remove_tree(work)
    progress.done()
    return _result(layout, final, doc)


def read_shards(folder: Path) -> ShardsInput:
    """The shards manifest of the build, every shard verified against it (else DataError)."""
    path = folder / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UpstreamMissing("shards", f"no shards manifest at {path}") from None
    fix = "run the shard stage again to rebuild it"
    doc = parse_object(raw, str(path), "shards manifest", fix)
    if doc.get("kind") != "shards":
        raise DataError(f"{path}: not a shards manifest (kind {doc.get('kind')!r}); {fix}")
    shards = require_files(doc, "shards", str(path), "shards manifest", fix, extra={"rows": int})
    problems = verify_files(folder, shards)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise DataError(f"shards do not match their manifest: {'; '.join(problems[:3])}{more}")
    return ShardsInput(folder, hashlib.sha256(raw).hexdigest(), shards)


def _task(
    cfg: LoadedConfig,
    info: TokenizerInfo,
    shards: ShardsInput,
    entry: dict[str, Any],
    out: Path,
    markers: Path,
) -> ShardTask:
    stem = Path(entry["name"]).stem
    return ShardTask(
        shard=entry["name"],
        shard_path=str(shards.folder / entry["name"]),
        shard_sha256=entry["sha256"],
        rows=int(entry["rows"]),
        size=int(entry["bytes"]),
        out_dir=str(out),
        marker=str(markers / f"{stem}.json"),
        tokenizer=info,
        batch_size=cfg.model.tokenizer.batch_size,
    )


def _published(final: Path, shards: ShardsInput, info: TokenizerInfo) -> dict[str, Any] | None:
    """The published manifest, if it is whole, built from these shards and verifies."""
    try:
        doc = json.loads((final / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("shards_manifest_sha256") != shards.sha256:
        return None
    built = {**doc.get("tokenizer", {}), **{k: doc.get(k) for k in ("vocab_size", "eos_id")}}
    want = {k: v for k, v in info.identity().items() if k != "dtype"}
    if built != want:
        raise DataError(
            f"{final} was built with tokenizer {built}, but the config's tokenizer is now {want} "
            "(its file changed?); run `corpus cleanup` for this build, or give it a new version"
        )
    return None if verify_files(final, doc.get("files", [])) else doc


def _sweep(out: Path, keep: set[str]) -> None:
    """Delete what a killed run left in staging (temp files, files of no current shard)."""
    for path in out.iterdir():
        if path.name in keep:
            continue
        if path.is_dir():
            remove_tree(path)
        else:
            path.unlink()


def _manifest(
    cfg: LoadedConfig,
    info: TokenizerInfo,
    shards: ShardsInput,
    files: list[dict[str, Any]],
    shards_rel: str,
) -> dict[str, Any]:
    bins = [f for f in files if f["name"].endswith(".bin")]
    return {
        "kind": "tokens",
        "build_id": cfg.build_id,
        "stage_key": cfg.stage_key("tokenize"),
        "config_sha256": cfg.sha256,
        "tokenizer": {"id": info.id, "sha256": info.sha256},
        "vocab_size": info.vocab_size,
        "eos_id": info.eos_id,
        "dtype": info.dtype,
        "idx_dtype": "uint64",
        "byte_order": "little",
        "files": files,
        "totals": {
            "documents": sum(f["documents"] for f in bins),
            "tokens": sum(f["tokens"] for f in bins),
        },
        "shards_manifest": f"{shards_rel}/{MANIFEST}",
        "shards_manifest_sha256": shards.sha256,
        "code_version": CODE_VERSION,
    }


def _result(layout: Layout, final: Path, doc: dict[str, Any]) -> TokenizeResult:
    return TokenizeResult(
        documents=doc["totals"]["documents"],
        tokens=doc["totals"]["tokens"],
        shards=sum(1 for f in doc["files"] if f["name"].endswith(".bin")),
        tokenizer=doc["tokenizer"]["id"],
        vocab_size=doc["vocab_size"],
        eos_id=doc["eos_id"],
        dtype=doc["dtype"],
        manifest=str((final / MANIFEST).relative_to(layout.root)),
    )
