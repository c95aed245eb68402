"""Registered classifier configs as a resource, and registering one as a partition."""

from pathlib import Path
from typing import Any

import dagster as dg

from corpus_assets.core.classifier_config import load_classifier_config
from corpus_assets.core.errors import EXIT_USAGE, ConfigError
from corpus_assets.core.stages.preflight import source_problems
from corpus_assets.core.store import classifier_registry
from corpus_assets.core.store.config_registry import ConfigRegistry
from corpus_assets.core.store.layout import Layout
from corpus_assets.instance.partitions import add_partition
from corpus_assets.resources.partitions import CLASSIFIER_CONFIGS
from corpus_assets.resources.paths import CorpusPaths


def registered_file(registry: ConfigRegistry[Any], paths: CorpusPaths, partition_key: str) -> Path:
    """The registered config file of a partition, checked to be that partition; a
    non-retryable failure if absent or changed."""
    try:
        return registry.checked_path(paths.root_path(), partition_key)
    except ConfigError as exc:
        raise dg.Failure(
            str(exc), metadata={"exit_code": EXIT_USAGE}, allow_retries=False
        ) from None


class ClassifierConfigStore(dg.ConfigurableResource["ClassifierConfigStore"]):
    """Classifier configs registered under `<root>/classifier-configs/`, one per
    `classifier_configs` partition."""

    paths: dg.ResourceDependency[CorpusPaths]

    def file_for(self, partition_key: str) -> Path:
        """The registered config file of a partition, checked to be that partition; a
        non-retryable failure if absent or changed."""
        return registered_file(classifier_registry.CLASSIFIERS, self.paths, partition_key)

    def folder_for(self, partition_key: str) -> Path:
        """`<root>/classifiers/<key>/`: the trained model and its manifest."""
        return self.paths.layout().classifier(partition_key)


def register_checked(config_file: Path, root: Path) -> classifier_registry.RegisteredClassifier:
    """Register a classifier config whose local example files exist (the pre-flight check of
    its sources); a ConfigError naming each missing one, and nothing written, if not."""
    view = load_classifier_config(config_file).fetch_view()
    problems = source_problems(view) if view.model.sources else []
    if problems:
        raise ConfigError("; ".join(problems))
    return classifier_registry.register(config_file, root)


def register_classifier(
    config_file: Path, root: Path, instance: dg.DagsterInstance
) -> dict[str, Any]:
    """Store a classifier config under the data root, add its `classifier_configs` partition;
    what `corpus register` prints."""
    root = root.resolve()
    registered = register_checked(config_file, root)
    key = registered.config.partition_key
    add_partition(instance, CLASSIFIER_CONFIGS, key)
    return {
        "kind": "classifier",
        "partition_key": key,
        "config_sha256": registered.config.sha256,
        "config": str(registered.path.relative_to(root)),
        "model_folder": str(Layout(root).classifier(key)),
        "root": str(root),
        "dagster_home": instance.root_directory,
    }
