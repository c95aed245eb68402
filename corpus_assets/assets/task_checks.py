"""Asset checks on task snapshots: thin wrappers over `tasks.audit`, one result per partition.

The snapshot-validity check is blocking; the others report. All run as one step.
"""

import warnings
from collections.abc import Iterator
from functools import partial

import dagster as dg

from corpus_assets.assets.checks import check_results
from corpus_assets.assets.task_dataset import task_dataset
from corpus_assets.resources.partitions import task_configs
from corpus_assets.resources.task_configs import TaskConfigStore
from corpus_assets.tasks import audit

# The checks are partitioned, so the UI cannot execute one alone: this says where to go instead.
RERUN = "Run again without rebuilding: Jobs → task_recheck → Launchpad, pick the partition."


def _specs() -> list[dg.AssetCheckSpec]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(
                name,
                asset=task_dataset,
                blocking=name in audit.BLOCKING,
                partitions_def=task_configs,
                description=f"{(auditor.__doc__ or '').strip()} {RERUN}",
            )
            for name, auditor in audit.AUDITS.items()
        ]


@dg.multi_asset_check(specs=_specs(), name="task_dataset_checks")
def task_dataset_checks(
    context: dg.AssetCheckExecutionContext, task_configs: TaskConfigStore
) -> Iterator[dg.AssetCheckResult]:
    """Audits of the partition's snapshot: verifies (blocking), counts, modes, no references."""
    folder = task_configs.folder_for(context.partition_key)
    yield from check_results(
        task_dataset.key, {name: partial(a, folder) for name, a in audit.AUDITS.items()}
    )


TASK_CHECK_NAMES = tuple(audit.AUDITS)
