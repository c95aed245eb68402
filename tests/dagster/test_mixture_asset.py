"""The `mixture` asset: a registered mixture partition built through `corpus mix` (metadata from
its manifest, readable by `MixtureDataset`), kept when built, and refused in one sentence when a
component changed since."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg

from corpus_assets.assets.mixture import mixture
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.run import run_stage
from corpus_assets.core.store.layout import Layout
from corpus_assets.mixture import MixtureDataset
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.mixture_configs import MixtureConfigStore, register_mixture
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.stage_runner import StageRunner


def _materialize(root: Path, instance: dg.DagsterInstance, key: str) -> dg.ExecuteInProcessResult:
    paths = CorpusPaths(root=str(root))
    return dg.materialize(
        [mixture],
        partition_key=key,
        instance=instance,
        resources={
            "paths": paths,
            "mixture_configs": MixtureConfigStore(paths=paths),
            "stage_runner": StageRunner(workers=1),
        },
        raise_on_error=False,
    )


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    (event,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_mixture_asset_builds_a_registered_partition(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    cfg = load_config(example)
    ConfigStore(paths=CorpusPaths(root=str(root))).register(example)
    for stage in ("fetch", "shard", "tokenize"):  # the build, without Dagster
        run_stage(stage, example, root, workers=1)
    config = example.with_name("mix.json")
    config.write_text(
        json.dumps(
            {
                "name": "tiny-twice",
                "seq_len": 128,
                "validation_share": 0.1,
                "components": [
                    {"name": "first", "tokens": cfg.partition_key, "weight": 0.7},
                    {"name": "second", "tokens": cfg.partition_key, "weight": 0.3},
                ],
            }
        )
    )
    registered = register_mixture(config, root, instance)
    key = registered["partition_key"]
    assert instance.has_dynamic_partition("mixture_configs", key)

    result = _materialize(root, instance, key)
    assert result.success
    meta = _metadata(result)
    folder = Path(registered["mixture_folder"])
    manifest = json.loads((folder / "_MANIFEST.json").read_text())
    assert meta["path"] == str(folder)
    assert meta["train_samples"] == manifest["train"]["samples"] == len(MixtureDataset(folder))
    assert meta["validation_documents"] == manifest["validation"]["documents"] > 0
    rows = {r.data["component"]: r.data for r in meta["components"].records}
    assert rows["first"]["tokens"] == cfg.partition_key
    assert abs(rows["first"]["share"] - 0.7) < 0.01 and abs(rows["second"]["share"] - 0.3) < 0.01

    tokens = Layout(root.resolve()).tokens(cfg) / "_MANIFEST.json"
    doc = json.loads(tokens.read_text())
    doc["code_version"] = "another"  # the build was made again since
    tokens.write_text(json.dumps(doc))
    failed = _materialize(root, instance, key)
    assert not failed.success
    (failure,) = [e for e in failed.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.error.message
    assert "component 'first' of mixture" in message and "changed since" in message
