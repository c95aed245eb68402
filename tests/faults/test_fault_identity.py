"""Identity under faults: stage keys and order, content-not-spelling, bad configs fail first."""

from __future__ import annotations

import json
import random
import tempfile
import tomllib
from pathlib import Path
from typing import Any, cast

import dagster as dg
import pytest
from fault_support import materializations, runs_of
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from support.corpus import own_instance_env, run_corpus

from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.instance.home import ensure_home
from corpus_assets.jobs import BUILD_JOB
from corpus_assets.resources.partitions import CORPUS_CONFIGS
from corpus_assets.resources.stage_runner import StageRunner

HAND = {"version": "v1", "dataset": "tinystories", "tokenizer": {"id": "bytes"}}
STAGES = {"raw": "fetch", "shards": "shard", "tokens": "tokenize"}


def _with_source(example: Path) -> dict[str, Any]:
    source = tomllib.loads(example.read_text(encoding="utf-8"))["sources"][0]
    return {**HAND, "sources": [source]}


def test_hand_example_keys_and_order(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    config = example.with_name("hand.json")
    config.write_text(json.dumps(_with_source(example)), encoding="utf-8")
    cfg = load_config(config)
    h = cfg.hash12
    result = driver.build(config, root, instance)
    assert result.exit_code == 0, result.summary
    assert result.summary["partition_key"] == f"tinystories-v1-{h}"
    assert result.summary["build_id"] == f"corpus/tinystories/v1/{h}"
    assert result.summary["shards_manifest"] == f"corpus/tinystories/v1/{h}/_MANIFEST.json"
    assert result.summary["tokens_manifest"] == f"tokens/bytes/tinystories/v1/{h}/_MANIFEST.json"

    records = instance.get_records_for_run(result.run_id).records
    order = [
        r.event_log_entry.step_key
        for r in records
        if r.event_log_entry.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION
    ]
    assert order == ["raw", "shards", "tokens", "report"], "stages ran out of order"
    starts = [
        r.event_log_entry.step_key
        for r in records
        if r.event_log_entry.dagster_event_type == dg.DagsterEventType.STEP_START
    ]
    assert [s for s in starts if s in STAGES] == ["raw", "shards", "tokens"]
    for asset, stage in STAGES.items():
        [record] = materializations(instance, asset, cfg.partition_key)
        meta = record.asset_materialization.metadata  # type: ignore[union-attr]
        assert meta["build_id"].value == f"corpus/tinystories/v1/{h}"  # the build id, once
        assert cfg.stage_key(stage) == f"{meta['build_id'].value}/{stage}"
    tokens_meta = materializations(instance, "tokens", cfg.partition_key)[0]
    manifest = tokens_meta.asset_materialization.metadata["manifest"].value  # type: ignore[union-attr]
    assert Path(str(manifest)).parent == root.resolve() / f"tokens/bytes/tinystories/v1/{h}"


def _respell(config: dict[str, Any], rng: random.Random) -> str:
    """The same config with shuffled keys at every level and random whitespace."""

    def shuffle(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            rng.shuffle(items)
            return {k: shuffle(v) for k, v in items}
        if isinstance(value, list):
            return [shuffle(v) for v in value]
        return value

    text = json.dumps(shuffle(config), indent=rng.choice([None, 1, 4]))
    pad = rng.choice([" ", "\n", "\t", "  \n "])
    return pad + text.replace(", ", "," + pad).replace(": ", pad + ":" + pad) + pad


@pytest.mark.timeout(300)
@settings(
    max_examples=5,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # each example is a real register
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32 - 1), changed=st.sampled_from(["version", "limit", "license"]))
def test_config_hash_is_content_not_spelling(example: Path, seed: int, changed: str) -> None:
    rng = random.Random(seed)
    base = _with_source(example)
    with tempfile.TemporaryDirectory() as tmp:
        root, folder = Path(tmp) / "data", Path(tmp) / "cfg"
        folder.mkdir()
        (folder / "tiny").symlink_to(example.parent / "tiny")
        first, again = folder / "a.json", folder / "b.json"
        first.write_text(json.dumps(base), encoding="utf-8")
        again.write_text(_respell(base, rng), encoding="utf-8")
        home = Path(tmp) / "dagster"
        with dg.DagsterInstance.from_config(str(ensure_home(home))) as instance:
            key = driver.register(first, root, instance).partition_key
            assert driver.register(again, root, instance).partition_key == key
            assert instance.get_dynamic_partitions(CORPUS_CONFIGS) == [key]
            assert len(list((root / "configs").glob("*.origin.json"))) == 1
            assert runs_of(instance, BUILD_JOB) == []

            source = dict(base["sources"][0])
            if changed == "version":
                other = {**base, "version": "v2"}
            else:
                source[changed] = 7 if changed == "limit" else "cc-by-4.0"
                other = {**base, "sources": [source]}
            third = folder / "c.json"
            third.write_text(_respell(other, rng), encoding="utf-8")
            new_key = driver.register(third, root, instance).partition_key
            assert new_key != key
            assert sorted(instance.get_dynamic_partitions(CORPUS_CONFIGS)) == sorted([key, new_key])


def test_respelled_config_builds_nothing_new(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    """Building a respelled config reuses the first build: every stage is a no-op."""
    base = _with_source(example)
    first = example.with_name("first.json")
    first.write_text(json.dumps(base), encoding="utf-8")
    built = driver.build(first, root, instance)
    assert built.exit_code == 0, built.summary
    respelled = example.with_name("respelled.json")
    respelled.write_text(_respell(base, random.Random(7)), encoding="utf-8")
    again = driver.build(respelled, root, instance)
    assert again.summary == built.summary
    key = built.summary["partition_key"]
    assert instance.get_dynamic_partitions(CORPUS_CONFIGS) == [key]
    latest = materializations(instance, "shards", key)[0].asset_materialization
    assert latest is not None and latest.metadata["cached"].value is True
    raw_meta = materializations(instance, "raw", key)[0].asset_materialization
    assert raw_meta is not None
    sources: Any = raw_meta.metadata["sources"].value
    assert all(row.data["cached"] for row in sources.records)


BAD_CONFIGS = {
    "no-dataset": {"version": "v1", "tokenizer": {"id": "bytes"}},
    "no-version": {"dataset": "tinystories", "tokenizer": {"id": "bytes"}},
    "no-tokenizer": {"dataset": "tinystories", "version": "v1"},
    "unknown-key": {**HAND, "dedupe": True},
}


def _snapshot(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")}


def test_bad_config_fails_before_any_stage(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    good = driver.register(example, root, instance)
    before = _snapshot(root)
    fresh = tmp_path / "fresh-root"
    env = own_instance_env()
    for name, config in BAD_CONFIGS.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        for command in ("build", "register"):
            for where in (root, fresh):
                done = run_corpus(command, path, "--root", where, environ=env, timeout=120)
                assert done.returncode == 64, (name, command, done.stderr)
                assert "error:" in done.stderr and "Traceback" not in done.stderr
    assert not fresh.exists(), "a bad config created the data root"
    assert _snapshot(root) == before, "a bad config wrote under the data root"
    assert instance.get_dynamic_partitions(CORPUS_CONFIGS) == [good.partition_key]
    assert instance.get_runs() == [], "a bad config started a run"


def test_stage_options_of_the_build_job() -> None:
    """Per-stage retry policies and the heartbeat, as the job that runs them sees them."""
    from corpus_assets.definitions import defs

    job = defs.resolve_job_def(BUILD_JOB)
    policies = {
        name: cast(dg.OpDefinition, job.graph.node_named(name).definition).retry_policy
        for name in STAGES
    }
    fetch, shard, tokenize = policies["raw"], policies["shards"], policies["tokens"]
    assert fetch is not None and shard is not None and tokenize is not None
    assert fetch.max_retries > shard.max_retries == tokenize.max_retries >= 1
    assert fetch.backoff == dg.Backoff.EXPONENTIAL and (fetch.delay or 0) > 0
    assert defs.resources is not None
    runner = defs.resources["stage_runner"]
    assert isinstance(runner, StageRunner)
    assert 0 < runner.heartbeat_timeout_s <= 600
    assert 0 < runner.termination_timeout_s < runner.heartbeat_timeout_s
