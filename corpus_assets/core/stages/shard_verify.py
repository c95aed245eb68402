"""`corpus verify` for a shards build: files, digests, row counts and the counts' sums."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from corpus_assets.core.errors import DataError
from corpus_assets.core.store.digests import verify_files
from corpus_assets.core.store.records import load_object, require, require_files

COUNTS: dict[str, type] = {
    "documents_in": int,
    "documents_out": int,
    "text_bytes_out": int,
    "dropped": dict,
    "duplicates": dict,
    "pii": dict,
}


def verify_shards(manifest_path: Path, doc: dict[str, Any] | None = None) -> list[str]:
    """Problems with a shards build: files missing or changed, counts that don't add up."""
    where = str(manifest_path)
    try:
        m = doc if doc is not None else load_object(manifest_path, "shards manifest")
        require(m, COUNTS, where, "shards manifest")
        shards = require_files(m, "shards", where, "shards manifest", extra={"rows": int})
    except OSError as exc:
        return [f"{manifest_path}: unreadable manifest: {exc}"]
    except DataError as exc:
        return [str(exc)]
    folder = manifest_path.parent
    problems = verify_files(folder, shards)
    audit = m.get("audit")  # the screening records (`[decontaminate]`, `[exclude]`)
    if isinstance(audit, dict):
        problems += verify_files(folder, [audit])
    rows = sum(s["rows"] for s in shards)
    if rows != m.get("documents_out"):
        problems.append(
            f"{manifest_path}: shards hold {rows} rows, documents_out says {m.get('documents_out')}"
        )
    dropped = _total(m.get("dropped")) + _total(m.get("duplicates"))
    if m.get("documents_in") != rows + dropped:
        problems.append(
            f"{manifest_path}: documents_in {m.get('documents_in')} != out {rows} + "
            f"dropped {dropped}"
        )
    if not problems:
        for s in shards:
            actual = pq.ParquetFile(folder / s["name"]).metadata.num_rows
            if actual != s["rows"]:
                problems.append(f"{folder / s['name']}: {actual} rows, manifest says {s['rows']}")
    return problems


def _total(counts: Any) -> int:
    """The sum of a manifest's counts by reason (0 when it is not a table of integers)."""
    if not isinstance(counts, dict):
        return 0
    return sum(n for n in counts.values() if isinstance(n, int))
