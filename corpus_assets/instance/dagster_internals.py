"""The parts of Dagster's private modules this project needs, each where no public API does it.

Gathered here so that a Dagster upgrade that moves one breaks in one place
(`tests/dagster/test_dagster_internals.py` pins what is used).

- `MaterializationTarget`: an `AssetCheckEvaluation` logged by a re-check job targets the
  asset's latest materialization with it (`dg.AssetCheckEvaluation` takes it, `dagster` does
  not export it).
- The SQL event log's tables, its storage class and the check-row status: `failures.py` deletes
  a cleaned partition's events and a finished run's unrun check rows from the asset index
  (`wipe_asset_partitions` raises NotImplementedError on the open-source SQL storages).
- `JobFailureData`, `RunFailureReason`: `dead_runs.py` reports a dead run's failure as an
  unexpected termination, as Dagster's own run monitoring does.
- `SqliteRunStorage`, `InMemoryRunStorage`: runs stored on this machine (`dead_runs.py`).
"""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData as MaterializationTarget,
)
from dagster._core.events import JobFailureData, RunFailureReason
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.event_log.schema import (
    AssetCheckExecutionsTable,
    AssetEventTagsTable,
    AssetKeyTable,
    SqlEventLogStorageTable,
)
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._core.storage.runs import InMemoryRunStorage, SqliteRunStorage

__all__ = [
    "AssetCheckExecutionRecordStatus",
    "AssetCheckExecutionsTable",
    "AssetEventTagsTable",
    "AssetKeyTable",
    "InMemoryRunStorage",
    "JobFailureData",
    "MaterializationTarget",
    "RunFailureReason",
    "SqlEventLogStorage",
    "SqlEventLogStorageTable",
    "SqliteRunStorage",
    "materialization_target",
]


def materialization_target(record: dg.EventLogRecord) -> MaterializationTarget:
    """What an evaluation of the materialization `record` targets."""
    return MaterializationTarget(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
    )
