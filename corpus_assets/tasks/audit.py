"""Audits of a published task snapshot, for the asset checks (pure: no Dagster).

Each returns a `core.stages.audit.Audit`: passed, the problems found (a bounded list), counts.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import DataError
from corpus_assets.core.stages.audit import Audit, audit_of
from corpus_assets.tasks.files import PRIVATE_DIR, PRIVATE_FILE
from corpus_assets.tasks.snapshot import PUBLIC, REPORT, load_snapshot

COUNTED = ("rejected", "duplicates", "excluded", "retained")


def snapshot_valid(folder: Path) -> Audit:
    """The snapshot verifies: every file's sha256, size and rows, the dataset_id, row alignment."""
    try:
        snapshot = load_snapshot(folder / "dataset")
    except DataError as exc:
        return audit_of([str(exc)])
    return audit_of([], rows=int(snapshot.manifest["rows"]))


def report_adds_up(folder: Path) -> Audit:
    """Per batch and in total, generated = rejected + duplicates + excluded + retained; the
    totals are the sum of the batches; selected equals the snapshot's rows and target_count."""
    dataset = folder / "dataset"
    report = json.loads((dataset / REPORT).read_text(encoding="utf-8"))
    rows = json.loads((dataset / "manifest.json").read_text(encoding="utf-8"))["rows"]
    problems = []
    for entry in [*report["batches"], {"batch": "total", **report["totals"]}]:
        parts = sum(int(entry[k]) for k in COUNTED)
        if parts != entry["generated"]:
            problems.append(
                f"batch {entry['batch']}: generated {entry['generated']} != {parts} "
                f"({' + '.join(COUNTED)})"
            )
    for key in ("generated", *COUNTED):
        summed = sum(int(b[key]) for b in report["batches"])
        if summed != report["totals"][key]:
            problems.append(f"totals.{key} {report['totals'][key]} != sum of batches {summed}")
    selected = report["selection"]["selected"]
    if not selected == rows == report["target_count"]:
        problems.append(
            f"selected {selected}, rows {rows} and target_count {report['target_count']} differ"
        )
    return audit_of(problems, generated=int(report["totals"]["generated"]), selected=int(selected))


def owner_only(folder: Path) -> Audit:
    """Every folder of the job is 0700 and every file 0600 (references are private)."""
    problems, files = [], 0
    for path in [folder, *sorted(folder.rglob("*"))]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = PRIVATE_DIR if path.is_dir() else PRIVATE_FILE
        files += path.is_file()
        if mode != want:
            problems.append(f"{path.relative_to(folder)}: mode {mode:o}, want {want:o}")
    return audit_of(problems, files=files)


def public_has_no_reference(folder: Path) -> Audit:
    """No public file (the snapshot's public.jsonl, work/batch-N-public.jsonl) holds a
    `reference` field at any depth."""
    problems, rows = [], 0
    for path in [
        folder / "dataset" / PUBLIC,
        *sorted((folder / "work").glob("batch-*-public.jsonl")),
    ]:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                rows += 1
                if any(key == "reference" for key in _keys(json.loads(line))):
                    problems.append(
                        f"{path.relative_to(folder)} row {number} has a reference field"
                    )
    return audit_of(problems, rows=rows)


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from _keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _keys(inner)


AUDITS = {
    "task_snapshot_valid": snapshot_valid,
    "task_report_adds_up": report_adds_up,
    "task_files_owner_only": owner_only,
    "task_public_has_no_reference": public_has_no_reference,
}
BLOCKING = frozenset({"task_snapshot_valid"})
