"""The `shards` asset: filtered, deduplicated, PII-scrubbed Parquet shards of one config."""

from typing import Any

import dagster as dg

from corpus_assets.assets.quality_model import quality_model
from corpus_assets.assets.raw import raw
from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import corpus_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.retries import STAGE_RETRY
from corpus_assets.resources.stage_runner import StageRunner

NO_PARTITIONS = dg.SpecificPartitionsPartitionMapping([])


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=corpus_configs,
    group_name="corpus",
    # The edge is lineage only: which model a corpus partition filters with is named in its
    # config, so no quality_model partition is mapped to it (the default, identity between the
    # two dynamic partition sets, would make an asset backfill of corpus partitions fail).
    deps=[raw, dg.AssetDep(quality_model, partition_mapping=NO_PARTITIONS)],
    retry_policy=STAGE_RETRY,
    kinds={"python", "parquet"},
    tags={"corpus/stage": "shard"},
)
def shards(
    context: dg.AssetExecutionContext,
    paths: CorpusPaths,
    configs: ConfigStore,
    stage_runner: StageRunner,
) -> dg.MaterializeResult[Any]:
    """Filtered, deduplicated, PII-scrubbed Parquet shards of the config (stage `shard`).
    Its checks run with every materialization. To run them again on the partition as built,
    without rebuilding: Jobs → `corpus_recheck` → Launchpad, pick the partition, Launch Run (or
    `corpus check KEY`)."""
    with one_sentence(context):
        config_file = configs.file_for_run(context)
        return stage_runner.run_stage(context, "shard", config_file, paths.root_path())
