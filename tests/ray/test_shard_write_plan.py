"""Phase 3 as one task per shard (what Ray runs) writes the bytes the streamed writer writes.

Run in this process, without Ray, over the task files of a real phase 1 and 2, for shard
targets that cut inside tasks and inside row groups, and for one shard of everything.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ray_support import corpus, ray_env, tree, write_config

from corpus_assets.core.config import load_config
from corpus_assets.core.stages.shard import check_sources
from corpus_assets.core.stages.shard_dedup import duplicates
from corpus_assets.core.stages.shard_tasks import plan_tasks, run_tasks
from corpus_assets.core.stages.shard_write_tasks import plan_shards, write_shard
from corpus_assets.core.stages.shard_writer import write_shards
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Progress, silent


@pytest.mark.parametrize("target_mb", [0.03, 0.2, 100.0])
def test_planned_shards_match_the_streamed_ones(
    tmp_path: Path, bench_corpus: Path, target_mb: float
) -> None:
    path = write_config(tmp_path, bench_corpus)
    doc = json.loads(path.read_text())
    doc["shards"] = {"target_mb": target_mb}
    path.write_text(json.dumps(doc))
    root = tmp_path / "root"
    corpus(
        ray_env(tmp_path, tmp_path),
        "run",
        "--stage",
        "fetch",
        "--config",
        str(path),
        "--root",
        str(root),
    )
    cfg, layout, progress = load_config(path), Layout(root), Progress("shard", silent)
    task_dir = tmp_path / "tasks"
    outputs = run_tasks(
        cfg, layout, plan_tasks(layout, check_sources(cfg, layout)), task_dir, 1, progress
    )
    dedup = duplicates(cfg, outputs, task_dir, progress)
    drop = dedup.exact | dedup.near
    assert dedup.partial, "the corpus has partial copies: their new texts are planned too"
    streamed, planned = tmp_path / "streamed", tmp_path / "planned"
    streamed.mkdir()
    planned.mkdir()
    entries, totals = write_shards(cfg, outputs, task_dir, drop, dedup.partial, streamed, progress)
    target = int(target_mb * 1_000_000)
    plans = plan_shards(outputs, task_dir, drop, dedup.partial, target, progress)
    results = [write_shard(plan, target, str(task_dir), str(planned)) for plan in plans]
    assert [r[0] for r in results] == entries
    assert sum(r[1] for r in results) == totals["documents"]
    assert sum(r[2] for r in results) == totals["text_bytes"]
    assert {k: sum(r[3][k] for r in results) for k in totals["pii"]} == totals["pii"]
    assert tree(planned) == tree(streamed)
    if target_mb < 1:
        assert len(entries) > len(outputs)  # shards cut inside tasks
    else:
        assert len(entries) == 1
