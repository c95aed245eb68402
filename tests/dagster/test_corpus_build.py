"""`corpus build` on the example: in-process on a real instance, then again as a no-op."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg
from support.corpus import own_instance_env, run_corpus

from corpus_assets.assets import checks
from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.resources.partitions import CORPUS_CONFIGS


def _materialized(instance: dg.DagsterInstance, asset: str, key: str) -> list[dg.EventLogRecord]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=10
    )
    return list(records.records)


def test_build_materializes_three_assets_with_checks(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    cfg = load_config(example)
    first = driver.build(example, root, instance)
    assert first.exit_code == 0, first.summary
    s = first.summary
    assert s["success"] is True
    assert s["partition_key"] == cfg.partition_key
    assert s["build_id"] == cfg.build_id
    assert s["stages"] == {
        "fetch": "materialized",
        "shard": "materialized",
        "tokenize": "materialized",
    }
    assert s["checks"] == dict.fromkeys(sorted(checks.CHECK_NAMES), "passed")
    assert s["documents"]["fetched"] == 321 and 0 < s["documents"]["out"] < 321
    assert s["tokens"] > 0
    assert verify_path(root / s["shards_manifest"]) == []
    assert verify_path(root / s["tokens_manifest"]) == []
    assert s["report"] == s["shards_manifest"].replace("_MANIFEST.json", "REPORT.md")
    assert cfg.partition_key in instance.get_dynamic_partitions(CORPUS_CONFIGS)

    shards = _materialized(instance, "shards", cfg.partition_key)
    assert len(shards) == 1
    meta = shards[0].asset_materialization.metadata  # type: ignore[union-attr]
    assert meta["dagster/row_count"].value == s["documents"]["out"]
    assert "documents_out" not in meta  # the documents kept, once: as the row count
    assert meta["build_id"].value == cfg.build_id
    assert meta["dropped"].value == sum(
        v.value for k, v in meta.items() if k.startswith("dropped_")
    )
    assert Path(str(meta["manifest"].value)) == root.resolve() / s["shards_manifest"]
    assert {
        "duplicates_exact",
        "duplicates_near",
        "partial_copies",
        "pii_email",
        "dedup_removed_share",
    } <= set(meta)

    start = time.monotonic()
    second = driver.build(example, root, instance)
    took = time.monotonic() - start
    assert second.exit_code == 0
    assert second.summary == first.summary, "a rebuild must print the same result"
    assert second.run_id != first.run_id
    cached = _materialized(instance, "shards", cfg.partition_key)[0]
    assert cached.asset_materialization.metadata["cached"].value is True  # type: ignore[union-attr]
    assert took < 30


def test_corpus_build_command(example: Path, root: Path) -> None:
    """The README's main command: JSON on stdout, one line on stderr, exit 0; bad config 64."""
    env_root = str(root)
    env = own_instance_env()
    done = run_corpus("build", example, "--root", env_root, environ=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["success"] is True
    [line] = done.stderr.splitlines()  # not a terminal: no progress, one line with the log
    assert line.startswith("[corpus] run ") and " succeeded in " in line, line
    log = Path(line.rsplit("full log: ", 1)[1])
    assert log.parent == root.resolve() / "logs" and log.is_file()
    assert "shard done" in log.read_text(encoding="utf-8"), "the log keeps the stages' progress"
    assert (root / "dagster" / "dagster.yaml").is_file()
    assert (root / result["tokens_manifest"]).is_file()

    bad = example.with_name("bad.json")
    bad.write_text('{"dataset": "x", "version": "v1", "tokenizer": {"id": "bytes"}, "dedupe": 1}')
    failed = run_corpus("build", bad, "--root", env_root, environ=env, timeout=120)
    assert failed.returncode == 64
    h = load_config(example).hash12
    assert sorted(p.name for p in (root / "configs").iterdir()) == [f"{h}.json", f"{h}.origin.json"]
    assert "unknown key 'dedupe'" in failed.stderr
