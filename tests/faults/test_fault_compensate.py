"""Failures and cancels compensate: one cleanup, partial outputs gone, raw and old builds kept."""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import unlicensed, wrapped
from fault_support import (
    cancel_when_started,
    launch_cleanups,
    materializations,
    messages,
    runs_of,
    sensor_requests,
    step_events,
)

from corpus_assets import dagster_build
from corpus_assets.assets.raw import raw
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.layout import Layout
from corpus_assets.jobs import CLEANUP_JOB


def _assert_cleaned(
    instance: dg.DagsterInstance, root: Path, config: Path, failed_run_id: str
) -> None:
    """Exactly one cleanup for the run, no shards/tokens/staging left, raw kept, shown missing."""
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


def _sensors_then_cleanup(
    instance: dg.DagsterInstance, root: Path, run_id: str
) -> list[dg.RunRequest | dg.SkipReason]:
    """Evaluate both cleanup sensors twice (as repeated ticks would), launch what they ask."""
    answers = sensor_requests(instance, run_id) + sensor_requests(instance, run_id)
    requests = [a for a in answers if isinstance(a, dg.RunRequest)]
    assert {r.run_key for r in requests} == {run_id}, answers
    launch_cleanups(answers, root, instance)
    launch_cleanups(answers, root, instance)  # a second tick's request is de-duplicated
    return answers


@pytest.mark.timeout(180)
@pytest.mark.parametrize("stage", ["shard", "tokenize"])
def test_cancel_deletes_partial_outputs(
    stage: str, example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    runner = wrapped(tmp_path / "w", "stall=120", stage, termination_timeout_s=3.0)
    step = {"shard": "shards", "tokenize": "tokens"}[stage]
    watcher = cancel_when_started(instance, step, after_s=1.0)
    start = time.monotonic()
    result = dagster_build.build(example, root, instance, stage_runner=runner)
    watcher.join(timeout=5)
    assert time.monotonic() - start < 60, "the stalled stage was not stopped"
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.CANCELED
    assert (tmp_path / "w" / f"{stage}.attempts").read_text() == "1", "a cancel is not retried"
    cfg = load_config(example)
    if stage == "tokenize":
        assert Layout(root.resolve()).shards(cfg).exists()  # there was something to delete
    _sensors_then_cleanup(instance, root, result.run_id)
    _assert_cleaned(instance, root, example, result.run_id)


def test_failed_stage_compensates(example: Path, root: Path, instance: dg.DagsterInstance) -> None:
    config = unlicensed(example)
    result = dagster_build.build(config, root, instance)
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
    _sensors_then_cleanup(instance, root, result.run_id)
    _assert_cleaned(instance, root, config, result.run_id)


@pytest.fixture
def quick_fetch_retries() -> Iterator[dg.RetryPolicy]:
    """The fetch policy with the same shape but sub-second delays (the real one waits ~1 min)."""
    real = raw.op.retry_policy
    assert real is not None and real.backoff == dg.Backoff.EXPONENTIAL
    quick = dg.RetryPolicy(max_retries=3, delay=0.3, backoff=dg.Backoff.EXPONENTIAL)
    raw.op._retry_policy = quick  # fixed at definition time
    try:
        yield quick
    finally:
        raw.op._retry_policy = real


@pytest.mark.timeout(240)
def test_fetch_failure_needs_no_cleanup(
    example: Path,
    root: Path,
    instance: dg.DagsterInstance,
    tmp_path: Path,
    quick_fetch_retries: dg.RetryPolicy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = dagster_build.build(example, root, instance)
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
    result = dagster_build.build(hub, root, instance)
    assert result.exit_code == 75, result.summary
    events = step_events(instance, result.run_id, "raw")
    assert events.count("STEP_UP_FOR_RETRY") == quick_fetch_retries.max_retries
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


@pytest.mark.timeout(180)
def test_hung_stage_gives_up_and_compensates(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    """A tokenize stage that never reports is stopped after each heartbeat timeout, retried by
    its policy, then the run fails and is cleaned up (stall-once is in tests/dagster)."""
    runner = wrapped(
        tmp_path / "w", "stall=300", "tokenize", heartbeat_timeout_s=1.5, termination_timeout_s=2
    )
    start = time.monotonic()
    result = dagster_build.build(example, root, instance, stage_runner=runner)
    took = time.monotonic() - start
    assert result.exit_code == 1, result.summary
    assert took < 60, f"a hung stage held the run for {took:.0f} s"
    attempts = int((tmp_path / "w" / "tokenize.attempts").read_text())
    assert attempts == 1 + 2, "tokenize: one try plus its policy's retries"
    events = step_events(instance, result.run_id, "tokens")
    assert events.count("STEP_UP_FOR_RETRY") == 2 and events[-1] == "STEP_FAILURE"
    assert "heartbeat timeout" in result.summary["error"]
    _sensors_then_cleanup(instance, root, result.run_id)
    _assert_cleaned(instance, root, example, result.run_id)
