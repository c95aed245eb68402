"""Re-run the checks of an existing build without rebuilding it (`corpus check`, the jobs
`corpus_recheck` and `task_recheck`).

Dagster 1.13 cannot execute partitioned asset checks without materializing their asset ("There
is no PartitionsDefinition shared by all the provided assets"). So the audits run here, in a
job partitioned like the assets so the Launchpad offers the partitions to pick from (`corpus
check` executes it in process), and each result is logged as an `AssetCheckEvaluation` of the
partition, targeting the asset's latest materialization: the UI's Checks tab shows it like any
other evaluation.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import dagster as dg

from corpus_assets.assets import checks
from corpus_assets.assets.shards import shards
from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.assets.task_dataset import task_dataset
from corpus_assets.assets.tokens import tokens
from corpus_assets.core.errors import UpstreamMissing
from corpus_assets.core.stages.audit import Audit
from corpus_assets.core.store import registry
from corpus_assets.core.store.layout import Layout
from corpus_assets.instance.dagster_internals import MaterializationTarget, materialization_target
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.task_configs import TaskConfigStore
from corpus_assets.tasks import audit as task_audit

AUDITED = ((shards.key, checks.SHARDS_AUDITS), (tokens.key, checks.TOKENS_AUDITS))
Report = Callable[[dg.AssetCheckEvaluation], None]


@dataclass(frozen=True)
class Recheck:
    """The outcome of one re-run: per check passed/failed, or why an asset was not checked."""

    partition_key: str
    outcomes: dict[str, str]
    blocking_failed: bool


def recheck(
    instance: dg.DagsterInstance, root: Path, partition_key: str, report: Report
) -> Recheck:
    """Audit the partition's shards and tokens as built now and `report` each evaluation; a
    partition that is not registered (`ConfigError`) or has no build (`UpstreamMissing`) is
    refused before anything is checked."""
    layout = Layout(root.resolve())
    cfg = registry.load(layout, partition_key)
    targets = {key: _latest(instance, key, partition_key) for key, _ in AUDITED}
    if all(target is None for target in targets.values()):
        raise UpstreamMissing("shards", f"partition {partition_key} has no build to check")
    outcomes: dict[str, str] = {}
    blocking_failed = False
    for key, audits in AUDITED:
        runs = {name: partial(audit, cfg, layout) for name, audit in audits.items()}
        done = _evaluate(key, runs, targets[key], partition_key, checks.BLOCKING, report)
        outcomes.update(done.outcomes)
        blocking_failed |= done.blocking_failed
    return Recheck(partition_key, dict(sorted(outcomes.items())), blocking_failed)


def recheck_tasks(
    instance: dg.DagsterInstance, folder: Path, partition_key: str, report: Report
) -> Recheck:
    """Audit the task partition's snapshot in its job `folder` as it is now, like the
    `task_dataset` checks; a partition never materialized is refused before anything is
    checked."""
    target = _latest(instance, task_dataset.key, partition_key)
    if target is None:
        raise UpstreamMissing("task_dataset", f"partition {partition_key} has no snapshot to check")
    runs = {name: partial(audit, folder) for name, audit in task_audit.AUDITS.items()}
    return _evaluate(task_dataset.key, runs, target, partition_key, task_audit.BLOCKING, report)


def _evaluate(
    key: dg.AssetKey,
    runs: Mapping[str, Callable[[], Audit]],
    target: MaterializationTarget | None,
    partition_key: str,
    blocking: frozenset[str],
    report: Report,
) -> Recheck:
    if target is None:  # this asset of the build was never materialized
        return Recheck(partition_key, dict.fromkeys(runs, "not materialized"), False)
    outcomes: dict[str, str] = {}
    blocking_failed = False
    for result in checks.check_results(key, runs):
        name = result.check_name or ""
        report(
            dg.AssetCheckEvaluation(
                asset_key=key,
                check_name=name,
                passed=result.passed,
                metadata=result.metadata,
                target_materialization_data=target,
                partition=partition_key,
                blocking=name in blocking,
            )
        )
        outcomes[name] = "passed" if result.passed else "failed"
        blocking_failed |= not result.passed and name in blocking
    return Recheck(partition_key, dict(sorted(outcomes.items())), blocking_failed)


def _latest(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition_key: str
) -> MaterializationTarget | None:
    """What an evaluation of `key`'s partition targets: its latest materialization, if any."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition_key]), limit=1
    ).records
    return materialization_target(records[0]) if records else None


def _fail_on(context: dg.OpExecutionContext, done: Recheck) -> None:
    """The run fails when a check failed; each outcome is in the log once already, as the check
    evaluation event `report` recorded."""
    failed = [name for name, outcome in done.outcomes.items() if outcome == "failed"]
    if failed:
        raise dg.Failure(
            f"checks failed on {done.partition_key}: {', '.join(failed)}", allow_retries=False
        )


@dg.op
def recheck_partition(context: dg.OpExecutionContext, paths: CorpusPaths) -> None:
    """Run the shards and tokens checks of the run's partition as built now (no rebuild); a
    partition with no build is refused in one line."""
    with one_sentence(context):
        report: Report = context.log_event  # type: ignore[assignment]  # it records evaluations
        _fail_on(
            context, recheck(context.instance, paths.root_path(), context.partition_key, report)
        )


@dg.op
def recheck_task_partition(context: dg.OpExecutionContext, task_configs: TaskConfigStore) -> None:
    """Run the task_dataset checks of the run's partition on its snapshot as it is now (no
    rebuild); a partition never materialized is refused in one line."""
    key = context.partition_key
    with one_sentence(context):
        report: Report = context.log_event  # type: ignore[assignment]  # it records evaluations
        folder = task_configs.folder_for(key)
        _fail_on(context, recheck_tasks(context.instance, folder, key, report))
