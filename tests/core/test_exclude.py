"""`[exclude]`: documents listed by id, or held (by id or exact text) by an earlier build."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_decontaminate import audit_records, prose, shard_ids, write_jsonl

from corpus_assets.core.config import load_config
from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.stages.preflight import preflight
from corpus_assets.core.stages.run import run_stage
from corpus_assets.core.store import registry
from corpus_assets.core.store.layout import Layout
from corpus_assets.resources.stage_report import summary_metadata


def config(folder: Path, name: str, docs: str, exclude: dict[str, Any] | None) -> Path:
    raw: dict[str, Any] = {
        "dataset": "rounds",
        "version": name,
        "tokenizer": {"id": "bytes"},
        "sources": [
            {"name": "docs", "kind": "jsonl", "path": docs, "id_field": "id", "license": "mit"}
        ],
        "dedup": {"near": False},
    }
    if exclude is not None:
        raw["exclude"] = exclude
    path = folder / f"{name}.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def build(cfg: Path, root: Path) -> dict[str, Any]:
    run_stage("fetch", cfg, root, workers=1)
    return run_stage("shard", cfg, root, workers=2)


@pytest.fixture
def rounds(tmp_path: Path) -> dict[str, Any]:
    """Round 1 built and registered; round 2's documents, each labelled with how it overlaps."""
    rng = random.Random(5)
    root = tmp_path / "root"
    first = [{"id": f"a-{i}", "text": prose(rng, 80)} for i in range(30)]
    write_jsonl(tmp_path / "round1.jsonl", first)
    cfg1 = config(tmp_path, "r1", "round1.jsonl", None)
    summary1 = build(cfg1, root)
    registry.register(cfg1, Layout(root))
    same_id = [{"id": f"a-{i}", "text": prose(rng, 80)} for i in range(5)]
    same_text = [
        {"id": f"b-{i}", "text": "  " + first[10 + i]["text"].replace(" ", "\n ")} for i in range(4)
    ]
    listed = [{"id": f"x-{i}", "text": prose(rng, 80)} for i in range(3)]
    new = [{"id": f"n-{i}", "text": prose(rng, 80)} for i in range(10)]
    write_jsonl(tmp_path / "round2.jsonl", same_id + same_text + listed + new)
    (tmp_path / "ids.txt").write_text("x-0\nx-1\n\nx-2\nnot-here\n", encoding="utf-8")
    return {
        "tmp": tmp_path,
        "root": root,
        "round1": summary1,
        "partition": load_config(cfg1).partition_key,
        "same_id": [d["id"] for d in same_id],
        "same_text": [d["id"] for d in same_text],
        "listed": [d["id"] for d in listed],
        "new": [d["id"] for d in new],
    }


@pytest.mark.parametrize("by", ["partition", "manifest"])
def test_exclusion_by_id_list_and_earlier_build(rounds: dict[str, Any], by: str) -> None:
    tmp: Path = rounds["tmp"]
    earlier = (
        {"name": "round1", "partition": rounds["partition"]}
        if by == "partition"
        else {"name": "round1", "manifest": f"root/{rounds['round1']['manifest']}"}
    )
    exclude = {"ids": [{"name": "blocklist", "path": "ids.txt"}], "builds": [earlier]}
    summary = build(config(tmp, "r2", "round2.jsonl", exclude), rounds["root"])
    kept = shard_ids(tmp, summary)
    assert set(kept) == set(rounds["new"])
    assert summary["excluded"] == {"blocklist": 3, "round1": 9}
    assert summary["dropped"]["excluded"] == 12
    manifest = json.loads((tmp / "root" / summary["manifest"]).read_text())
    assert manifest["exclusions"] == [
        {"name": "blocklist", "kind": "ids", "entries": 4, "documents": 3},
        {"name": "round1", "kind": "build", "entries": 30, "documents": 9},
    ]
    records = {r["id"]: r for r in audit_records(tmp, summary)}
    assert {i: (r["reason"], r["list"], r["by"]) for i, r in records.items()} == {
        **{i: ("excluded", "round1", "id") for i in rounds["same_id"]},
        **{i: ("excluded", "round1", "text") for i in rounds["same_text"]},
        **{i: ("excluded", "blocklist", "id") for i in rounds["listed"]},
    }
    md = summary_metadata(summary, rounds["root"])  # what the shards materialization shows
    assert md["excluded_round1"] == {"raw_value": 9, "type": "int"}  # numbers Dagster plots
    assert md["excluded_blocklist"] == {"raw_value": 3, "type": "int"}
    assert md["dropped_excluded"] == {"raw_value": 12, "type": "int"}


def test_bad_exclusions_fail_preflight(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": "x"}])
    exclude = {
        "ids": [{"name": "gone", "path": "missing.txt"}],
        "builds": [{"name": "old", "partition": "not a key"}],
    }
    with pytest.raises(ConfigError) as caught:
        preflight(load_config(config(tmp_path, "v", "d.jsonl", exclude)))
    assert "exclude list 'gone': file not found:" in str(caught.value)
    assert "exclude build 'old': 'not a key' is not a corpus partition key" in str(caught.value)
    with pytest.raises(ConfigError, match="set exactly one of manifest"):
        load_config(config(tmp_path, "v", "d.jsonl", {"builds": [{"name": "old"}]}))
    with pytest.raises(ConfigError, match="exclude list names must be unique; repeated: a"):
        load_config(
            config(
                tmp_path,
                "v",
                "d.jsonl",
                {"ids": [{"name": "a", "path": "x"}], "builds": [{"name": "a", "partition": "k"}]},
            )
        )


def test_an_earlier_build_that_does_not_verify_is_bad_data(rounds: dict[str, Any]) -> None:
    tmp: Path = rounds["tmp"]
    shard_file = next((rounds["root"] / rounds["round1"]["manifest"]).parent.glob("shard-*"))
    shard_file.write_bytes(shard_file.read_bytes() + b"x")
    exclude = {"builds": [{"name": "round1", "partition": rounds["partition"]}]}
    with pytest.raises(DataError, match=r"exclude build 'round1': .* does not verify"):
        build(config(tmp, "r2", "round2.jsonl", exclude), rounds["root"])
