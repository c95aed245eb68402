"""A build with `[decontaminate]` and `[exclude]`: counts in the shards materialization, check."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
from dagster_support import variant

from corpus_assets.assets import checks
from corpus_assets.build import driver


def test_screen_counts_show_on_the_shards_materialization(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    folder = example.parent
    docs = [json.loads(line) for line in (folder / "tiny" / "docs.jsonl").open(encoding="utf-8")]
    # the eval item is the first sentences of one story; two stories are on an exclusion list
    item = {"id": "q1", "question": " ".join(docs[3]["text"].split()[:20])}
    (folder / "evals.jsonl").write_text(json.dumps(item) + "\n", encoding="utf-8")
    (folder / "ids.txt").write_text(f"{docs[5]['id']}\n{docs[6]['id']}\n", encoding="utf-8")
    config = variant(
        example,
        "screened",
        decontaminate={"sets": [{"name": "evals", "path": "evals.jsonl", "fields": ["question"]}]},
        exclude={"ids": [{"name": "used", "path": "ids.txt"}]},
    )
    result = driver.build(config, root, instance)
    assert result.exit_code == 0, result.summary
    assert result.summary["checks"][checks.SHARDS_DECONTAMINATED] == "passed"
    key = result.summary["partition_key"]
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("shards"), asset_partitions=[key]), limit=1
    ).records
    materialization = records[0].asset_materialization
    assert materialization is not None
    md = {k: v.value for k, v in materialization.metadata.items()}
    assert md["contaminated_evals"] >= 1 and md["excluded_used"] == 2  # counts as numbers
    assert md["dropped_excluded"] == 2 and md["dropped_contaminated"] == md["contaminated_evals"]
