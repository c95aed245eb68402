"""Registered mixture configs as a resource, and registering one as a partition."""

from pathlib import Path
from typing import Any

import dagster as dg

from corpus_assets.core.stages.mixture import mixture_folder
from corpus_assets.core.store import mixture_registry
from corpus_assets.instance.partitions import add_partition
from corpus_assets.resources.classifier_configs import registered_file
from corpus_assets.resources.partitions import MIXTURE_CONFIGS
from corpus_assets.resources.paths import CorpusPaths


class MixtureConfigStore(dg.ConfigurableResource["MixtureConfigStore"]):
    """Mixture configs registered under `<root>/mixture-configs/`, one per `mixture_configs`
    partition."""

    paths: dg.ResourceDependency[CorpusPaths]

    def file_for(self, partition_key: str) -> Path:
        """The registered config file of a partition, checked to be that partition; a
        non-retryable failure if absent or changed."""
        return registered_file(mixture_registry.MIXTURES, self.paths, partition_key)

    def folder_for(self, partition_key: str) -> Path:
        """`<root>/mixtures/<key>/`: the sample index and its manifest."""
        return mixture_folder(self.paths.root_path(), partition_key)


def register_mixture(config_file: Path, root: Path, instance: dg.DagsterInstance) -> dict[str, Any]:
    """Store a mixture config under the data root, add its `mixture_configs` partition; what
    `corpus register` prints."""
    root = root.resolve()
    registered = mixture_registry.register(config_file, root)
    key = registered.config.partition_key
    add_partition(instance, MIXTURE_CONFIGS, key)
    return {
        "kind": "mixture",
        "partition_key": key,
        "config_sha256": registered.config.sha256,
        "config": str(registered.path.relative_to(root)),
        "mixture_folder": str(mixture_folder(root, key)),
        "root": str(root),
        "dagster_home": instance.root_directory,
    }
