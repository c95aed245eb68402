"""`corpus verify` for a shards build: files, digests, row counts and the counts' sums."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from corpus_assets.core.store.digests import verify_files


def verify_shards(manifest_path: Path, doc: dict[str, Any] | None = None) -> list[str]:
    """Problems with a shards build: files missing or changed, counts that don't add up."""
    try:
        m = doc if doc is not None else json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return [f"{manifest_path}: unreadable manifest: {exc}"]
    folder = manifest_path.parent
    problems = verify_files(folder, m.get("shards", []))
    rows = sum(s["rows"] for s in m.get("shards", []))
    if rows != m.get("documents_out"):
        problems.append(
            f"{manifest_path}: shards hold {rows} rows, documents_out says {m.get('documents_out')}"
        )
    dropped = sum(m.get("dropped", {}).values()) + sum(m.get("duplicates", {}).values())
    if m.get("documents_in") != rows + dropped:
        problems.append(
            f"{manifest_path}: documents_in {m.get('documents_in')} != out {rows} + "
            f"dropped {dropped}"
        )
    if not problems:
        for s in m.get("shards", []):
            actual = pq.ParquetFile(folder / s["name"]).metadata.num_rows
            if actual != s["rows"]:
                problems.append(f"{folder / s['name']}: {actual} rows, manifest says {s['rows']}")
    return problems
