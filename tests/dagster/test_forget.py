"""`corpus forget KEY [--data]`: a partition dropped from the instance, its files with it."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import unlicensed, variant
from support.corpus import run_corpus

from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.stages.export_tokens import export_build
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.layout import Layout
from corpus_assets.instance.forget import forget
from corpus_assets.resources.partitions import CORPUS_CONFIGS, TASK_CONFIGS, corpus_configs

SHARDS = dg.AssetKey("shards")


def _forget_cli(root: Path, *args: str) -> tuple[int, list[str]]:
    done = run_corpus("forget", *args, "--root", root, env={"DAGSTER_HOME": str(root / "dagster")})
    return done.returncode, done.stdout.splitlines() + done.stderr.splitlines()


def test_a_bad_config_is_forgotten_and_no_longer_reads_failed(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    """The bad-license build leaves its partition Failed; `corpus forget` drops the key in one
    line, and the asset's failed partitions no longer hold it. Registering it again brings the
    partition back (forget without --data removes nothing else)."""
    bad = load_config(unlicensed(example))
    assert driver.build(unlicensed(example), root, instance).exit_code == 65
    status = instance.get_status_by_partition(SHARDS, [bad.partition_key], corpus_configs)
    assert status == {bad.partition_key: dg.AssetPartitionStatus.FAILED}

    code, lines = _forget_cli(root, bad.partition_key)
    assert code == 0, lines
    assert [json.loads(line) for line in lines] == [
        {"partition_key": bad.partition_key, "forgotten_from": [CORPUS_CONFIGS], "removed": []}
    ]
    assert not instance.has_dynamic_partition(CORPUS_CONFIGS, bad.partition_key)
    left = instance.get_dynamic_partitions(CORPUS_CONFIGS)
    assert bad.partition_key not in instance.get_status_by_partition(SHARDS, left, corpus_configs)
    assert (Layout(root.resolve()).config_file(bad)).is_file()  # the stored config stays

    code, lines = _forget_cli(root, bad.partition_key)
    assert code == 64 and len(lines) == 1, lines
    assert f"partition '{bad.partition_key}' is not in corpus_configs" in lines[0]

    driver.register(unlicensed(example), root, instance)  # back, with its history
    status = instance.get_status_by_partition(SHARDS, [bad.partition_key], corpus_configs)
    assert status == {bad.partition_key: dg.AssetPartitionStatus.FAILED}


def test_forget_data_removes_that_build_only(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    """--data removes the build's shards (and report), tokens, work folder, exports and their
    materializations; the raw cache and a second build of the same sources stay whole."""
    other = variant(example, "other", version="v2")
    for config in (example, other):
        assert driver.build(config, root, instance).exit_code == 0
    cfg, kept = load_config(example), load_config(other)
    layout = Layout(root.resolve())
    export = root / "exports" / "corpus" / cfg.partition_key
    export.mkdir(parents=True)
    (export / "corpus_source.json").write_text("{}", encoding="utf-8")
    for c in (cfg, kept):  # real Megatron exports of both builds
        export_build(c, layout, "megatron", lambda _line: None)
    raw_before = sorted(p.relative_to(root) for p in layout.raw.rglob("*") if p.is_file())
    assert (layout.shards(cfg) / "REPORT.md").is_file() and layout.work(cfg, "x").parent.exists()

    done = forget(instance, root, cfg.partition_key, data=True)

    assert set(done.removed) == {
        str(layout.shards(cfg).relative_to(layout.root)),
        str(layout.tokens(cfg).relative_to(layout.root)),
        str(layout.work(cfg, "x").parent.relative_to(layout.root)),
        f"exports/corpus/{cfg.partition_key}",
        f"exports/megatron/{cfg.partition_key}",
    }
    for gone in (layout.shards(cfg), layout.tokens(cfg), export, layout.work(cfg, "x").parent):
        assert not gone.exists(), gone
    assert sorted(p.relative_to(root) for p in layout.raw.rglob("*") if p.is_file()) == raw_before
    assert (layout.shards(kept) / MANIFEST).is_file()
    assert (layout.tokens(kept) / MANIFEST).is_file()
    assert not (root / "exports" / "megatron" / cfg.partition_key).exists()
    assert any((root / "exports" / "megatron" / kept.partition_key).iterdir())
    assert not instance.has_dynamic_partition(CORPUS_CONFIGS, cfg.partition_key)
    assert instance.has_dynamic_partition(CORPUS_CONFIGS, kept.partition_key)
    shards = instance.get_materialized_partitions(SHARDS)
    assert cfg.partition_key not in shards and kept.partition_key in shards


@pytest.mark.parametrize(
    "status",
    # not yet launched, going, being cancelled (a QUEUED run needs a code location to exist)
    [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING],
)
def test_a_partition_with_a_run_queued_or_running_is_refused(
    example: Path, root: Path, instance: dg.DagsterInstance, status: dg.DagsterRunStatus
) -> None:
    """Nothing is forgotten while a run of the partition may still write it. (A STARTED run
    whose process no event records is not judged dead: it is left alone, so still refused.)"""
    cfg = driver.register(example, root, instance)
    run = instance.add_run(
        dg.DagsterRun(
            job_name="corpus_build", status=status, tags={"dagster/partition": cfg.partition_key}
        )
    )
    with pytest.raises(ConfigError) as refused:
        forget(instance, root, cfg.partition_key, data=True)
    assert str(refused.value) == (
        f"partition '{cfg.partition_key}' has run {run.run_id} {status.value}: wait for it "
        "to end or cancel it, then forget the partition"
    )
    assert instance.has_dynamic_partition(CORPUS_CONFIGS, cfg.partition_key)


def test_data_of_a_task_partition_is_refused_and_the_key_kept(
    root: Path, instance: dg.DagsterInstance
) -> None:
    """--data removes corpus builds only: a task partition's job folder is not its to remove."""
    instance.add_dynamic_partitions(TASK_CONFIGS, ["tasks-0123456789ab"])
    with pytest.raises(ConfigError) as refused:
        forget(instance, root, "tasks-0123456789ab", data=True)
    assert str(refused.value) == (
        "--data removes a corpus build's files; 'tasks-0123456789ab' is a task_configs "
        "partition (forget it without --data)"
    )
    assert instance.has_dynamic_partition(TASK_CONFIGS, "tasks-0123456789ab")
    assert forget(instance, root, "tasks-0123456789ab").partitions == (TASK_CONFIGS,)
    assert not instance.has_dynamic_partition(TASK_CONFIGS, "tasks-0123456789ab")
