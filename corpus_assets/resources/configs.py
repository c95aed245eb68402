"""The config store as a resource: registered configs, found by partition key."""

from pathlib import Path

import dagster as dg

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.store import registry
from corpus_assets.resources.paths import CorpusPaths


class ConfigStore(dg.ConfigurableResource["ConfigStore"]):
    """Configs registered under `<root>/configs/`, one per `corpus_configs` partition."""

    paths: dg.ResourceDependency[CorpusPaths]

    def file_for(self, partition_key: str) -> Path:
        """The registered config file of a partition; a non-retryable failure if absent."""
        try:
            return registry.path_for(self.paths.layout(), partition_key)
        except ConfigError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc

    def load(self, partition_key: str) -> LoadedConfig:
        try:
            return registry.load(self.paths.layout(), partition_key)
        except ConfigError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc

    def register(self, config_file: Path) -> registry.Registered:
        return registry.register(config_file, self.paths.layout())
