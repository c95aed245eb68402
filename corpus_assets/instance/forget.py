"""`corpus forget KEY [--data]`: drop a registered config's partition from the instance.

A config that can never build (a bad license, say) leaves its partition Failed in the UI for
good. Forgetting it deletes the key from its dynamic partitions (`corpus_configs`,
`task_configs` or `classifier_configs`), so no page counts it any more; the partitions' cached
status is reset so that Dagster computes it again without the key. `corpus register` of the
same config adds it back, its history with it. With `--data` (corpus partitions) the build's
files go too: its shards (with the report beside them), tokens, work folders and Hugging Face
export, and the materializations and check results that described them; never the shared raw
cache, another build's files or the stored config. A partition with a run queued or running is
refused, after runs whose process is gone are marked failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from corpus_assets.core.errors import ConfigError
from corpus_assets.core.stages.cleanup import cleanup
from corpus_assets.core.stages.token_formats import FORMATS
from corpus_assets.core.store import registry
from corpus_assets.core.store.atomic import remove_tree
from corpus_assets.core.store.layout import Layout
from corpus_assets.instance.dead_runs import PARTITION_TAG, UNFINISHED, mark_dead_runs
from corpus_assets.instance.failures import forget_partition
from corpus_assets.instance.partitions import CONFIG_PARTITIONS as PARTITION_SETS
from corpus_assets.instance.partitions import CORPUS_CONFIGS

BUILD_ASSETS = ("shards", "tokens", "report", "corpus_hf", "token_exports")
"""The assets whose materializations describe a corpus build's own files (not raw's cache)."""
EXPORTS = tuple(Path("exports") / kind for kind in ("corpus", *FORMATS))
"""A build's exports: Hugging Face `datasets` files, and token files for Megatron and nanotron."""


@dataclass(frozen=True)
class Forgotten:
    """What `forget` did: the partition sets the key left and the files it removed."""

    partition_key: str
    partitions: tuple[str, ...]
    removed: tuple[str, ...]

    def summary(self) -> dict[str, object]:
        return {
            "partition_key": self.partition_key,
            "forgotten_from": list(self.partitions),
            "removed": list(self.removed),
        }


def forget(instance: dg.DagsterInstance, root: Path, key: str, data: bool = False) -> Forgotten:
    """Delete partition `key` from the instance (with `data`, its build's files first); a key no
    partition set holds, or one with a run queued or running, is refused in one line."""
    sets = tuple(name for name in PARTITION_SETS if instance.has_dynamic_partition(name, key))
    if not sets:
        raise ConfigError(
            f"partition {key!r} is not in {', '.join(PARTITION_SETS)}: nothing to forget "
            "(the keys are the partition_key `corpus register` prints)"
        )
    _refuse_while_running(instance, key)
    removed: tuple[str, ...] = ()
    if data:
        if sets != (CORPUS_CONFIGS,):
            raise ConfigError(
                f"--data removes a corpus build's files; {key!r} is a {sets[0]} partition "
                "(forget it without --data)"
            )
        removed = _remove_build(instance, Layout(root.resolve()), key)
    for name in sets:
        instance.delete_dynamic_partition(name, key)
    instance.wipe_asset_cached_status(list(instance.get_asset_keys()))
    return Forgotten(key, sets, removed)


def _refuse_while_running(instance: dg.DagsterInstance, key: str) -> None:
    mark_dead_runs(instance, "corpus forget")
    going = instance.get_runs(dg.RunsFilter(tags={PARTITION_TAG: key}, statuses=UNFINISHED))
    if going:
        run = going[0]
        raise ConfigError(
            f"partition {key!r} has run {run.run_id} {run.status.value}: wait for it to end "
            "or cancel it, then forget the partition"
        )


def _remove_build(instance: dg.DagsterInstance, layout: Layout, key: str) -> tuple[str, ...]:
    """The build's files (under its shard and tokenize locks), then the events about them."""
    cfg = registry.load(layout, key)
    removed = [str(path) for path in cleanup(cfg, layout).removed]
    for exports in EXPORTS:
        if (layout.root / exports / key).exists():
            remove_tree(layout.root / exports / key)
            removed.append(str(exports / key))
    for name in BUILD_ASSETS:
        forget_partition(instance, dg.AssetKey(name), key)
    return tuple(removed)
