"""Failures compensate: one cleanup, partial outputs gone, raw and old builds kept.

Cancels during the real shard and tokenize stages: test_fault_cleanup.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import tomllib
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import unlicensed, wrapped
from fault_support import (
    launch_cleanups,
    materializations,
    messages,
    runs_of,
    sensor_requests,
    step_events,
)

from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.layout import Layout
from corpus_assets.jobs import CLEANUP_JOB
from corpus_assets.resources.retries import FETCH_RETRY
from corpus_assets.resources.stage_runner import StageRunner
from corpus_assets.sensors.cleanup import COMPENSATED_BY_TAG


def _assert_cleaned(
    instance: dg.DagsterInstance, root: Path, config: Path, failed_run_id: str
) -> None:
    """Exactly one cleanup for the run, no shards/tokens/staging left, raw kept, not materialized
    (the partition reads FAILED: tests/dagster/test_failure_states.py)."""
    cfg, layout = load_config(config), Layout(root.resolve())
    cleanups = runs_of(instance, CLEANUP_JOB)
    assert [r.tags["corpus/cleanup_of"] for r in cleanups] == [failed_run_id]
    assert cleanups[0].status == dg.DagsterRunStatus.SUCCESS
    assert not layout.shards(cfg).exists() and not layout.tokens(cfg).exists()
    assert not (layout.root / "work" / cfg.hash12).exists()
    assert any(layout.raw.glob("tiny-*/_SOURCE.json")), "the raw cache must be kept"
    for asset in ("shards", "tokens"):
        assert materializations(instance, asset, cfg.partition_key) == []
        assert cfg.partition_key not in instance.get_materialized_partitions(dg.AssetKey(asset))
    assert cfg.partition_key in instance.get_materialized_partitions(dg.AssetKey("raw"))


def _sensors_add_nothing(
    instance: dg.DagsterInstance, root: Path, run_id: str
) -> list[dg.RunRequest | dg.SkipReason]:
    """Both cleanup sensors, evaluated twice as repeated ticks would be, see the cleanup that
    `corpus build` ran and ask for none; launching what they answer adds no run."""
    answers = sensor_requests(instance, run_id) + sensor_requests(instance, run_id)
    assert answers and all(isinstance(a, dg.SkipReason) for a in answers), answers
    assert all("already has cleanup run" in str(a.skip_message) for a in answers), answers
    launch_cleanups(answers, root, instance)
    return answers


def test_failed_stage_compensates(example: Path, root: Path, instance: dg.DagsterInstance) -> None:
    config = unlicensed(example)
    result = driver.build(config, root, instance)
    assert result.exit_code == 65
    assert step_events(instance, result.run_id, "shards").count("STEP_START") == 1
    assert "STEP_UP_FOR_RETRY" not in step_events(instance, result.run_id, "shards")
    [failure] = instance.get_records_for_run(
        result.run_id, of_type=dg.DagsterEventType.STEP_FAILURE
    ).records
    event = failure.event_log_entry.dagster_event
    assert event is not None
    description = str(event.step_failure_data.user_failure_data.description)  # type: ignore[union-attr]
    assert "exit 65" in description
    assert "source 'tiny'" in description and "license 'proprietary'" in description
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
    _sensors_add_nothing(instance, root, result.run_id)
    _assert_cleaned(instance, root, config, result.run_id)


@pytest.mark.parametrize("compensate", [True, False], ids=["by corpus build", "by the sensors"])
def test_a_stage_that_fails_after_writing_is_cleaned_up(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path, compensate: bool
) -> None:
    """The tokenize stage writes and publishes the token files, then exits 65: the build's shards
    and tokens really existed when the run failed, and its one cleanup removes every one."""
    state = tmp_path / "state"
    runner = wrapped(state, "fail-after=65", stage="tokenize")
    result = driver.build(example, root, instance, stage_runner=runner, compensate=compensate)
    assert result.exit_code == 65
    published = json.loads((state / "published.json").read_text())
    written = [Path(p) for p in published["shards"] + published["tokens"]]
    assert [p.name for p in written].count("_MANIFEST.json") == 2, published
    assert any(p.suffix == ".parquet" for p in written) and len(published["tokens"]) > 1
    if not compensate:  # nothing is removed until the sensors' cleanup runs
        assert all(p.is_file() for p in written)
        launch_cleanups(sensor_requests(instance, result.run_id), root, instance)
    assert [p for p in written if p.exists()] == []
    _assert_cleaned(instance, root, example, result.run_id)


def test_sensors_leave_a_claimed_run_to_its_build(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    """While the `corpus build` that ran a run holds its claim, the sensors launch nothing for
    it; once the claim is free (that build died), they clean up."""
    result = driver.build(unlicensed(example), root, instance, compensate=False)
    assert result.exit_code == 65 and runs_of(instance, CLEANUP_JOB) == []
    claim = tmp_path / "claim.lock"
    instance.add_run_tags(result.run_id, {COMPENSATED_BY_TAG: str(claim)})
    fd = os.open(claim, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        [held] = sensor_requests(instance, result.run_id)
        assert isinstance(held, dg.SkipReason), held
        assert "cleaned up by the `corpus build` that ran it" in str(held.skip_message)
    finally:
        os.close(fd)
    [free] = sensor_requests(instance, result.run_id)
    assert isinstance(free, dg.RunRequest) and free.run_key == result.run_id


@pytest.mark.timeout(240)
def test_fetch_failure_needs_no_cleanup(
    example: Path,
    root: Path,
    instance: dg.DagsterInstance,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real fetch retry policy (its tries, backoff and jitter) on a short base delay."""
    good = driver.build(example, root, instance)
    assert good.exit_code == 0, good.summary
    layout = Layout(root.resolve())
    kept = {
        m: (root / good.summary[m]).read_bytes() for m in ("shards_manifest", "tokens_manifest")
    }

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    spec = tomllib.loads(example.read_text(encoding="utf-8"))
    spec["sources"] = [
        {"name": "hub", "kind": "hf", "path": "nobody/no-such-dataset", "license": "cc0-1.0"}
    ]
    hub = example.with_name("hub.json")
    hub.write_text(json.dumps(spec), encoding="utf-8")
    base = 0.05
    runner = StageRunner(fetch_retry_delay_s=base)
    result = driver.build(hub, root, instance, stage_runner=runner)
    assert result.exit_code == 75, result.summary
    events = step_events(instance, result.run_id, "raw")
    assert events.count("STEP_UP_FOR_RETRY") == FETCH_RETRY.max_retries
    waits = _retry_waits(instance, result.run_id, "raw")
    for attempt, wait in enumerate(waits, start=1):  # exponential, +-1 base of jitter
        assert ((2**attempt) - 2) * base <= wait <= (2**attempt) * base, waits
    assert events.count("STEP_FAILURE") == 1 and events[-1] == "STEP_FAILURE"
    assert "STEP_START" not in step_events(instance, result.run_id, "shards")
    assert any("exit 75 (transient)" in m for m in messages(instance, result.run_id))

    answers = sensor_requests(instance, result.run_id)
    assert answers and all(isinstance(a, dg.SkipReason) for a in answers), answers
    launch_cleanups(answers, root, instance)
    assert runs_of(instance, CLEANUP_JOB) == []
    for manifest, data in kept.items():
        path = root / good.summary[manifest]
        assert path.read_bytes() == data and verify_path(path) == []
    assert good.summary["partition_key"] in instance.get_materialized_partitions(
        dg.AssetKey("tokens")
    )
    assert not any(layout.raw.glob("hub-*")), "a failed fetch published a raw folder"


def _retry_waits(instance: dg.DagsterInstance, run_id: str, step: str) -> list[float]:
    """The seconds each retry of `step` was told to wait."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY
    ).records
    waits = []
    for record in records:
        event = record.event_log_entry.dagster_event
        assert event is not None and event.step_key == step
        waits.append(float(event.event_specific_data.seconds_to_wait))  # type: ignore[union-attr]
    return waits


@pytest.mark.timeout(180)
def test_hung_stage_gives_up_and_compensates(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    """A tokenize stage that never reports is stopped after each heartbeat timeout, retried by
    its policy, then the run fails and is cleaned up (stall-once is in tests/dagster)."""
    runner = wrapped(
        tmp_path / "w", "stall=300", "tokenize", heartbeat_timeout_s=4.0, termination_timeout_s=2
    )
    start = time.monotonic()
    result = driver.build(example, root, instance, stage_runner=runner)
    took = time.monotonic() - start
    assert result.exit_code == 75, result.summary  # a hung stage is transient
    assert took < 60, f"a hung stage held the run for {took:.0f} s"
    attempts = int((tmp_path / "w" / "tokenize.attempts").read_text())
    assert attempts == 1 + 2, "tokenize: one try plus its policy's retries"
    events = step_events(instance, result.run_id, "tokens")
    assert events.count("STEP_UP_FOR_RETRY") == 2 and events[-1] == "STEP_FAILURE"
    assert "(heartbeat timeout); stopped, no tries left" in result.summary["error"]
    _sensors_add_nothing(instance, root, result.run_id)
    _assert_cleaned(instance, root, example, result.run_id)
