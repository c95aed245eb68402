"""`corpus verify` for a token build: digests, sizes, dtype, EOS placement, shard rows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from corpus_assets.core.store.digests import verify_files
from corpus_assets.core.text.tokenizer import DTYPES, IDX_DTYPE


def verify_tokens(path: Path, doc: dict[str, Any]) -> list[str]:
    """Problems of a token build: digests, sizes, dtype, EOS placement, shard rows."""
    folder = path.parent
    files = doc.get("files", [])
    problems = verify_files(folder, files)
    dtype_name = doc.get("dtype")
    vocab, eos = doc.get("vocab_size"), doc.get("eos_id")
    if dtype_name not in DTYPES or not isinstance(vocab, int) or not isinstance(eos, int):
        return [*problems, f"{path}: bad dtype/vocab_size/eos_id: {dtype_name!r}, {vocab}, {eos}"]
    expected = "uint16" if vocab <= 65_536 else "uint32"
    if dtype_name != expected:
        problems.append(f"{path}: dtype {dtype_name} but vocab_size {vocab} needs {expected}")
    if not 0 <= eos < vocab:
        problems.append(f"{path}: eos_id {eos} is outside the vocabulary (size {vocab})")
    pairs = _pairs(path, files, problems)
    if not problems:
        for bin_entry, idx_entry in pairs:
            problems += _check_pair(folder, bin_entry, idx_entry, DTYPES[dtype_name], vocab, eos)
    bins = [b for b, _ in pairs]
    totals = {
        "documents": sum(b["documents"] for b in bins),
        "tokens": sum(b["tokens"] for b in bins),
    }
    if doc.get("totals") != totals:
        problems.append(f"{path}: totals {doc.get('totals')} but the files add up to {totals}")
    return problems + _check_shards(path, doc, bins)


def _pairs(
    path: Path, files: list[dict[str, Any]], problems: list[str]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_name = {f["name"]: f for f in files}
    pairs = []
    for entry in files:
        if not entry["name"].endswith(".bin"):
            continue
        idx = by_name.get(entry["name"][: -len(".bin")] + ".idx")
        if idx is None:
            problems.append(f"{path}: {entry['name']} has no .idx entry")
            continue
        if (idx["tokens"], idx["documents"]) != (entry["tokens"], entry["documents"]):
            problems.append(f"{path}: {entry['name']} and its .idx disagree on tokens/documents")
        pairs.append((entry, idx))
    if 2 * len(pairs) != len(files):
        problems.append(f"{path}: files must be .bin/.idx pairs ({len(files)} entries)")
    return pairs


def _check_pair(
    folder: Path,
    bin_entry: dict[str, Any],
    idx_entry: dict[str, Any],
    dtype: np.dtype[Any],
    vocab: int,
    eos: int,
) -> list[str]:
    """Sizes match counts; offsets rise to the token count; EOS ends each document; ids < vocab."""
    name = bin_entry["name"]
    if bin_entry["bytes"] != bin_entry["tokens"] * dtype.itemsize:
        return [f"{folder / name}: {bin_entry['bytes']} bytes is not {bin_entry['tokens']} tokens"]
    if idx_entry["bytes"] != idx_entry["documents"] * IDX_DTYPE.itemsize:
        return [f"{folder / idx_entry['name']}: size is not {idx_entry['documents']} offsets"]
    if bin_entry["tokens"] == 0:
        return [] if bin_entry["documents"] == 0 else [f"{folder / name}: documents but no tokens"]
    ends = np.fromfile(folder / idx_entry["name"], dtype=IDX_DTYPE)
    tokens = np.memmap(folder / name, dtype=dtype, mode="r")
    problems = []
    if ends.size and (np.any(np.diff(ends) < 1) or ends[0] < 1 or ends[-1] != tokens.size):
        problems.append(f"{folder / idx_entry['name']}: offsets do not rise to {tokens.size}")
    elif ends.size and np.any(tokens[ends.astype(np.int64) - 1] != eos):
        problems.append(f"{folder / name}: a document does not end with EOS {eos}")
    top = max(int(tokens[i : i + (1 << 24)].max()) for i in range(0, tokens.size, 1 << 24))
    if top >= vocab:
        problems.append(f"{folder / name}: token id {top} is outside the vocabulary ({vocab})")
    return problems


def _check_shards(path: Path, doc: dict[str, Any], bins: list[dict[str, Any]]) -> list[str]:
    """The shards manifest still has the recorded digest and one row per token document."""
    rel = doc.get("shards_manifest")
    if not isinstance(rel, str):
        return [f"{path}: no shards_manifest path"]
    shards_path = path.parent / rel
    try:
        raw = shards_path.read_bytes()
    except OSError:
        return [f"{path}: its shards manifest {shards_path} is missing"]
    if hashlib.sha256(raw).hexdigest() != doc.get("shards_manifest_sha256"):
        return [f"{path}: shards manifest {shards_path} changed since the tokens were built"]
    rows = {s["name"]: s["rows"] for s in json.loads(raw).get("shards", [])}
    docs = {b["shard"]: b["documents"] for b in bins}
    if rows.keys() != docs.keys():
        return [f"{path}: token files cover shards {sorted(docs)}, manifest has {sorted(rows)}"]
    return [
        f"{path}: {name} has {rows[name]} rows but {docs[name]} token documents"
        for name in rows
        if rows[name] != docs[name]
    ]
