"""The parts of Dagster's private modules this project needs, each where no public API does it.

Gathered here so that a Dagster upgrade that moves one breaks in one place
(`tests/dagster/test_dagster_internals.py` pins what is used).

- `MaterializationTarget`: an `AssetCheckEvaluation` logged by a re-check job targets the
  asset's latest materialization with it (`dg.AssetCheckEvaluation` takes it, `dagster` does
  not export it).
"""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData as MaterializationTarget,
)

__all__ = ["MaterializationTarget", "materialization_target"]


def materialization_target(record: dg.EventLogRecord) -> MaterializationTarget:
    """What an evaluation of the materialization `record` targets."""
    return MaterializationTarget(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
    )
