"""The partitions: one per registered corpus config (`<dataset>-<version>-<hash12>`), one per
registered task-job config (`<name>-<hash12>`), one per registered classifier config
(`<name>-<hash12>`) and one per registered mixture config (`<name>-<hash12>`)."""

from __future__ import annotations

import dagster as dg

from corpus_assets.instance.partitions import CLASSIFIER_CONFIGS as CLASSIFIER_CONFIGS
from corpus_assets.instance.partitions import CORPUS_CONFIGS as CORPUS_CONFIGS
from corpus_assets.instance.partitions import MIXTURE_CONFIGS as MIXTURE_CONFIGS
from corpus_assets.instance.partitions import TASK_CONFIGS as TASK_CONFIGS

corpus_configs = dg.DynamicPartitionsDefinition(name=CORPUS_CONFIGS)
task_configs = dg.DynamicPartitionsDefinition(name=TASK_CONFIGS)
classifier_configs = dg.DynamicPartitionsDefinition(name=CLASSIFIER_CONFIGS)
mixture_configs = dg.DynamicPartitionsDefinition(name=MIXTURE_CONFIGS)
