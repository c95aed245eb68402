"""Re-run the checks of an existing build without rebuilding it (`corpus check`, `corpus_recheck`).

Dagster 1.13 cannot execute partitioned asset checks without materializing their asset ("There
is no PartitionsDefinition shared by all the provided assets"). So the audits run here, in
the `corpus_recheck` job, partitioned like the assets so the Launchpad offers the partitions to
pick from (`corpus check` executes it in process), and each result is logged
as an `AssetCheckEvaluation` of the partition, targeting the asset's latest materialization:
the UI's Checks tab shows it like any other evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from corpus_assets.assets import checks
from corpus_assets.assets.shards import shards
from corpus_assets.assets.tokens import tokens
from corpus_assets.core.errors import UpstreamMissing
from corpus_assets.core.store import registry
from corpus_assets.core.store.layout import Layout

AUDITED = ((shards.key, checks.SHARDS_AUDITS), (tokens.key, checks.TOKENS_AUDITS))


@dataclass(frozen=True)
class Recheck:
    """The outcome of one re-run: per check passed/failed, or why an asset was not checked."""

    partition_key: str
    outcomes: dict[str, str]
    blocking_failed: bool


def recheck(
    instance: dg.DagsterInstance,
    root: Path,
    partition_key: str,
    report: Callable[[dg.AssetCheckEvaluation], None],
) -> Recheck:
    """Audit the partition's shards and tokens as built now and `report` each evaluation; a
    partition that is not registered (`ConfigError`) or has no build (`UpstreamMissing`) is
    refused before anything is checked."""
    layout = Layout(root.resolve())
    cfg = registry.load(layout, partition_key)
    targets = {key: _latest_materialization(instance, key, partition_key) for key, _ in AUDITED}
    if all(target is None for target in targets.values()):
        raise UpstreamMissing("shards", f"partition {partition_key} has no build to check")
    outcomes: dict[str, str] = {}
    blocking_failed = False
    for key, audits in AUDITED:
        target = targets[key]
        if target is None:
            outcomes.update(dict.fromkeys(audits, "not materialized"))
            continue
        runs = {name: partial(audit, cfg, layout) for name, audit in audits.items()}
        for result in checks.check_results(key, runs):
            report(
                dg.AssetCheckEvaluation(
                    asset_key=key,
                    check_name=result.check_name or "",
                    passed=result.passed,
                    metadata=result.metadata,
                    target_materialization_data=target,
                    partition=partition_key,
                    blocking=result.check_name in checks.BLOCKING,
                )
            )
            outcomes[str(result.check_name)] = "passed" if result.passed else "failed"
            blocking_failed |= not result.passed and result.check_name in checks.BLOCKING
    return Recheck(partition_key, dict(sorted(outcomes.items())), blocking_failed)


def _latest_materialization(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition_key: str
) -> AssetCheckEvaluationTargetMaterializationData | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition_key]), limit=1
    ).records
    if not records:
        return None
    record = records[0]
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
    )
