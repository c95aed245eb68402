"""Cleanup sensors, evaluated on real failed and cancelled runs of a temporary instance.

The builds here pass `compensate=False`: `corpus build` would otherwise clean up itself.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster_support import unlicensed, wrapped
from support.dagster import cancel_when

from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.layout import Layout
from corpus_assets.definitions import build_defs
from corpus_assets.jobs import CLEANUP_JOB
from corpus_assets.resources.partitions import corpus_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.stage_runner import StageRunner
from corpus_assets.sensors.cleanup import (
    CLEANUP_OF_TAG,
    cleanup_runs_of,
    corpus_cleanup_on_cancel,
    corpus_cleanup_on_failure,
)


def _evaluate(
    sensor: dg.RunStatusSensorDefinition,
    instance: dg.DagsterInstance,
    run_id: str,
    event_type: dg.DagsterEventType,
) -> dg.RunRequest | dg.SkipReason:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    records = instance.get_records_for_run(run_id, of_type=event_type).records
    event = records[-1].event_log_entry.dagster_event
    assert event is not None
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name, dagster_event=event, dagster_instance=instance, dagster_run=run
    )
    if event_type == dg.DagsterEventType.RUN_FAILURE:
        result = sensor(context.for_run_failure())  # type: ignore[call-arg]
    else:
        result = sensor(context)  # type: ignore[call-arg]
    assert isinstance(result, dg.RunRequest | dg.SkipReason)
    return result


def _cleanup(request: dg.RunRequest, root: Path, instance: dg.DagsterInstance) -> None:
    job = build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def(CLEANUP_JOB)
    done = job.execute_in_process(
        run_config=request.run_config, instance=instance, tags=request.tags
    )
    assert done.success


def test_unlicensed_source_fails_once_and_requests_one_cleanup(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    config = unlicensed(example)
    result = driver.build(config, root, instance, compensate=False)
    assert result.exit_code == 65
    assert "license 'proprietary'" in result.summary["error"]
    assert "source 'tiny'" in result.summary["error"]
    steps = instance.get_records_for_run(
        result.run_id, of_type=dg.DagsterEventType.STEP_START
    ).records
    assert [r.event_log_entry.step_key for r in steps] == ["raw", "shards"], "exit 65: no retry"

    request = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(request, dg.RunRequest)
    assert request.run_key == result.run_id
    key = load_config(config).partition_key
    assert request.run_config["ops"]["cleanup_partition"]["config"]["partition_key"] == key
    assert request.tags[CLEANUP_OF_TAG] == result.run_id

    # A run that run retries will re-execute is not final: no cleanup yet.
    instance.add_run_tags(result.run_id, {"dagster/will_retry": "true"})
    again = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(again, dg.SkipReason)
    assert "will be retried" in str(again.skip_message)


def test_cleanup_removes_outputs_and_materializations_keeps_raw(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    cfg = load_config(example)
    layout = Layout(root.resolve())
    runner = wrapped(tmp_path / "wrapper", "corrupt-shard", "shard")
    result = driver.build(example, root, instance, stage_runner=runner, compensate=False)
    assert result.exit_code == 65 and layout.shards(cfg).exists()
    shards_key = dg.AssetKey("shards")
    assert cfg.partition_key in instance.get_materialized_partitions(shards_key)

    request = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(request, dg.RunRequest)
    _cleanup(request, root, instance)
    assert not layout.shards(cfg).exists()
    assert not (layout.root / "work" / cfg.hash12).exists()
    assert any(layout.raw.glob("tiny-*/_SOURCE.json")), "the raw cache is never cleaned"
    assert cfg.partition_key not in instance.get_materialized_partitions(shards_key)
    assert cfg.partition_key in instance.get_materialized_partitions(dg.AssetKey("raw"))

    # The cleanup run itself is never cleaned up after, even when it fails.
    bad = dg.RunRequest(
        run_config={
            "ops": {"cleanup_partition": {"config": {"partition_key": "x-v1-0123456789ab"}}}
        }
    )
    job = build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def(CLEANUP_JOB)
    failed = job.execute_in_process(
        run_config=bad.run_config, instance=instance, raise_on_error=False
    )
    assert not failed.success
    skip = _evaluate(
        corpus_cleanup_on_failure, instance, failed.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(skip, dg.SkipReason) and "cleanup run" in str(skip.skip_message)


def test_no_cleanup_when_fetch_failed(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    runner = wrapped(tmp_path / "wrapper", "exit-once=65", "fetch")
    result = driver.build(example, root, instance, stage_runner=runner)
    assert result.exit_code == 65
    assert result.summary["stages"]["shard"] == "skipped"
    skip = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(skip, dg.SkipReason)
    assert "before the shard stage started" in str(skip.skip_message)


@pytest.mark.timeout(180)
def test_cancelled_run_requests_cleanup(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    """Cancel like the run launcher does (mark CANCELING, interrupt the worker) during shard."""
    runner: StageRunner = wrapped(
        tmp_path / "wrapper", "stall=120", "shard", termination_timeout_s=5.0
    )
    cfg = load_config(example)
    outcome: dict[str, driver.BuildResult] = {}
    attempts = tmp_path / "wrapper" / "shard.attempts"  # the wrapper writes it as it starts

    def shard_stage_up(run: dg.DagsterRun) -> bool:
        """The run's shards step started and its stage subprocess is up, stalling."""
        started = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_START)
        shards = any(r.event_log_entry.step_key == "shards" for r in started.records)
        return shards and attempts.exists()

    watcher = cancel_when(instance, shard_stage_up)
    start = time.monotonic()
    outcome["build"] = driver.build(example, root, instance, stage_runner=runner, compensate=False)
    watcher.join(timeout=5)
    assert time.monotonic() - start < 60, "the stalled stage was not stopped"
    run = instance.get_run_by_id(outcome["build"].run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.CANCELED
    assert attempts.read_text() == "1", "cancel is not retried"

    request = _evaluate(
        corpus_cleanup_on_cancel, instance, run.run_id, dg.DagsterEventType.RUN_CANCELED
    )
    assert isinstance(request, dg.RunRequest)
    assert request.run_key == run.run_id
    partition = request.run_config["ops"]["cleanup_partition"]["config"]["partition_key"]
    assert partition == cfg.partition_key
    # Cleaned up, a cancelled build reads missing, not failed (Dagster counts FAILURE runs only).
    _cleanup(request, root, instance)
    for asset in ("shards", "tokens"):
        status = instance.get_status_by_partition(dg.AssetKey(asset), [partition], corpus_configs)
        assert status == {partition: None}, asset


def _materialize(
    root: Path, instance: dg.DagsterInstance, key: str, *assets: str
) -> dg.ExecuteInProcessResult:
    """Materialize only `assets` of partition `key`, as the UI's Materialize on one asset does."""
    job = build_defs(paths=CorpusPaths(root=str(root))).resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=instance,
        partition_key=key,
        asset_selection=[dg.AssetKey(a) for a in assets],
        raise_on_error=False,
    )


def _written(root: Path) -> set[str]:
    """The files under the data root, but its Dagster instance, run logs and lock files (a
    stage takes its build's lock before it looks for its upstream; lock files stay)."""
    skip = ("dagster/", "logs/", "locks/")
    files = (str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return {f for f in files if not f.startswith(skip)}


def _failure(result: dg.ExecuteInProcessResult, step: str) -> Any:
    event = next(e for e in result.all_events if e.is_step_failure and e.step_key == step)
    return event.step_failure_data.user_failure_data


def test_shards_of_an_unfetched_partition_fail_in_one_sentence_and_need_no_cleanup(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    key = driver.register(example, root, instance).partition_key
    before = _written(root)
    result = _materialize(root, instance, key, "shards", "tokens")
    assert not result.success
    assert _written(root) == before, "nothing written"
    failure = _failure(result, "shards")
    first = failure.description.splitlines()[0]
    assert first.startswith("materialize raw first: source 'tiny' was not fetched"), first
    assert failure.metadata["exit_code"].value == 64
    assert failure.metadata["upstream_missing"].value is True
    assert "```" in str(failure.metadata["stderr_tail"].value)  # the tail stays as metadata
    skip = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(skip, dg.SkipReason)
    assert "upstream asset was not materialized" in str(skip.skip_message)


def test_tokens_of_an_unsharded_partition_name_shards_first(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    key = driver.register(example, root, instance).partition_key
    assert _materialize(root, instance, key, "raw").success
    before = _written(root)
    result = _materialize(root, instance, key, "tokens")
    assert _written(root) == before, "nothing written"
    first = _failure(result, "tokens").description.splitlines()[0]
    assert first.startswith("materialize shards first: no shards manifest at "), first
    skip = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(skip, dg.SkipReason)


def test_an_unknown_partition_key_fails_in_one_line_and_is_removed(
    root: Path, instance: dg.DagsterInstance
) -> None:
    key = "typed-by-hand-0123456789ab"
    instance.add_dynamic_partitions("corpus_configs", [key])  # the dialog's "Add partition"
    before = _written(root)
    result = _materialize(root, instance, key, "raw", "shards", "tokens")
    assert _written(root) == before, "nothing written"
    failure = _failure(result, "raw")
    assert len(failure.description.splitlines()) == 1
    assert f"partition {key!r} is not registered" in failure.description
    assert not instance.has_dynamic_partition("corpus_configs", key)  # does not linger
    skip = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(skip, dg.SkipReason)


def test_the_report_of_an_unsharded_partition_names_shards_first(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    key = driver.register(example, root, instance).partition_key
    assert _materialize(root, instance, key, "raw").success
    result = _materialize(root, instance, key, "report")
    failure = _failure(result, "report")
    assert failure.description.startswith("materialize shards first: no shards manifest at ")
    assert failure.metadata["upstream_missing"].value is True
    assert failure.metadata["exit_code"].value == 64
    skip = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(skip, dg.SkipReason)


def test_a_run_that_failed_in_its_report_step_keeps_its_whole_build(
    example: Path, root: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report step runs after the stages and checks: its failure leaves a whole build, which
    neither `corpus build` nor the sensors clean up."""

    def broken(*args: object) -> None:
        raise RuntimeError("the report broke")

    monkeypatch.setattr("corpus_assets.assets.report.report_metadata", broken)
    cfg, layout = load_config(example), Layout(root.resolve())
    result = driver.build(example, root, instance)  # compensating, as `corpus build` is
    assert result.exit_code != 0 and "the report broke" in result.summary["error"]
    stages = dict.fromkeys(("fetch", "shard", "tokenize"), "materialized")
    assert result.summary["stages"] == stages
    failed = instance.get_records_for_run(
        result.run_id, of_type=dg.DagsterEventType.STEP_FAILURE
    ).records
    assert [r.event_log_entry.step_key for r in failed] == ["report"]
    assert verify_path(layout.shards(cfg) / "_MANIFEST.json") == []
    assert verify_path(layout.tokens(cfg) / "_MANIFEST.json") == []
    assert cleanup_runs_of(instance, result.run_id) == []
    skip = _evaluate(
        corpus_cleanup_on_failure, instance, result.run_id, dg.DagsterEventType.RUN_FAILURE
    )
    assert isinstance(skip, dg.SkipReason) and "report step" in str(skip.skip_message)
