"""`corpus verify` of a token export folder (kind `token_export`): every file's size and sha256
against the export manifest, and each index against its entry: a Megatron `.idx` rebuilt from
its sequence lengths must be its own bytes; a `.ds.index` must rise to the file's tokens."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from corpus_assets.core.stages.token_formats import megatron_index
from corpus_assets.core.store.digests import verify_files


def verify_export(path: Path, doc: dict[str, Any]) -> list[str]:
    """Problems of a token export on disk: each file's size and sha256 against the manifest,
    and each index against its entry (`corpus verify` of an export folder)."""
    folder, files = path.parent, doc.get("files", [])
    problems = verify_files(folder, files)
    if problems:
        return problems
    size = int(doc["token_size"])
    for entry in files:
        name = str(entry["name"])
        if name.endswith((".bin", ".ds")) and entry["bytes"] != entry["tokens"] * size:
            problems.append(
                f"{folder / name}: {entry['bytes']} bytes is not {entry['tokens']} tokens"
            )
        elif name.endswith((".idx", ".ds.index")) and not _index_fits(folder / name, entry, size):
            problems.append(
                f"{folder / name}: not an index of {entry['documents']} documents and "
                f"{entry['tokens']} tokens"
            )
    data = [e for e in files if e["name"].endswith((".bin", ".ds"))]
    totals = {k: sum(e[k] for e in data) for k in ("documents", "tokens")}
    if doc.get("totals") != totals:
        problems.append(f"{path}: totals {doc.get('totals')} but the files add up to {totals}")
    return problems


def _index_fits(path: Path, entry: dict[str, Any], size: int) -> bool:
    """Whether an index is the one `entry`'s documents make: Megatron's, rebuilt from its
    lengths and compared byte for byte, or datatrove's rising document ends."""
    raw = path.read_bytes()
    try:
        if path.name.endswith(".idx"):
            (count,) = struct.unpack_from("<Q", raw, 18)
            lengths = np.frombuffer(raw, "<i4", count, 34)
            ends = np.cumsum(lengths, dtype=np.uint64)
            if raw != b"".join(megatron_index(ends, size)):
                return False
        else:
            ends = np.frombuffer(raw, "<u8")
    except (struct.error, ValueError):
        return False
    rising = bool(np.all(np.diff(ends.astype(np.int64)) >= 0)) if ends.size else True
    last = int(ends[-1]) if ends.size else 0
    return rising and (int(ends.size), last) == (entry["documents"], entry["tokens"])
