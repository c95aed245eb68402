"""What a stage subprocess tells Dagster through Pipes, and only when Dagster launched it.

Imports `dagster_pipes` (tiny, no dependencies) lazily and never `dagster`, so `corpus run` stays
fast; run standalone it prints exactly what it printed before.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PIPES_CONTEXT_ENV = "DAGSTER_PIPES_CONTEXT"
Metadata = dict[str, dict[str, Any]]


class Reporter:
    """A thin wrapper over an open Pipes context: log lines, one materialization."""

    def __init__(self, pipes: Any) -> None:
        self._pipes = pipes

    def tee(self, emit: Callable[[str], None]) -> Callable[[str], None]:
        """An emitter that writes a progress line where it went before and to the run log."""

        def both(line: str) -> None:
            emit(line)
            self._pipes.log.info(line)

        return both

    def materialized(self, summary: dict[str, Any], root: Path) -> None:
        manifest = summary.get("manifest")
        version = _file_sha256(root / manifest) if isinstance(manifest, str) else None
        self.report(summary_metadata(summary, root), version)

    def report(self, metadata: Metadata, data_version: str | None) -> None:
        """One asset materialization with this metadata and data version."""
        self._pipes.report_asset_materialization(metadata=metadata, data_version=data_version)


@contextmanager
def pipes_if_launched() -> Iterator[Reporter | None]:
    """A Reporter when the Pipes bootstrap variable is set, else None (standalone run)."""
    if PIPES_CONTEXT_ENV not in os.environ:
        yield None
        return
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        yield Reporter(pipes)


def summary_metadata(summary: dict[str, Any], root: Path) -> Metadata:
    """Asset metadata from a stage's JSON summary: counts, tables of drops and sources, paths."""
    md: Metadata = {}
    for key, value in summary.items():
        if key == "manifest" and isinstance(value, str):
            md["manifest"] = _v(str((root / value).resolve()), "path")
        elif key == "dropped" and isinstance(value, dict):
            md["dropped"] = _table(
                [{"reason": k, "documents": n} for k, n in sorted(value.items())],
                [("reason", "string"), ("documents", "int")],
            )
            md["dropped_total"] = _v(sum(value.values()), "int")
        elif key in ("duplicates", "pii") and isinstance(value, dict):
            for sub, n in sorted(value.items()):
                md[f"{key}_{sub}"] = _v(n, "int")
        elif key == "sources" and isinstance(value, list):
            md["sources"] = _sources_table(value)
        else:
            md[key] = _scalar(value)
    _derived(summary, md)
    return md


def task_metadata(snapshot: Path) -> Metadata:
    """Asset metadata of a task snapshot: its id, counts per step, selection, calibration."""
    manifest = json.loads((snapshot / "manifest.json").read_text(encoding="utf-8"))
    report = json.loads((snapshot / "report.json").read_text(encoding="utf-8"))
    totals, batches = report["totals"], report["batches"]
    counts = {
        "generated": totals["generated"],
        "cleaned": totals["generated"] - totals["rejected"],
        "rejected": totals["rejected"],
        "duplicates": totals["duplicates"],
        "excluded": totals["excluded"],
        "retained": totals["retained"],
        "calibrated": sum(int(b.get("calibrated", 0)) for b in batches),
        "selected": report["selection"]["selected"],
    }
    md: Metadata = {
        "dataset_id": _v(manifest["dataset_id"], "text"),
        "dataset_path": _v(str(snapshot.resolve()), "path"),
        "dagster/row_count": _v(manifest["rows"], "int"),
        "partition_key": _v(manifest["job"]["partition_key"], "text"),
        "config_sha256": _v(manifest["job"]["config_sha256"], "text"),
        "calibrated_selection": _v(bool(report["calibrated"]), "bool"),
        "counts": _table(
            [{"step": k, "tasks": n} for k, n in counts.items()],
            [("step", "string"), ("tasks", "int")],
        ),
        "selection_statistics": _v(report["selection"]["statistics"], "json"),
    }
    md |= {k: _v(n, "int") for k, n in counts.items()}
    if manifest.get("calibration") is not None:
        md["calibration"] = _v(manifest["calibration"], "json")
    return md


def _derived(summary: dict[str, Any], md: Metadata) -> None:
    rows = summary.get("documents_out", summary.get("documents"))
    if isinstance(rows, int):
        md["dagster/row_count"] = _v(rows, "int")
    dupes = summary.get("duplicates")
    if isinstance(dupes, dict) and isinstance(summary.get("documents_in"), int):
        kept = summary.get("documents_out", 0) + sum(dupes.values())
        md["dedup_ratio"] = _v(round(sum(dupes.values()) / kept, 6) if kept else 0.0, "float")


def _sources_table(sources: list[Any]) -> dict[str, Any]:
    columns: list[tuple[str, str]] = []
    for src in sources:
        for k, v in src.items():
            if (k, _column_type(v)) not in columns and not isinstance(v, dict | list):
                columns.append((k, _column_type(v)))
    names = [c for c, _ in columns]
    return _table([{k: s.get(k) for k in names} for s in sources], columns)


def _column_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "string"


def _scalar(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return _v(value, "bool")
    if isinstance(value, int):
        return _v(value, "int")
    if isinstance(value, float):
        return _v(value, "float")
    if isinstance(value, str):
        return _v(value, "text")
    return _v(value, "json")


def _table(records: list[dict[str, Any]], columns: list[tuple[str, str]]) -> dict[str, Any]:
    schema = [{"name": name, "type": kind} for name, kind in columns]
    return _v({"records": records, "schema": schema}, "table")


def _v(raw: Any, kind: str) -> dict[str, Any]:
    return {"raw_value": raw, "type": kind}


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
