"""The check on a trained classifier: its model file is the one its manifest names (blocking)."""

import warnings
from collections.abc import Iterator

import dagster as dg

from corpus_assets.assets.checks import check_results
from corpus_assets.assets.quality_model import quality_model
from corpus_assets.core.stages import audit
from corpus_assets.core.stages.classifier import MANIFEST_FILE, published
from corpus_assets.resources.classifier_configs import ClassifierConfigStore
from corpus_assets.resources.partitions import classifier_configs

QUALITY_MODEL_MATCHES_MANIFEST = "quality_model_matches_manifest"


def model_matches_manifest(store: ClassifierConfigStore, key: str) -> audit.Audit:
    """`model.bin` has the size and sha256 that `MANIFEST.json` records."""
    folder = store.folder_for(key)
    if published(folder) is not None:
        return audit.Audit(passed=True)
    return audit.Audit(
        passed=False,
        problems=(f"{folder}: model.bin is missing or differs from {MANIFEST_FILE}",),
    )


def _specs() -> list[dg.AssetCheckSpec]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(
                QUALITY_MODEL_MATCHES_MANIFEST,
                asset=quality_model,
                blocking=True,
                partitions_def=classifier_configs,
                description=(model_matches_manifest.__doc__ or "").strip(),
            )
        ]


@dg.multi_asset_check(specs=_specs(), name="quality_model_checks")
def quality_model_checks(
    context: dg.AssetCheckExecutionContext, classifier_configs: ClassifierConfigStore
) -> Iterator[dg.AssetCheckResult]:
    """The partition's model file against its manifest (size and sha256)."""
    key = context.partition_key
    yield from check_results(
        quality_model.key,
        {QUALITY_MODEL_MATCHES_MANIFEST: lambda: model_matches_manifest(classifier_configs, key)},
    )
