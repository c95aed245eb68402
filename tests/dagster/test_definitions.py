"""The graph as defined: it loads, and its shape, jobs, policies and defaults are what the docs
say (docs/ui.md, docs/reliability.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
from dagster_support import copy_example

from corpus_assets.assets import checks, task_checks
from corpus_assets.assets.raw import raw
from corpus_assets.assets.shards import shards
from corpus_assets.assets.tokens import tokens
from corpus_assets.definitions import defs
from corpus_assets.jobs import BUILD_TAGS, JOBS
from corpus_assets.resources.retries import FETCH_RETRY, STAGE_RETRY
from corpus_assets.resources.stage_runner import StageRunner


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == {
        "raw",
        "shards",
        "tokens",
        "report",
        "task_dataset",
        "corpus_hf",
        "task_hf",
        "quality_model",
        "token_exports",
        "mixture",
    }
    for name, group, partitions in (
        ("raw", "corpus", "corpus_configs"),
        ("shards", "corpus", "corpus_configs"),
        ("tokens", "corpus", "corpus_configs"),
        ("report", "corpus", "corpus_configs"),
        ("task_dataset", "tasks", "task_configs"),
        ("mixture", "training", "mixture_configs"),
    ):
        node = graph.get(dg.AssetKey(name))
        assert node.group_name == group
        assert isinstance(node.partitions_def, dg.DynamicPartitionsDefinition)
        assert node.partitions_def.name == partitions
    assert graph.get(dg.AssetKey("shards")).parent_keys == {
        dg.AssetKey("raw"),
        dg.AssetKey("quality_model"),
    }
    assert graph.get(dg.AssetKey("tokens")).parent_keys == {dg.AssetKey("shards")}
    assert graph.get(dg.AssetKey("report")).parent_keys == {
        dg.AssetKey("shards"),
        dg.AssetKey("tokens"),
    }
    assert graph.get(dg.AssetKey("task_dataset")).parent_keys == set()
    assert graph.get(dg.AssetKey("corpus_hf")).parent_keys == {dg.AssetKey("shards")}
    assert graph.get(dg.AssetKey("token_exports")).parent_keys == {dg.AssetKey("tokens")}
    assert graph.get(dg.AssetKey("mixture")).parent_keys == {dg.AssetKey("tokens")}
    assert graph.get(dg.AssetKey("task_hf")).parent_keys == {dg.AssetKey("task_dataset")}
    task_job = defs.resolve_job_def("task_build")
    assert {k.to_user_string() for k in task_job.asset_layer.asset_graph.get_all_asset_keys()} >= {
        "task_dataset"
    }
    blocking = {s.name for s in task_job.asset_layer.asset_graph.asset_check_keys if s.name}
    assert blocking >= {"task_snapshot_valid", "task_report_adds_up"}


def test_checks_are_named_and_manifest_checks_block() -> None:
    specs = {s.name: s for c in checks.ALL_CHECKS for s in c.check_specs}
    assert (
        set(specs)
        == set(checks.CHECK_NAMES)
        == {
            checks.SHARDS_MANIFEST_VALID,
            checks.SHARDS_NO_EXACT_DUPLICATES,
            checks.SHARDS_NO_PII_RESIDUE,
            checks.SHARDS_LICENSES_ALLOWED,
            checks.SHARDS_DECONTAMINATED,
            checks.TOKENS_MANIFEST_VALID,
            checks.TOKENS_MATCH_SHARDS,
            checks.TOKENS_ROUNDTRIP_SAMPLE,
        }
    )
    blocking = {name for name, spec in specs.items() if spec.blocking}
    assert blocking == {checks.SHARDS_MANIFEST_VALID, checks.TOKENS_MANIFEST_VALID}
    job = defs.resolve_job_def("corpus_build")
    assert {k.name for k in job.asset_layer.asset_graph.asset_check_keys} == set(specs)


def test_jobs_sensors_and_stage_options() -> None:
    build = defs.resolve_job_def("corpus_build")
    assert build.executor_def is dg.in_process_executor
    assert build.tags.items() >= BUILD_TAGS.items()
    assert defs.resolve_job_def("corpus_cleanup").executor_def is dg.in_process_executor
    for name in ("corpus_config_sensor", "corpus_cleanup_on_failure", "corpus_cleanup_on_cancel"):
        sensor = defs.resolve_sensor_def(name)
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    for name in ("corpus_cleanup_on_failure", "corpus_cleanup_on_cancel"):
        sensor = defs.resolve_sensor_def(name)
        assert isinstance(sensor, dg.RunStatusSensorDefinition)
        assert sensor._monitor_all_code_locations is True  # no public accessor; e2e proves it
    policies = {a.key.to_user_string(): a.op.retry_policy for a in (raw, shards, tokens)}
    assert policies == {"raw": FETCH_RETRY, "shards": STAGE_RETRY, "tokens": STAGE_RETRY}
    assert FETCH_RETRY.max_retries > STAGE_RETRY.max_retries > 0
    assert StageRunner().heartbeat_timeout_s == 120.0


def test_every_job_is_defined_and_the_exports_have_jobs_of_their_own() -> None:
    """The export runs name their job (not "Job None"); the task checks have a re-check job
    with its own partition picker, like the corpus checks."""
    defined = {job.name for job in defs.resolve_all_job_defs()}
    assert {job.name for job in JOBS} <= defined, "build_defs registers every job of jobs.JOBS"
    for name, asset, partitions in (
        ("corpus_export", "corpus_hf", "corpus_configs"),
        ("task_export", "task_hf", "task_configs"),
    ):
        job = defs.resolve_job_def(name)
        assets = job.asset_layer.asset_graph.get_all_asset_keys()
        assert {k for k in assets if job.asset_layer.asset_graph.get(k).is_executable} == {
            dg.AssetKey(asset)
        }
        assert job.partitions_def is not None and job.partitions_def.name == partitions  # type: ignore[attr-defined]
    for name, partitions in (
        ("corpus_recheck", "corpus_configs"),
        ("task_recheck", "task_configs"),
    ):
        recheck = defs.resolve_job_def(name)
        assert isinstance(recheck.partitions_def, dg.DynamicPartitionsDefinition)
        assert recheck.partitions_def.name == partitions
    for spec in (*checks.shards_checks.check_specs, *task_checks.task_dataset_checks.check_specs):
        recheck_job = (
            "task_recheck" if spec.asset_key.path == ["task_dataset"] else "corpus_recheck"
        )
        assert f"Jobs → {recheck_job} → Launchpad" in str(spec.description), spec.name


def test_raw_and_task_dataset_have_column_schemas() -> None:
    """`dagster/column_schema` on the asset definitions: raw's Parquet columns as the fetch
    writes them, the task snapshot's row-aligned fields; every column described."""
    from corpus_assets.core.stages.fetch import RAW_SCHEMA
    from corpus_assets.tasks.snapshot import PUBLIC_KEYS, REFERENCE_KEYS

    graph = defs.resolve_asset_graph()
    schemas = {
        name: graph.get(dg.AssetKey(name)).metadata["dagster/column_schema"]
        for name in ("raw", "task_dataset")
    }
    assert [(c.name, c.type) for c in schemas["raw"].columns] == [
        (f.name, str(f.type)) for f in RAW_SCHEMA
    ]
    task_columns = [c.name for c in schemas["task_dataset"].columns]
    assert set(task_columns) == PUBLIC_KEYS | REFERENCE_KEYS | {"train"}
    assert all(c.description for schema in schemas.values() for c in schema.columns)


def test_task_hf_columns_are_described(tmp_path: Path) -> None:
    import datasets

    from corpus_assets.assets.exports import OTHER_TASK_COLUMN, TASK_HF_COLUMNS, dataset_view

    row = {"task_id": "t1", "messages": [{"role": "user", "content": "2+2?"}], "answer": "4"}
    datasets.Dataset.from_list([{**row, "difficulty": 1}]).save_to_disk(str(tmp_path / "hf"))
    schema = dataset_view(tmp_path / "hf", TASK_HF_COLUMNS, OTHER_TASK_COLUMN)
    about = {c.name: c.description for c in schema["dagster/column_schema"].value.columns}  # type: ignore[attr-defined]
    assert about == {**TASK_HF_COLUMNS, "difficulty": OTHER_TASK_COLUMN}


STAGES_THEN_MODULES = """
import json, sys
from corpus_assets import cli
config, root = sys.argv[1:]
codes = []
for stage in ("fetch", "shard", "tokenize"):
    try:
        cli.main(["run", "--stage", stage, "--config", config, "--root", root, "--workers", "1"])
    except SystemExit as exc:
        codes.append(exc.code)
after_stages = sorted(m for m in sys.modules if m.split(".")[0] == "dagster")
import corpus_assets.resources.stage_report
after_report = sorted(m for m in sys.modules if m.split(".")[0] == "dagster")
print(json.dumps({"codes": codes, "stages": after_stages, "report": after_report}))
"""


def test_corpus_run_does_not_import_dagster(tmp_path: Path) -> None:
    """Stage subprocesses start fast: the real fetch, shard and tokenize stages of the example,
    run through the CLI in one interpreter, never load Dagster (only the tiny dagster-pipes)."""
    config = copy_example(tmp_path / "configs")
    root = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-c", STAGES_THEN_MODULES, str(config), str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["codes"] == [0, 0, 0], done.stderr
    assert (root / "raw" / "LEDGER.jsonl").is_file()  # the stages really ran
    assert list(root.glob("tokens/*/*/*/*/_MANIFEST.json")), "the tokenize stage published nothing"
    assert report["stages"] == [], "corpus run imported dagster"
    assert report["report"] == [], "stage_report imported dagster"
