"""The config store as a resource: registered configs, found by partition key."""

from pathlib import Path

import dagster as dg

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.errors import EXIT_USAGE, ConfigError
from corpus_assets.core.store import registry
from corpus_assets.resources.partitions import CORPUS_CONFIGS
from corpus_assets.resources.paths import CorpusPaths


class ConfigStore(dg.ConfigurableResource["ConfigStore"]):
    """Configs registered under `<root>/configs/`, one per `corpus_configs` partition."""

    paths: dg.ResourceDependency[CorpusPaths]

    def file_for(self, partition_key: str) -> Path:
        """The registered config file of a partition; a non-retryable failure if absent."""
        try:
            return registry.path_for(self.paths.layout(), partition_key)
        except ConfigError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from None

    def file_for_run(self, context: dg.AssetExecutionContext) -> Path:
        """`file_for` the run's partition; an unregistered key (typed into the launch dialog's
        "Add partition") is also removed from the partitions, so it does not linger as failed."""
        key = context.partition_key
        try:
            return registry.path_for(self.paths.layout(), key)
        except ConfigError as exc:
            message = str(exc)
        if context.instance.has_dynamic_partition(CORPUS_CONFIGS, key):
            context.instance.delete_dynamic_partition(CORPUS_CONFIGS, key)
            message += f"; removed {key!r} from the {CORPUS_CONFIGS} partitions"
        raise dg.Failure(message, metadata={"exit_code": EXIT_USAGE}, allow_retries=False)

    def load(self, partition_key: str) -> LoadedConfig:
        try:
            return registry.load(self.paths.layout(), partition_key)
        except ConfigError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc

    def register(self, config_file: Path) -> registry.Registered:
        return registry.register(config_file, self.paths.layout())
