"""What the assets tell a person in the UI: the config, the inputs, the files, code versions."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_support import variant

from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.definitions import defs
from corpus_assets.resources.stage_report import human_size

PLOT = re.compile(r"!\[([^\]]*)\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)")


def _latest(instance: dg.DagsterInstance, asset: str, key: str) -> dict[str, Any]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    materialization = records[0].asset_materialization
    assert materialization is not None
    return {k: v.value for k, v in materialization.metadata.items()}


def _observed(instance: dg.DagsterInstance, asset: str, key: str) -> dict[str, Any]:
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    observation = records[0].asset_observation
    assert observation is not None
    return {k: v.value for k, v in observation.metadata.items()}


def test_materializations_carry_config_sources_files_and_schema(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    result = driver.build(example, root, instance)
    assert result.exit_code == 0, result.summary
    cfg = load_config(example)
    key, layout = cfg.partition_key, Layout(root.resolve())
    raw = _latest(instance, "raw", key)
    assert json.loads(raw["config"].split("\n", 1)[1].rsplit("```", 1)[0]) == json.loads(
        cfg.canonical
    )
    (source,) = raw["sources"].records
    record = json.loads(next(layout.raw.glob("tiny-*/_SOURCE.json")).read_text())
    assert source.data["name"] == "tiny" and source.data["license"] == "cc0-1.0"
    assert source.data["path"] == "tiny/docs.jsonl"
    assert source.data["input_sha256"] == record["input_sha256"]
    assert source.data["documents"] == raw["dagster/row_count"] == 321
    assert source.data["text_bytes"] == raw["text_bytes"] == record["text_bytes"]
    assert (
        raw["summary"]
        == f"**321** documents, {human_size(raw['text_bytes'])} of text, from 1 source"
    )

    # The build id in one row; the stage, its key and the partition are said by the page itself.
    for asset in ("raw", "shards", "tokens"):
        shown = _latest(instance, asset, key)
        named = [k for k, v in shown.items() if cfg.build_id in str(v) and k != "manifest"]
        assert named == ["build_id"], asset  # (the manifest's path has it as folders)
        assert not {"stage", "stage_key", "partition_key", "build"} & set(shown), asset

    shards = _latest(instance, "shards", key)
    manifest = layout.shards(cfg) / "_MANIFEST.json"
    doc = json.loads(manifest.read_text())
    assert shards["manifest_sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    rows = [r.data for r in shards["files"].records]
    assert [(r["name"], r["documents"], r["bytes"], r["sha256"]) for r in rows] == [
        (s["name"], s["rows"], s["bytes"], s["sha256"]) for s in doc["shards"]
    ]
    assert [c.name for c in shards["dagster/column_schema"].columns] == [
        "id",
        "text",
        "source",
        "license",
    ]
    # every count and size a number, once: the documents kept are the row count
    assert shards["dagster/row_count"] == doc["documents_out"] == 300
    assert "documents_out" not in shards
    assert shards["documents_in"] == doc["documents_in"] == 321
    assert shards["text_bytes_out"] == doc["text_bytes_out"]
    assert shards["files_bytes"] == sum(s["bytes"] for s in doc["shards"])
    assert shards["dropped"] == sum(doc["dropped"].values()) == 4
    assert {k: v for k, v in shards.items() if k.startswith("dropped_")} == {
        f"dropped_{reason}": n for reason, n in doc["dropped"].items()
    }
    removed = sum(doc["duplicates"].values())
    assert shards["duplicates_exact"] + shards["duplicates_near"] == removed == 17
    assert shards["dedup_removed_share"] == round(removed / (300 + removed), 6)
    assert shards["summary"] == (
        "**300** documents kept of 321: 4 dropped by the filters, 17 duplicates removed "
        f"(5.4 %); {human_size(doc['text_bytes_out'])} of text in 3 shards "
        f"({human_size(shards['files_bytes'])} on disk)"
    )
    tokens = _latest(instance, "tokens", key)
    token_rows = [r.data for r in tokens["files"].records]
    assert {r["name"].rsplit(".", 1)[1] for r in token_rows} == {"bin", "idx"}
    bins = [r for r in token_rows if r["name"].endswith(".bin")]
    assert tokens["tokens"] == sum(r["tokens"] for r in bins) >= 1000
    assert tokens["dagster/row_count"] == 300 and "documents" not in tokens
    idx = [r for r in token_rows if r["name"].endswith(".idx")]
    assert idx and all(r["tokens"] is None and r["documents"] is None for r in idx)
    assert [(c.name, c.type) for c in tokens["dagster/column_schema"].columns] == [
        ("tokens", f"{tokens_manifest_dtype(layout, cfg)}[]"),
        ("end", "uint64"),
    ]
    assert "EOS (256) last" in str(tokens["dagster/column_schema"].columns[0].description)
    assert not {"dtype", "eos_id"} & set(tokens)  # the schema says them
    tokens_doc = json.loads((layout.tokens(cfg) / "_MANIFEST.json").read_text())
    assert tokens["files_bytes"] == sum(f["bytes"] for f in tokens_doc["files"])
    assert tokens["summary"] == (
        f"**{tokens['tokens']:,}** tokens in 300 documents from 3 shards "
        f"({human_size(tokens['files_bytes'])} on disk)"
    )

    # The build report with its plots inlined: on the report asset and, observed, on shards; no
    # stage step draws it.
    assert "report" not in shards and "report" not in tokens
    folder = layout.shards(cfg)
    made = _latest(instance, "report", key)
    plots = PLOT.findall(made["report"])
    assert [title for title, _ in plots] == [
        "Document length before and after filtering",
        "Drops by filter reason",
        "Duplicates",
        "PII by kind",
        "Tokens per document",
    ]
    assert base64.b64decode(plots[1][1]) == (folder / "report_drops.png").read_bytes()
    assert base64.b64decode(plots[4][1]) == (folder / "report_tokens.png").read_bytes()
    assert '"license": "cc0-1.0"' in made["report"]  # the config, as the manifest holds it
    assert 100_000 <= len(made["report"].encode()) <= 130_000  # README: "100-130 KB"
    assert made["report_path"] == str(folder / "REPORT.md")
    assert "![Tokens per document](report_tokens.png)" in (folder / "REPORT.md").read_text()
    assert _observed(instance, "shards", key) == made

    # A no-op rebuild shows the same report without drawing it again.
    drawn = (folder / "REPORT.md").stat().st_ino
    assert driver.build(example, root, instance).exit_code == 0
    assert (folder / "REPORT.md").stat().st_ino == drawn
    assert _latest(instance, "report", key)["report"] == made["report"]
    assert _observed(instance, "shards", key)["report"] == made["report"]


def tokens_manifest_dtype(layout: Layout, cfg: Any) -> str:
    return str(json.loads((layout.tokens(cfg) / "_MANIFEST.json").read_text())["dtype"])


def test_human_sizes() -> None:
    assert [human_size(n) for n in (0, 1023, 1024, 118_980, 5 * 2**20, 3 * 2**40)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "116.2 KiB",
        "5.0 MiB",
        "3.0 TiB",
    ]


def test_every_asset_has_a_code_version_and_every_sensor_and_job_a_description() -> None:
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        assert defs.resolve_assets_def(key).code_versions_by_key[key] == CODE_VERSION, key
        assert graph.get(key).owners == ["team:corpus"], key
    for name in ("shards", "tokens"):  # where to re-run checks the UI cannot execute alone
        assert "corpus_recheck" in str(graph.get(dg.AssetKey(name)).description), name
    for check in graph.asset_check_keys:
        description = graph.get_check_spec(check).description
        if check.asset_key.path[0] in ("shards", "tokens"):
            assert "corpus_recheck" in str(description), check
    for sensor in ("corpus_config_sensor", "corpus_cleanup_on_failure"):
        assert defs.resolve_sensor_def(sensor).description
    for sensor in ("corpus_cleanup_on_cancel", "corpus_dead_runs"):
        assert defs.resolve_sensor_def(sensor).description
    for job in ("corpus_build", "task_build", "corpus_cleanup", "corpus_recheck"):
        assert defs.resolve_job_def(job).description


def test_a_report_that_cannot_be_made_says_why_and_fails_nothing(example: Path, root: Path) -> None:
    from corpus_assets.assets.report_page import report_metadata

    context = dg.build_asset_context()
    got = report_metadata(context, load_config(example), Layout(root))  # nothing built there
    assert set(got) == {"report"}
    assert str(got["report"].value).startswith("not written: ")
    assert "not a build" in str(got["report"].value)


NUMBERS = (dg.IntMetadataValue, dg.FloatMetadataValue)
PLOTTED = {
    "raw": {"dagster/row_count", "text_bytes"},
    "shards": {
        "dagster/row_count",
        "documents_in",
        "dropped",
        "duplicates_exact",
        "duplicates_near",
        "pii_email",
        "shards",
        "text_bytes_out",
        "files_bytes",
        "dedup_removed_share",
    },
    "tokens": {"dagster/row_count", "tokens", "shards", "files_bytes"},
}


def test_two_builds_give_each_count_a_plottable_series(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    """The Plots tab charts the numeric metadata of an asset's materializations: both builds'
    counts, sizes and ratios are numbers under the same keys, and they differ where the builds
    do."""
    strict = variant(example, "strict", version="strict", filters={"min_words": 75})
    for config in (example, strict):
        assert driver.build(config, root, instance).exit_code == 0
    for asset, keys in PLOTTED.items():
        records = instance.fetch_materializations(dg.AssetKey(asset), limit=10).records
        assert len(records) == 2, asset
        series = []
        for record in records:
            materialization = record.asset_materialization
            assert materialization is not None
            numbers = {k: v for k, v in materialization.metadata.items() if isinstance(v, NUMBERS)}
            assert keys <= set(numbers), (asset, keys - set(numbers))
            assert all(isinstance(v.value, int | float) for v in numbers.values())
            assert not [
                k
                for k, v in materialization.metadata.items()
                if isinstance(v, dg.TextMetadataValue) and v.value.replace(",", "").isdigit()
            ], asset  # no count left as text
            series.append({k: v.value for k, v in numbers.items() if k in keys})
        newest = instance.get_latest_materialization_event(dg.AssetKey(asset))
        assert newest is not None and newest.asset_materialization is not None
        assert newest.asset_materialization.partition == load_config(strict).partition_key
        assert set(series[0]) == set(series[1]), asset  # one key per series
    rows = [
        r.asset_materialization.metadata["dagster/row_count"].value  # type: ignore[union-attr]
        for r in instance.fetch_materializations(dg.AssetKey("shards"), limit=2).records
    ]
    assert rows[1] == 300 and 0 < rows[0] < 300, rows  # newest first: the stricter build
