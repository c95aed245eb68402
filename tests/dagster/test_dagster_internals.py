"""Dagster's private modules are used in one place, for the Dagster version it was written for."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg

from corpus_assets.instance import dagster_internals

PACKAGE = Path(__file__).resolve().parents[2] / "corpus_assets"
PRIVATE = re.compile(r"^\s*(from|import) dagster\._", re.MULTILINE)


def test_only_dagster_internals_imports_private_modules() -> None:
    importing = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if PRIVATE.search(path.read_text(encoding="utf-8"))
    )
    assert importing == ["instance/dagster_internals.py"]


def test_the_internals_are_there_in_the_pinned_dagster() -> None:
    """An upgrade past 1.13 fails here first: check each name still means what it did."""
    assert dg.__version__.startswith("1.13."), dg.__version__
    for name in dagster_internals.__all__:
        assert getattr(dagster_internals, name) is not None, name
    assert dagster_internals.AssetCheckExecutionRecordStatus.PLANNED.value == "PLANNED"
    assert dagster_internals.RunFailureReason.UNEXPECTED_TERMINATION
    columns = dagster_internals.SqlEventLogStorageTable.c
    assert {"asset_key", "partition", "dagster_event_type", "event", "run_id"} <= set(
        columns.keys()
    )
