"""With `[filters] languages`, phase 3 as one task per shard (what Ray runs) writes the bytes and
the language counts of the streamed writer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
from support.corpus import run_corpus

from corpus_assets.core.config import load_config
from corpus_assets.core.stages.shard import check_sources
from corpus_assets.core.stages.shard_dedup import duplicates
from corpus_assets.core.stages.shard_tasks import plan_tasks, run_tasks
from corpus_assets.core.stages.shard_write_tasks import plan_shards, write_shard
from corpus_assets.core.stages.shard_writer import shard_schema, write_shards
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Progress, silent

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
LINES = {
    "en": "The boat {n} carried grain down the river to the town below the green hills.",
    "fr": "Le bateau {n} portait le grain sur la rivière vers la ville sous les collines vertes.",
    "de": "Das Boot {n} brachte das Getreide den Fluss hinunter in die Stadt unter den Hügeln.",
}
TAIL = {"en": " It was trip {n}.", "fr": " C'était le voyage {n}.", "de": " Es war die Fahrt {n}."}


def test_planned_shards_carry_the_language_columns_and_counts(tmp_path: Path) -> None:
    docs = [
        LINES[code].format(n=n) + TAIL[code].format(n=n) * (n % 3 + 1)
        for n in range(60)
        for code in ("en", "fr", "de")
        if not (code == "de" and n % 2)
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text(
        'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
        '[[sources]]\nname = "d"\nkind = "jsonl"\npath = "in.jsonl"\nlicense = "mit"\n'
        "[licenses]\nallow = ['mit']\n[dedup]\nnear = false\n"
        '[filters]\nlanguages = ["en", "fr"]\n[shards]\ntarget_mb = 0.002\n',
        encoding="utf-8",
    )
    root = tmp_path / "root"
    run_corpus("run", "--stage", "fetch", "--config", cfg_path, "--root", root, environ=ENV)
    cfg, layout, progress = load_config(cfg_path), Layout(root), Progress("shard", silent)
    task_dir = tmp_path / "tasks"
    tasks = plan_tasks(layout, check_sources(cfg, layout))
    outputs = run_tasks(cfg, layout, tasks, task_dir, 1, progress)
    assert sum(o.dropped.get("language", 0) for o in outputs) == 30
    dedup = duplicates(cfg, outputs, task_dir, progress)
    drop = dedup.exact | dedup.near
    streamed, planned = tmp_path / "streamed", tmp_path / "planned"
    streamed.mkdir()
    planned.mkdir()
    entries, totals = write_shards(cfg, outputs, task_dir, drop, dedup.partial, streamed, progress)
    assert totals["languages"] == {"en": 60, "fr": 60} and len(entries) > 2
    plans = plan_shards(outputs, task_dir, drop, dedup.partial, 2000, progress)
    schema = shard_schema(cfg)
    results = [write_shard(plan, 2000, str(task_dir), str(planned), schema) for plan in plans]
    assert [r[0] for r in results] == entries
    langs: dict[str, int] = {}
    for r in results:
        for k, v in r[4].items():
            langs[k] = langs.get(k, 0) + v
    assert langs == totals["languages"]
    first = pq.read_table(planned / entries[0]["name"])
    assert first.column_names[-2:] == ["language", "language_score"]
