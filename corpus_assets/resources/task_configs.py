"""Registered task-job configs as a resource: found by partition key, with their job folders."""

from pathlib import Path

import dagster as dg

from corpus_assets.core.errors import ConfigError
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.tasks import registry
from corpus_assets.tasks.config import LoadedJobConfig


class TaskConfigStore(dg.ConfigurableResource["TaskConfigStore"]):
    """Task configs registered under `<root>/task-configs/`, one per `task_configs` partition."""

    paths: dg.ResourceDependency[CorpusPaths]

    def load(self, partition_key: str) -> LoadedJobConfig:
        """The registered config of a partition; a non-retryable failure if absent."""
        try:
            return registry.load(self.paths.root_path(), partition_key)
        except ConfigError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc

    def file_for(self, partition_key: str) -> Path:
        return registry.path_for(self.paths.root_path(), self.load(partition_key).partition_key)

    def folder_for(self, partition_key: str) -> Path:
        """`<root>/tasks/<name>/<hash12>/`: where the partition's job lives."""
        return registry.job_folder(self.paths.root_path(), self.load(partition_key))
