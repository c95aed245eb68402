"""The check on a trained classifier: its model file is the one its manifest names (blocking)."""

import json
import warnings
from collections.abc import Iterator

import dagster as dg

from corpus_assets.assets.checks import check_results
from corpus_assets.assets.quality_model import quality_model
from corpus_assets.core.stages import audit
from corpus_assets.core.stages.classifier_verify import MANIFEST_FILE, verify_classifier
from corpus_assets.resources.classifier_configs import ClassifierConfigStore
from corpus_assets.resources.partitions import classifier_configs

QUALITY_MODEL_MATCHES_MANIFEST = "quality_model_matches_manifest"


def model_matches_manifest(store: ClassifierConfigStore, key: str) -> audit.Audit:
    """`MANIFEST.json` has every field, and `model.bin` the size and sha256 it records."""
    path = store.folder_for(key) / MANIFEST_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return audit.Audit(passed=False, problems=(f"{path}: unreadable: {exc}",))
    return audit.audit_of(verify_classifier(path, doc))


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
