"""What the instance (and so the UI) says after one of two partitions failed and was cleaned up.

The failed partition reads FAILED (Partitions tab, the launch dialog's Failed filter, a
"materialize failed" backfill) while its files are gone; the healthy partition's checks still
read passed, on the partition and on the asset's latest check results.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.storage.asset_check_execution_record import (
    AssetCheckExecutionRecordStatus,
    AssetCheckExecutionResolvedStatus,
)
from dagster_support import variant, wrapped

from corpus_assets.assets.checks import SHARDS_AUDITS, TOKENS_AUDITS
from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout
from corpus_assets.resources.partitions import corpus_configs
from corpus_assets.sensors.cleanup import FAILURE_SENSOR, corpus_cleanup_on_failure

CHECK_KEYS = [
    *(dg.AssetCheckKey(dg.AssetKey("shards"), name) for name in SHARDS_AUDITS),
    *(dg.AssetCheckKey(dg.AssetKey("tokens"), name) for name in TOKENS_AUDITS),
]
MATERIALIZED, FAILED = dg.AssetPartitionStatus.MATERIALIZED, dg.AssetPartitionStatus.FAILED
PASSED = AssetCheckExecutionResolvedStatus.SUCCEEDED


def _statuses(instance: dg.DagsterInstance, asset: str, keys: list[str]) -> dict[str, object]:
    got = instance.get_status_by_partition(dg.AssetKey(asset), keys, corpus_configs)
    assert got is not None
    return dict(got)


def _check_partitions(
    instance: dg.DagsterInstance, key: dg.AssetCheckKey
) -> dict[AssetCheckExecutionResolvedStatus, set[str]]:
    """Per resolved status, the partitions the check's partition status (as the UI reads it) has."""
    with partition_loading_context(dynamic_partitions_store=instance):
        state = instance.event_log_storage.get_asset_check_state([(key, corpus_configs)])[key]
        return {
            status: set(subset.subset_value.get_partition_keys())  # type: ignore[union-attr]
            for status, subset in state.subsets.items()
            if not subset.is_empty
        }


def test_a_cleaned_failed_partition_reads_failed_and_healthy_checks_read_passed(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    healthy = variant(example, "healthy", version="v2")
    assert driver.build(healthy, root, instance).exit_code == 0
    # the shard stage publishes its shards, then exits 65 (bad data: no retry)
    state = tmp_path / "wrapper"
    runner = wrapped(state, "fail-after=65", "shard")
    bad = driver.build(example, root, instance, stage_runner=runner)  # cleans up itself
    assert bad.exit_code == 65
    ok, failed = load_config(healthy).partition_key, load_config(example).partition_key
    written = json.loads((state / "published.json").read_text())["shards"]
    assert any(name.endswith("_MANIFEST.json") for name in written)  # the stage wrote them
    assert not [name for name in written if Path(name).exists()]  # and the cleanup removed them
    assert not Layout(root.resolve()).shards(load_config(example)).exists()

    keys = [ok, failed]
    for asset in ("shards", "tokens"):
        assert _statuses(instance, asset, keys) == {ok: MATERIALIZED, failed: FAILED}
    assert _statuses(instance, "raw", keys) == {ok: MATERIALIZED, failed: MATERIALIZED}

    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(CHECK_KEYS)
    for key in CHECK_KEYS:
        assert latest[key].status == AssetCheckExecutionRecordStatus.SUCCEEDED, key
        assert latest[key].partition == ok, key
        assert _check_partitions(instance, key) == {PASSED: {ok}}

    # "Materialize failed" rebuilds it: a success takes it out of the failed set.
    assert driver.build(example, root, instance).exit_code == 0
    for asset in ("shards", "tokens"):
        assert _statuses(instance, asset, keys) == {ok: MATERIALIZED, failed: MATERIALIZED}


def _failure_sensor(instance: dg.DagsterInstance, run_id: str) -> None:
    """Evaluate the failure sensor on the failed run, as the daemon does."""
    run = instance.get_run_by_id(run_id)
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    event = records.records[-1].event_log_entry.dagster_event
    assert run is not None and event is not None
    context = dg.build_run_status_sensor_context(
        sensor_name=FAILURE_SENSOR, dagster_event=event, dagster_instance=instance, dagster_run=run
    )
    corpus_cleanup_on_failure(context.for_run_failure())  # type: ignore[call-arg]


@pytest.mark.parametrize("forgotten_by", ["corpus build", "failure sensor"])
def test_checks_a_failed_run_never_ran_leave_no_result(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path, forgotten_by: str
) -> None:
    """A failure with nothing to clean (here the fetch) shows no "Execution failed" checks."""
    healthy = variant(example, "healthy", version="v2")
    assert driver.build(healthy, root, instance).exit_code == 0
    runner = wrapped(tmp_path / "wrapper", "exit-once=65", "fetch")
    by_build = forgotten_by == "corpus build"
    bad = driver.build(example, root, instance, stage_runner=runner, compensate=by_build)
    assert bad.exit_code == 65
    if not by_build:
        _failure_sensor(instance, bad.run_id)
    ok, failed = load_config(healthy).partition_key, load_config(example).partition_key

    assert _statuses(instance, "raw", [ok, failed]) == {ok: MATERIALIZED, failed: FAILED}
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(CHECK_KEYS)
    for key in CHECK_KEYS:
        assert latest[key].status == AssetCheckExecutionRecordStatus.SUCCEEDED, key
        assert latest[key].partition == ok, key
        assert _check_partitions(instance, key) == {PASSED: {ok}}


def test_a_cleanup_forgets_the_check_results_of_the_files_it_removed(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    """Built and checked, then a rebuild fails at tokenize and is cleaned: no result remains."""
    assert driver.build(example, root, instance).exit_code == 0
    key = load_config(example).partition_key
    assert _check_partitions(instance, CHECK_KEYS[0]) == {PASSED: {key}}
    runner = wrapped(tmp_path / "wrapper", "exit-once=65", "tokenize")
    assert driver.build(example, root, instance, stage_runner=runner).exit_code == 65
    assert not Layout(root.resolve()).shards(load_config(example)).exists()
    for asset in ("shards", "tokens"):
        assert _statuses(instance, asset, [key]) == {key: FAILED}
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(CHECK_KEYS)
    assert latest == {}
    for check in CHECK_KEYS:
        assert _check_partitions(instance, check) == {}
