"""`token_exports`: a build's tokens as the training frameworks read them, in
`<root>/exports/megatron/<partition>/` and `<root>/exports/nanotron/<partition>/`.

A thin wrapper over `corpus export-tokens` (core/stages/export_tokens.py). An export that
already holds the current tokens is kept (no work); one of an older build is replaced.
"""

from typing import Any

import dagster as dg
from pydantic import Field

from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.assets.tokens import tokens
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import corpus_configs
from corpus_assets.resources.paths import CorpusPaths

ALL_FORMATS = ["megatron", "nanotron"]


class TokenExportConfig(dg.Config):
    """Which formats a materialization writes (the Launchpad's config)."""

    formats: list[str] = Field(
        default=ALL_FORMATS,
        description="megatron (Megatron-LM, NeMo, GPT-NeoX: .bin + MMIDIDX .idx) and/or nanotron "
        "(datatrove .ds files)",
    )


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=corpus_configs,
    group_name="exports",
    deps=[tokens],
    kinds={"python", "numpy"},
)
def token_exports(
    context: dg.AssetExecutionContext,
    config: TokenExportConfig,
    paths: CorpusPaths,
    configs: ConfigStore,
) -> dg.MaterializeResult[Any]:
    """The build's token files as Megatron-LM's indexed dataset and as nanotron's datatrove
    files, byte for byte what datatrove 0.10's writers make (`corpus export-tokens`)."""
    from corpus_assets.core.errors import ConfigError
    from corpus_assets.core.stages.export_tokens import check_format, export_build

    with one_sentence(context):
        formats = [check_format(fmt) for fmt in config.formats]  # all checked before any export
        if not formats:
            raise ConfigError(f"formats is empty; allowed: {', '.join(ALL_FORMATS)}")
        cfg, layout = configs.load(context.partition_key), paths.layout()
        done = [export_build(cfg, layout, fmt, context.log.info) for fmt in formats]
    metadata: dict[str, Any] = {"documents": done[0].documents, "tokens": done[0].tokens}
    for export in done:
        metadata[f"{export.format}_path"] = dg.MetadataValue.path(export.dest)
        metadata[f"{export.format}_files"] = export.files
        metadata[f"{export.format}_reused"] = export.reused
    return dg.MaterializeResult(metadata=metadata)
