"""The `tokens` asset: one token file per shard, ready for a training loop."""

from typing import Any

import dagster as dg

from corpus_assets.assets.shards import shards
from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import corpus_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.retries import STAGE_RETRY
from corpus_assets.resources.stage_runner import StageRunner


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=corpus_configs,
    group_name="corpus",
    deps=[shards],
    retry_policy=STAGE_RETRY,
    kinds={"python", "numpy"},
    tags={"corpus/stage": "tokenize"},
)
def tokens(
    context: dg.AssetExecutionContext,
    paths: CorpusPaths,
    configs: ConfigStore,
    stage_runner: StageRunner,
) -> dg.MaterializeResult[Any]:
    """Token files (`.bin` + `.idx`) of every shard, read by `TokenDataset` (stage `tokenize`).
    Its checks run with every materialization. To run them again on the partition as built,
    without rebuilding: Jobs → `corpus_recheck` → Launchpad, pick the partition, Launch Run (or
    `corpus check KEY`)."""
    with one_sentence(context):
        config_file = configs.file_for_run(context)
        return stage_runner.run_stage(context, "tokenize", config_file, paths.root_path())
