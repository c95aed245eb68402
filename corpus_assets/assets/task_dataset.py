"""The `task_dataset` asset: a task-job config's verified snapshot (`corpus tasks`).

A run that fails, is cancelled or is killed keeps its job folder; the next materialization of
the partition resumes it, and a completed one returns its verified snapshot without work.
"""

from typing import Any

import dagster as dg

from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.partitions import task_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.retries import TASK_RETRY
from corpus_assets.resources.stage_runner import StageRunner
from corpus_assets.resources.task_configs import TaskConfigStore

TASK_COLUMNS = (
    ("task_id", "string", "the task's id, the same on its row of every snapshot file"),
    ("input", "json", "public.jsonl: what the model is shown (the recipe's public task)"),
    ("metadata", "json", "public.jsonl: the task's public metadata (family, difficulty, ...)"),
    ("reference", "json", "references.jsonl (owner-only): the private reference answer"),
    ("train", "json", "train.jsonl: the recipe's training row (task_hf exports these rows)"),
)
"""One row per selected task across the snapshot's row-aligned files (tasks/snapshot.py)."""


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=task_configs,
    group_name="tasks",
    retry_policy=TASK_RETRY,
    kinds={"python", "json"},
    tags={"corpus/stage": "tasks"},
    metadata={
        "dagster/column_schema": dg.TableSchema(
            [dg.TableColumn(name, kind, about) for name, kind, about in TASK_COLUMNS]
        )
    },
)
def task_dataset(
    context: dg.AssetExecutionContext,
    paths: CorpusPaths,
    task_configs: TaskConfigStore,
    stage_runner: StageRunner,
) -> dg.MaterializeResult[Any]:
    """The job's owner-only snapshot: public, reference and training rows, probes, report."""
    key = context.partition_key
    with one_sentence(context):
        return stage_runner.run_tasks(
            context, task_configs.file_for(key), task_configs.folder_for(key), paths.root_path()
        )
