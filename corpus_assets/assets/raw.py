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

RAW_COLUMNS = (
    ("id", "string", "the document id: the source's id field, else source name and row"),
    ("text", "string", "the text as read, before filters, dedup and PII scrubbing"),
    ("source", "string", "the config's name for the source"),
    ("license", "string", "the source's license, as the config declares it"),
    ("meta", "string", "the record's other fields, as a JSON object"),
)
"""The columns of the raw cache's Parquet parts (core/stages/fetch.py RAW_SCHEMA)."""


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=corpus_configs,
    group_name="corpus",
    retry_policy=FETCH_RETRY,
    kinds={"python", "parquet"},
    tags={"corpus/stage": "fetch"},
    metadata={
        "dagster/column_schema": dg.TableSchema(
            [dg.TableColumn(name, kind, about) for name, kind, about in RAW_COLUMNS]
        )
    },
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
