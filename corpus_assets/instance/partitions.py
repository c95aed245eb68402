"""Adding a config's partition to the instance when other processes may add the same one.

Dagster's `add_dynamic_partitions` reads which keys exist, then inserts the others: two
`corpus build`s of one config started at once can both find the key missing, and the second
insert fails on the storage's unique constraint. That insert losing the race means the partition
is there, which is all a caller wants.
"""

from __future__ import annotations

import dagster as dg
from sqlalchemy.exc import IntegrityError

CORPUS_CONFIGS = "corpus_configs"
TASK_CONFIGS = "task_configs"
CLASSIFIER_CONFIGS = "classifier_configs"
MIXTURE_CONFIGS = "mixture_configs"
CONFIG_PARTITIONS = (CORPUS_CONFIGS, TASK_CONFIGS, CLASSIFIER_CONFIGS, MIXTURE_CONFIGS)
"""The dynamic partition sets of the instance, one partition per registered config."""


def add_partition(instance: dg.DagsterInstance, partitions: str, key: str) -> None:
    """Add `key` to the dynamic partitions `partitions` unless it is there (whoever adds it)."""
    try:
        instance.add_dynamic_partitions(partitions, [key])
    except IntegrityError:
        if not instance.has_dynamic_partition(partitions, key):
            raise
