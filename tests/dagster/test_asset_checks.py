"""Asset checks: a corrupted shard fails the blocking check and stops tokens."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from dagster_support import wrapped

from corpus_assets.assets import checks
from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout


def test_corrupted_shard_fails_blocking_check_and_stops_tokens(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    cfg = load_config(example)
    result = driver.build(
        example,
        root,
        instance,
        stage_runner=wrapped(tmp_path / "wrapper", "corrupt-shard", "shard"),
    )
    s = result.summary
    assert result.exit_code == 65, s
    assert s["success"] is False
    assert s["stages"] == {"fetch": "materialized", "shard": "materialized", "tokenize": "skipped"}
    assert s["checks"][checks.SHARDS_MANIFEST_VALID] == "failed"
    assert s["checks"][checks.TOKENS_MANIFEST_VALID] == "not run"
    assert not Layout(root.resolve()).tokens(cfg).exists()
    assert "shards_manifest_valid" in s["error"]

    # The cleanup forgets the partition's check results (its files are gone: the partition reads
    # Failed, see test_failure_states.py); the failed evaluation stays in the run's event log.
    key = dg.AssetCheckKey(dg.AssetKey("shards"), checks.SHARDS_MANIFEST_VALID)
    assert instance.event_log_storage.get_asset_check_execution_history(key, limit=5) == []
    [run] = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": cfg.partition_key}))
    evaluations = [
        e.dagster_event.event_specific_data
        for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        if e.dagster_event is not None
        and e.dagster_event.event_specific_data.check_name == checks.SHARDS_MANIFEST_VALID  # type: ignore[union-attr]
    ]
    [evaluation] = evaluations
    assert evaluation.passed is False  # type: ignore[union-attr]
    assert evaluation.partition == cfg.partition_key  # type: ignore[union-attr]
    assert "sha256 differs" in evaluation.metadata["problems"].value  # type: ignore[union-attr]
