"""End to end with the daemon: a CLI run whose blocking check fails is cleaned up exactly once."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import WRAPPER
from support.dagster import DagsterDev
from support.sensors import ticks_after
from support.waiting import wait_for

from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout
from corpus_assets.sensors.cleanup import CLEANUP_OF_TAG, FAILURE_SENSOR


@pytest.mark.timeout(600)
def test_failed_cli_run_is_cleaned_up_once(dagster_dev: DagsterDev, tmp_path: Path) -> None:
    config = dagster_dev.example
    key = dagster_dev.register(config)
    cfg = load_config(config)
    layout = Layout(dagster_dev.root.resolve())
    command = [
        sys.executable,
        str(WRAPPER),
        "--state",
        str(tmp_path / "w"),
        "--mode",
        "corrupt-shard",
        "--stage",
        "shard",
        "--",
    ]
    run_config = tmp_path / "run_config.json"
    run_config.write_text(
        json.dumps({"resources": {"stage_runner": {"config": {"command": command}}}})
    )
    done = dagster_dev.dagster(
        "job", "execute", "-m", "corpus_assets.definitions", "-j", "corpus_build",
        "--tags", json.dumps({"dagster/partition": key}), "-c", str(run_config), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0, "the blocking check should fail the run"
    assert layout.shards(cfg).exists()

    with dagster_dev.instance() as instance:
        failed = [
            r
            for r in instance.get_runs()
            if r.status == dg.DagsterRunStatus.FAILURE and r.tags.get("dagster/partition") == key
        ]
        assert len(failed) == 1
        failed_id = failed[0].run_id

        def cleanup_runs() -> list[dg.DagsterRun]:
            return list(instance.get_runs(filters=dg.RunsFilter(tags={CLEANUP_OF_TAG: failed_id})))

        runs = wait_for(
            lambda: [r for r in cleanup_runs() if r.status == dg.DagsterRunStatus.SUCCESS],
            240,
            "the cleanup run",
            every=2.0,
        )
        assert not layout.shards(cfg).exists()
        assert any(layout.raw.glob("tiny-*/_SOURCE.json"))
        assert key not in instance.get_materialized_partitions(dg.AssetKey("shards"))
        ended = time.time()  # the cleanup run was seen SUCCESS: it ended before this
        # two ticks of the failure sensor that began after the cleanup ended: still one cleanup
        wait_for(
            lambda: len(ticks_after(instance, FAILURE_SENSOR, ended)) >= 2, 120, "2 ticks", 1.0
        )
        assert len(cleanup_runs()) == 1 == len(runs), "one cleanup per failed run"
