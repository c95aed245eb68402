"""The config sensor: configs dropped into <root>/inbox become partitions and one build each."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
from dagster_support import variant

from corpus_assets.assets.partitions import CORPUS_CONFIGS
from corpus_assets.core.config import load_config
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.sensors.config import corpus_config_sensor


def _tick(instance: dg.DagsterInstance, root: Path, cursor: str | None) -> object:
    paths = CorpusPaths(root=str(root))
    with dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"paths": paths, "configs": ConfigStore(paths=paths)},
    ) as context:
        return corpus_config_sensor(context)


def test_dropped_configs_are_registered_and_built_once(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    inbox = root / "inbox"
    inbox.mkdir(parents=True)
    assert isinstance(_tick(instance, root, None), dg.SkipReason)

    shutil.copytree(example.parent / "tiny", inbox / "tiny")
    shutil.copy(example, inbox / "tiny.toml")
    shutil.copy(variant(example, "same"), inbox / "same-config-as-json.json")
    (inbox / "broken.toml").write_text('dataset = "x"\nversion = "v1"\n')  # no tokenizer

    result = _tick(instance, root, None)
    assert isinstance(result, dg.SensorResult)
    key = load_config(example).partition_key
    assert [r.run_key for r in result.run_requests or []] == [key, key], "same config: one run"
    assert all(r.partition_key == key for r in result.run_requests or [])
    (request,) = result.dynamic_partitions_requests or []
    assert isinstance(request, dg.AddDynamicPartitionsRequest)
    assert list(request.partition_keys) == [key]
    assert (root / "configs" / f"{key[-12:]}.json").is_file()
    assert load_config(root / "configs" / f"{key[-12:]}.json").resolve("tiny") == inbox / "tiny"

    instance.add_dynamic_partitions(CORPUS_CONFIGS, [key])  # what the daemon does with it
    again = _tick(instance, root, result.cursor)
    assert isinstance(again, dg.SkipReason), "unchanged files are not looked at again"
