"""The partitions: one per registered corpus config (`<dataset>-<version>-<hash12>`) and one per
registered task-job config (`<name>-<hash12>`)."""

from __future__ import annotations

import dagster as dg

CORPUS_CONFIGS = "corpus_configs"
TASK_CONFIGS = "task_configs"

corpus_configs = dg.DynamicPartitionsDefinition(name=CORPUS_CONFIGS)
task_configs = dg.DynamicPartitionsDefinition(name=TASK_CONFIGS)
