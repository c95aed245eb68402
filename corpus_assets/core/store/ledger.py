"""raw/LEDGER.jsonl: one line per completed fetch, rewritten atomically under a lock."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from corpus_assets.core.store.atomic import private_dir, tighten_tree, write_bytes
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import hold
from corpus_assets.core.store.records import parse_object, require, require_files

ENTRY_FIELDS: dict[str, type] = {"source_key": str, "documents": int}
FIX = "delete that line (the next fetch of its source writes it again)"


def read(layout: Layout) -> dict[str, dict[str, Any]]:
    """The latest ledger entry of every source key; a corrupt line is DataError naming it."""
    entries: dict[str, dict[str, Any]] = {}
    if not layout.ledger.exists():
        return entries
    for n, line in enumerate(layout.ledger.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{layout.ledger}:{n}"
        entry = parse_object(line, where, "ledger line", FIX)
        require(entry, ENTRY_FIELDS, where, "ledger line", FIX)
        require_files(entry, "files", where, "ledger line", FIX, extra={"rows": int})
        entries[entry["source_key"]] = entry
    return entries


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "fetched_at"} == {
        k: v for k, v in b.items() if k != "fetched_at"
    }


def record(layout: Layout, entry: dict[str, Any]) -> None:
    """Add a line for a completed fetch unless the ledger already holds the same one.

    The raw cache is owner-only: its folder, its locks and the ledger (0700, 0600).
    """
    private_dir(layout.raw)
    with hold(layout.ledger_lock, "the raw ledger"):
        tighten_tree(layout.ledger_lock.parent)  # lock files an older build left open to others
        for stale in layout.raw.glob(f".{layout.ledger.name}.tmp-*"):  # from a killed writer
            stale.unlink(missing_ok=True)
        existing = read(layout).get(entry["source_key"])
        if existing is not None and _same(existing, entry):
            return
        line = dict(entry, fetched_at=datetime.now(UTC).isoformat(timespec="seconds"))
        old = layout.ledger.read_bytes() if layout.ledger.exists() else b""
        new = json.dumps(line, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"
        write_bytes(layout.ledger, old + new)
