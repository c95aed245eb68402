"""Re-running the checks of an existing build: `corpus check` and the `corpus_recheck` job."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import dagster as dg
from support.corpus import run_corpus

from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout
from corpus_assets.definitions import build_defs
from corpus_assets.resources.paths import CorpusPaths

MANIFEST_CHECK = dg.AssetCheckKey(dg.AssetKey("shards"), "shards_manifest_valid")


def _check(root: Path, target: str) -> subprocess.CompletedProcess[str]:
    return run_corpus("check", target, "--root", root, env={"DAGSTER_HOME": str(root / "dagster")})


def _materializations(instance: dg.DagsterInstance, key: str) -> int:
    return len(
        instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("shards"), asset_partitions=[key]),
            limit=10,
        ).records
    )


def test_checks_run_again_on_the_build_as_it_is_now(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    result = driver.build(example, root, instance)
    assert result.exit_code == 0
    cfg = load_config(example)
    key = cfg.partition_key
    shard = sorted(Layout(root.resolve()).shards(cfg).glob("*.parquet"))[0]
    original = shard.read_bytes()
    data = bytearray(original)
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))  # the build on disk no longer matches its manifest

    done = _check(root, str(example))
    assert done.returncode == 65, done.stderr
    outcomes = json.loads(done.stdout)["checks"]
    assert outcomes["shards_manifest_valid"] == "failed"
    assert outcomes["tokens_manifest_valid"] == "passed"
    assert "checks failed on " + key in done.stderr
    record = instance.get_latest_asset_check_evaluation_record(MANIFEST_CHECK)
    assert record is not None and record.partition == key
    assert record.event is not None and record.event.dagster_event is not None
    evaluation = record.event.dagster_event.event_specific_data
    assert evaluation.passed is False  # type: ignore[union-attr]
    assert _materializations(instance, key) == 1, "nothing was rebuilt"

    shard.write_bytes(original)  # repaired: the next re-run passes
    job = build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def("corpus_recheck")
    assert job.partitions_def is not None  # the Launchpad offers the partitions to pick from
    again = job.execute_in_process(instance=instance, partition_key=key)
    assert again.success
    record = instance.get_latest_asset_check_evaluation_record(MANIFEST_CHECK)
    assert record is not None and record.event is not None
    assert record.event.dagster_event.event_specific_data.passed is True  # type: ignore[union-attr]
    assert _materializations(instance, key) == 1


def _errors(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [e.user_message for e in instance.all_logs(run_id) if e.level >= logging.ERROR]


def test_a_partition_without_a_build_is_refused_in_one_line(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    """Never a green run that checked nothing: registered, never built (or cleaned up)."""
    key = driver.register(example, root, instance).partition_key
    done = _check(root, key)
    assert done.returncode == 64, done.stderr
    refusal = f"materialize shards first: partition {key} has no build to check"
    assert done.stderr.strip() == f"corpus check: error: {refusal}"

    job = build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def("corpus_recheck")
    run = job.execute_in_process(instance=instance, partition_key=key, raise_on_error=False)
    assert not run.success
    assert _errors(instance, run.run_id)[0] == refusal  # the run page's first ERROR line
    assert not instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
