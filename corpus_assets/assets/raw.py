"""The `raw` asset: the config's sources fetched into the shared raw cache."""

from typing import Any

import dagster as dg

from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import corpus_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.retries import FETCH_RETRY
from corpus_assets.resources.stage_runner import StageRunner


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=corpus_configs,
    group_name="corpus",
    retry_policy=FETCH_RETRY,
    kinds={"python", "parquet"},
    tags={"corpus/stage": "fetch"},
)
def raw(
    context: dg.AssetExecutionContext,
    paths: CorpusPaths,
    configs: ConfigStore,
    stage_runner: StageRunner,
) -> dg.MaterializeResult[Any]:
    """Every source of the config, fetched once into the shared raw cache (stage `fetch`)."""
    with one_sentence(context):
        config_file = configs.file_for_run(context)
        return stage_runner.run_stage(context, "fetch", config_file, paths.root_path())
