"""The jobs: `corpus_build` (the corpus assets and their checks), `task_build` (the task
snapshot and its checks), `classifier_train` (a quality classifier and its check),
`corpus_export` and `task_export` (the Hugging Face exports), `token_export` (Megatron-LM and
nanotron token files), `mixture_build` (a mixture's sample index), `corpus_recheck` and
`task_recheck` (a built partition's checks again, the partition picked in the Launchpad) and
`corpus_cleanup`. `JOBS` is every one of them."""

import time

import dagster as dg

from corpus_assets.assets.exports import corpus_hf, task_hf
from corpus_assets.assets.mixture import mixture
from corpus_assets.assets.recheck import recheck_partition, recheck_task_partition
from corpus_assets.assets.report import report
from corpus_assets.assets.shards import shards
from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.assets.token_exports import token_exports
from corpus_assets.assets.tokens import tokens
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.cleanup import published_after
from corpus_assets.core.store.layout import Layout
from corpus_assets.instance.dead_runs import cleanup_blocker
from corpus_assets.instance.failures import forget_partition
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import corpus_configs, task_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.stage_runner import StageRunner

BUILD_JOB = "corpus_build"
CLEANUP_JOB = "corpus_cleanup"
TASK_JOB = "task_build"
CLASSIFIER_JOB = "classifier_train"
RECHECK_JOB = "corpus_recheck"
TASK_RECHECK_JOB = "task_recheck"
EXPORT_JOB = "corpus_export"
TASK_EXPORT_JOB = "task_export"
TOKEN_EXPORT_JOB = "token_export"
MIXTURE_JOB = "mixture_build"
BUILD_ASSETS = dg.AssetSelection.groups("corpus")
TASK_ASSETS = dg.AssetSelection.groups("tasks")
CLASSIFIER_ASSETS = dg.AssetSelection.groups("classifiers")
# Step failures have retry policies; a run retry (when dagster/max_retries is set) is for a crashed
# run worker only, so a stage that gave up (exit 64/65) is never re-run by it.
BUILD_TAGS = {"dagster/retry_on_asset_or_op_failure": "false"}
CLEANED_ASSETS = (shards.key, tokens.key, report.key)

corpus_build = dg.define_asset_job(
    BUILD_JOB,
    selection=BUILD_ASSETS,
    executor_def=dg.in_process_executor,
    tags=BUILD_TAGS,
    description="Fetch, shard and tokenize one registered config (a corpus_configs partition), "
    "then draw its report.",
)


task_build = dg.define_asset_job(
    TASK_JOB,
    selection=TASK_ASSETS,
    executor_def=dg.in_process_executor,
    tags=BUILD_TAGS,
    description="Run (or resume) one registered task-job config (a task_configs partition) "
    "and check its snapshot.",
)

classifier_train = dg.define_asset_job(
    CLASSIFIER_JOB,
    selection=CLASSIFIER_ASSETS,
    executor_def=dg.in_process_executor,
    tags=BUILD_TAGS,
    description="Train (or keep, when trained) one registered classifier config (a "
    "classifier_configs partition) and check its model file against its manifest.",
)

corpus_export = dg.define_asset_job(
    EXPORT_JOB,
    selection=dg.AssetSelection.assets(corpus_hf),
    executor_def=dg.in_process_executor,
    tags=BUILD_TAGS,
    description="Export one built corpus partition's shards as a Hugging Face `datasets` folder "
    "(corpus_hf): Materialize…, pick the partition.",
)

task_export = dg.define_asset_job(
    TASK_EXPORT_JOB,
    selection=dg.AssetSelection.assets(task_hf),
    executor_def=dg.in_process_executor,
    tags=BUILD_TAGS,
    description="Export one task partition's training rows as a Hugging Face `datasets` folder "
    "(task_hf): Materialize…, pick the partition.",
)

token_export = dg.define_asset_job(
    TOKEN_EXPORT_JOB,
    selection=dg.AssetSelection.assets(token_exports),
    executor_def=dg.in_process_executor,
    tags=BUILD_TAGS,
    description="Export one built corpus partition's token files for Megatron-LM and nanotron "
    "(token_exports): Materialize…, pick the partition.",
)

mixture_build = dg.define_asset_job(
    MIXTURE_JOB,
    selection=dg.AssetSelection.assets(mixture),
    executor_def=dg.in_process_executor,
    tags=BUILD_TAGS,
    description="Build (or keep, when built) one registered mixture config's sample index (a "
    "mixture_configs partition).",
)


class CleanupConfig(dg.Config):
    """Which partition to clean, and (from a sensor) the run that failed or was cancelled."""

    partition_key: str
    failed_run_id: str | None = None


@dg.op
def cleanup_partition(
    context: dg.OpExecutionContext,
    config: CleanupConfig,
    paths: CorpusPaths,
    configs: ConfigStore,
    stage_runner: StageRunner,
) -> None:
    """Delete the partition's shards, tokens, report and staging (never raw), then their
    materializations, observations and check results (the run's plan stays: a failed build
    reads Failed)."""
    if blocker := cleanup_blocker(context.instance, config.failed_run_id):
        context.log.info(f"cleanup of {config.partition_key} skipped: {blocker}")
        return
    decided = time.time()  # a build published after this instant is newer: kept
    root = paths.root_path()
    with one_sentence(context):
        config_file = configs.file_for(config.partition_key)
        stage_runner.run_cleanup(context, config_file, root, keep_newer_than=decided)
    newer = published_after(load_config(config_file), Layout(root.resolve()), decided)
    if newer is not None:
        context.log.info(f"cleanup of {config.partition_key} kept {newer}: a newer build")
        return
    for key in CLEANED_ASSETS:
        forget_partition(context.instance, key, config.partition_key)
    context.log.info(
        f"forgot the {', '.join(k.to_user_string() for k in CLEANED_ASSETS)} "
        f"materializations and check results of {config.partition_key}"
    )


@dg.job(
    name=RECHECK_JOB,
    partitions_def=corpus_configs,
    executor_def=dg.in_process_executor,
    description="Run the checks of built partitions again, without rebuilding them: Launchpad → "
    "pick the partition; a partition with no build is refused.",
)
def corpus_recheck() -> None:
    """Re-run one partition's checks."""
    recheck_partition()


@dg.job(
    name=TASK_RECHECK_JOB,
    partitions_def=task_configs,
    executor_def=dg.in_process_executor,
    description="Run the task_dataset checks of materialized task partitions again, without "
    "rebuilding them: Launchpad → pick the partition; a partition with no snapshot is refused.",
)
def task_recheck() -> None:
    """Re-run one task partition's checks."""
    recheck_task_partition()


@dg.job(name=CLEANUP_JOB, executor_def=dg.in_process_executor)
def corpus_cleanup() -> None:
    """Remove one partition's outputs, materializations and check results (sensors launch it)."""
    cleanup_partition()


JOBS = (
    corpus_build,
    task_build,
    classifier_train,
    corpus_export,
    task_export,
    token_export,
    mixture_build,
    corpus_cleanup,
    corpus_recheck,
    task_recheck,
)
