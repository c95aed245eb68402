"""The `report` asset: the build's REPORT.md and plots, after the stages, never inside one."""

from typing import Any

import dagster as dg

from corpus_assets.assets.report_page import report_metadata
from corpus_assets.assets.shards import shards
from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.assets.tokens import tokens
from corpus_assets.core.errors import UpstreamMissing
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import corpus_configs
from corpus_assets.resources.paths import CorpusPaths


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=corpus_configs,
    group_name="corpus",
    deps=[shards, tokens],
    kinds={"python", "markdown"},
)
def report(
    context: dg.AssetExecutionContext, paths: CorpusPaths, configs: ConfigStore
) -> dg.MaterializeResult[Any]:
    """The build report: REPORT.md, its PNG plots (document lengths before and after filtering,
    drops by reason, duplicates, PII by kind, tokens per document) and report.json, beside the
    shards. Drawn in its own step after `tokens`, so no stage waits for it; shown here and on
    the `shards` page (an observation of the partition). A report that cannot be made fails
    nothing: its metadata says why."""
    with one_sentence(context):
        cfg, layout = configs.load(context.partition_key), paths.layout()
        manifest = layout.shards(cfg) / MANIFEST
        if not manifest.is_file():
            raise UpstreamMissing("shards", f"no shards manifest at {manifest}")
    metadata = report_metadata(context, cfg, layout)
    context.log_event(
        dg.AssetObservation(
            asset_key=shards.key, partition=context.partition_key, metadata=metadata
        )
    )
    return dg.MaterializeResult(metadata=metadata)
