"""The `quality_model` asset: a fastText quality classifier of one classifier config.

`corpus classifier train` trains it and publishes `classifiers/<key>/` (`model.bin`, then
`MANIFEST.json`); the materialization's metadata comes from that manifest. A corpus config uses
the model by this partition's key (`[[filters.classifiers]] model = KEY`).
"""

import json
from typing import Any

import dagster as dg

from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.core.errors import EXIT_DATA
from corpus_assets.core.stages.classifier_verify import MANIFEST_FILE
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.classifier_configs import ClassifierConfigStore
from corpus_assets.resources.classifier_report import classifier_metadata
from corpus_assets.resources.partitions import classifier_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.retries import CLASSIFIER_RETRY
from corpus_assets.resources.stage_runner import StageRunner


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=classifier_configs,
    group_name="classifiers",
    kinds={"python", "fasttext"},
    tags={"corpus/stage": "classifier"},
    retry_policy=CLASSIFIER_RETRY,
)
def quality_model(
    context: dg.AssetExecutionContext,
    paths: CorpusPaths,
    classifier_configs: ClassifierConfigStore,
    stage_runner: StageRunner,
) -> dg.MaterializeResult[Any]:
    """A fastText quality classifier trained on the config's positive and negative examples
    (`corpus classifier train`), with its validation precision, recall and ROC AUC. Corpus
    configs filter with it by this partition's key."""
    key = context.partition_key
    with one_sentence(context):
        config_file = classifier_configs.file_for(key)
        stage_runner.run_classifier(context, config_file, paths.root_path())
        manifest = read_manifest(classifier_configs, key)
    return dg.MaterializeResult(
        metadata=classifier_metadata(manifest, str(classifier_configs.folder_for(key))),
        data_version=dg.DataVersion(manifest["model"]["sha256"]),
    )


def read_manifest(store: ClassifierConfigStore, key: str) -> dict[str, Any]:
    """The published manifest of partition `key`; a Failure if the command left none."""
    path = store.folder_for(key) / MANIFEST_FILE
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise dg.Failure(
            f"`corpus classifier train` succeeded but {path} is unreadable: {exc}",
            metadata={"exit_code": EXIT_DATA},
            allow_retries=False,
        ) from None
