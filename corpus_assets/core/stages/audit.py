"""Audits of published builds, independent of the stages that wrote them (the asset checks).

Each takes a validated config and the data root and returns an `Audit`: passed or not, the
problems found (each names the file and what is wrong), and a few counts for display.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.records import load_object, parse_object

MAX_PROBLEMS = 20
SAMPLE_DOCUMENTS = 16
Count = int | float | str


@dataclass(frozen=True)
class Audit:
    """The outcome of one audit."""

    passed: bool
    problems: tuple[str, ...] = ()
    counts: dict[str, Count] = field(default_factory=dict)


def audit_of(problems: list[str], **counts: Count) -> Audit:
    """An Audit: passed when there are no problems, at most MAX_PROBLEMS of them shown."""
    shown = problems[:MAX_PROBLEMS]
    if len(problems) > MAX_PROBLEMS:
        shown.append(f"... and {len(problems) - MAX_PROBLEMS} more")
    return Audit(passed=not problems, problems=tuple(shown), counts=counts)


def _manifest(path: Path) -> dict[str, Any]:
    """A manifest as a JSON object; a corrupt one is DataError naming the file."""
    return load_object(path, "manifest")


def manifest_valid(cfg: LoadedConfig, layout: Layout, kind: str) -> Audit:
    """The `kind` manifest of `cfg` verifies: files there, digests and counts right, ours."""
    path = (layout.shards(cfg) if kind == "shards" else layout.tokens(cfg)) / MANIFEST
    problems = verify_path(path)
    if not problems:
        doc = _manifest(path)
        if doc.get("kind") != kind:
            problems.append(f"{path}: kind {doc.get('kind')!r}, expected {kind!r}")
        if doc.get("config_sha256") != cfg.sha256:
            problems.append(
                f"{path}: built from config {doc.get('config_sha256')}, not {cfg.sha256}"
            )
    return audit_of(problems, manifest=str(path.relative_to(layout.root)))


def _shard_batches(
    cfg: LoadedConfig, layout: Layout, column: str = "text"
) -> Iterator[tuple[str, int, list[Any]]]:
    """(shard name, first row, values) of every shard, one record batch at a time."""
    import pyarrow.parquet as pq

    folder = layout.shards(cfg)
    for entry in _manifest(folder / MANIFEST)["shards"]:
        row = 0
        for batch in pq.ParquetFile(folder / entry["name"]).iter_batches(columns=[column]):
            values = batch.column(0).to_pylist()
            yield entry["name"], row, values
            row += len(values)


def _shard_values(
    cfg: LoadedConfig, layout: Layout, column: str = "text"
) -> Iterator[tuple[str, int, Any]]:
    """(shard name, row, value) of every row of every shard, streamed."""
    for shard, first, values in _shard_batches(cfg, layout, column):
        for offset, value in enumerate(values):
            yield shard, first + offset, value


def exact_duplicates(cfg: LoadedConfig, layout: Layout) -> Audit:
    """No two shard documents have the same exact-dedup key (when exact dedup is on)."""
    from corpus_assets.core.text.normalize import exact_key

    if not cfg.model.dedup.exact:
        return audit_of([], documents=0, duplicates=0, note="exact dedup is off in this config")
    parts = [
        np.frombuffer(b"".join(exact_key(t) for t in texts), dtype="<u8").reshape(-1, 2)
        for _, _, texts in _shard_batches(cfg, layout)
    ]
    keys = np.concatenate(parts) if parts else np.zeros((0, 2), dtype="<u8")
    dupes = len(keys) - len(np.unique(keys, axis=0))
    problems = [f"{dupes} documents repeat the text of another"] if dupes else []
    return audit_of(problems, documents=len(keys), duplicates=dupes)


def pii_residue(cfg: LoadedConfig, layout: Layout) -> Audit:
    """No text the scrubber would still replace is left in the shards."""
    from corpus_assets.core.text.pii import Scrubber

    scrubber = Scrubber(cfg.model.pii)
    found: Counter[str] = Counter()
    problems: list[str] = []
    documents = 0
    for shard, row, text in _shard_values(cfg, layout):
        documents += 1
        kinds = [kind for kind, _value in scrubber.find(text)]
        found.update(kinds)
        if kinds:
            problems.append(f"{shard} row {row}: {', '.join(sorted(set(kinds)))}")
    return audit_of(
        problems,
        documents=documents,
        kinds_checked=",".join(scrubber.kinds) or "none",
        **{f"residue_{k}": n for k, n in sorted(found.items())},
    )


def decontaminated(cfg: LoadedConfig, layout: Layout) -> Audit:
    """No shard document shares a word n-gram with an eval set of `[decontaminate]`."""
    from corpus_assets.core.stages.screen_index import eval_index, load_eval_index
    from corpus_assets.core.store.progress import Progress, silent
    from corpus_assets.core.text.ngrams import ngram_hashes

    spec = cfg.model.decontaminate
    if spec is None:
        return audit_of([], documents=0, note="no [decontaminate] section in this config")
    infos = [eval_index(cfg, layout, s, spec.ngram, Progress("check", silent)) for s in spec.sets]
    indexes = [load_eval_index(info) for info in infos]
    problems: list[str] = []
    documents = 0
    for shard, first, texts in _shard_batches(cfg, layout):
        documents += len(texts)
        grams = ngram_hashes(texts, spec.ngram)
        for info, index in zip(infos, indexes, strict=True):
            item = index.lookup(grams.hashes)
            hits = np.flatnonzero(item >= 0)
            _docs, at = np.unique(grams.doc[hits], return_index=True)  # one line per document
            for k in hits[at].tolist():
                problems.append(
                    f"{shard} row {first + int(grams.doc[k])}: an n-gram of eval set "
                    f"{info.name!r} item {index.ids[int(item[k])]!r}"
                )
    return audit_of(
        problems,
        documents=documents,
        eval_sets=",".join(i.name for i in infos),
        ngrams_indexed=sum(len(i.hashes) for i in indexes),
    )


def licenses_allowed(cfg: LoadedConfig, layout: Layout) -> Audit:
    """Every source in the manifest and every document's license is on the allow-list."""
    allow = set(cfg.model.licenses.allow)
    doc = _manifest(layout.shards(cfg) / MANIFEST)
    problems = [
        f"source {s.get('name')!r}: license {s.get('license')!r} is not allowed"
        for s in doc.get("sources", [])
        if s.get("license") not in allow
    ]
    seen: Counter[str] = Counter(str(v) for _, _, v in _shard_values(cfg, layout, "license"))
    problems += [
        f"{n} documents have license {lic!r}, not allowed"
        for lic, n in seen.items()
        if lic not in allow
    ]
    return audit_of(problems, licenses=",".join(sorted(seen)), documents=sum(seen.values()))


def tokens_match_shards(cfg: LoadedConfig, layout: Layout) -> Audit:
    """The token build was made from the current shards: digest, shard names and row counts."""
    tokens_path, shards_path = layout.tokens(cfg) / MANIFEST, layout.shards(cfg) / MANIFEST
    tokens, raw = _manifest(tokens_path), shards_path.read_bytes()
    shards = parse_object(raw, str(shards_path), "shards manifest")
    problems = []
    if tokens.get("shards_manifest_sha256") != hashlib.sha256(raw).hexdigest():
        problems.append(f"{tokens_path}: made from another version of {shards_path}")
    rows = {s["name"]: s["rows"] for s in shards.get("shards", [])}
    docs = {
        f["shard"]: f["documents"] for f in tokens.get("files", []) if f["name"].endswith(".bin")
    }
    if rows != docs:
        problems.append(f"documents per shard: shards {rows}, token files {docs}")
    token_docs = tokens.get("totals", {}).get("documents")
    if token_docs != shards.get("documents_out"):
        problems.append(f"{token_docs} token documents, {shards.get('documents_out')} shard rows")
    return audit_of(problems, shard_documents=sum(rows.values()), token_documents=token_docs or 0)


def roundtrip_sample(cfg: LoadedConfig, layout: Layout, samples: int = SAMPLE_DOCUMENTS) -> Audit:
    """A spread sample of token documents decodes back to (or re-encodes from) its shard text."""
    from corpus_assets.dataset import TokenDataset

    ds = TokenDataset(layout.tokens(cfg))
    decode = _decoder(cfg)
    picks = sorted({int(i) for i in np.linspace(0, len(ds) - 1, num=min(samples, len(ds)))})
    problems = []
    for i in picks:
        ids = [int(t) for t in ds[i][:-1]]
        where = ds.provenance(i)
        text = _shard_text(layout.shards(cfg) / where.shard, where.row)
        if not decode(ids, text):
            problems.append(
                f"document {i} ({where.shard} row {where.row}, id {where.id}) does not round-trip"
            )
    return audit_of(problems, sampled=len(picks), documents=len(ds))


def _decoder(cfg: LoadedConfig) -> Any:
    """`same(ids, text)`: the ids decode to the text, or (lossy tokenizers) text encodes to ids."""
    from corpus_assets.core.text.tokenizer import BYTES_ID, load_hf, resolve_tokenizer

    info = resolve_tokenizer(cfg)
    if info.id == BYTES_ID:
        return lambda ids, text: bytes(ids).decode("utf-8", errors="replace") == text
    tok = load_hf(Path(str(info.file)), info.id)
    return lambda ids, text: (
        tok.decode(ids, skip_special_tokens=False) == text or (list(tok.encode(text).ids) == ids)
    )


def _shard_text(path: Path, row: int) -> str:
    """One row's text, reading only the row group that holds it."""
    import pyarrow.parquet as pq

    shard = pq.ParquetFile(path)
    for group in range(shard.metadata.num_row_groups):
        rows = shard.metadata.row_group(group).num_rows
        if row < rows:
            return str(shard.read_row_group(group, columns=["text"]).column(0)[row].as_py())
        row -= rows
    raise IndexError(f"{path} has no row {row}")
