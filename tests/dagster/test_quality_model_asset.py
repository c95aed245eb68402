"""The `quality_model` asset: its place in the graph (the lineage edge to `shards`, which maps no
partition), training a registered classifier partition in-process (metadata from its manifest,
the model-file check), a failed training in one line, and registering classifier configs
(`corpus register`, the inbox sensor)."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.execution.backfill import PartitionBackfill
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.workspace.load_target import ModuleTarget
from dagster._daemon.backfill import execute_backfill_iteration
from dagster_support import wrapped
from support.corpus import run_corpus
from support.junk import write_junk

from corpus_assets.assets.quality_model_checks import (
    QUALITY_MODEL_MATCHES_MANIFEST,
    model_matches_manifest,
)
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.definitions import build_defs, defs
from corpus_assets.jobs import BUILD_JOB, CLASSIFIER_JOB
from corpus_assets.resources.classifier_configs import ClassifierConfigStore, register_classifier
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import CLASSIFIER_CONFIGS, CORPUS_CONFIGS
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.sensors.cleanup import cleanup_request
from corpus_assets.sensors.config import corpus_config_sensor

REPO = Path(__file__).resolve().parents[2]
STORIES = REPO / "data" / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"
QUALITY_MODEL = dg.AssetKey("quality_model")
SHARDS = dg.AssetKey("shards")
CORPUS_ASSETS = [dg.AssetKey(k) for k in ("raw", "shards", "tokens", "report")]


def jsonl_source(name: str, path: Path) -> dict[str, Any]:
    return {"name": name, "kind": "jsonl", "path": str(path), "license": "cc0-1.0"}


def classifier_config(folder: Path, **settings: object) -> Path:
    """A small classifier config in `folder` (about a second to train): 400 of the TinyStories
    sample's 1,728 stories against 300 generated junk pages."""
    config = {
        "name": "stories-vs-junk",
        "positive": [
            {"name": "tinystories", "kind": "text", "path": str(STORIES),
             "separator": "<|endoftext|>", "license": "cdla-sharing-1.0"},
        ],
        "negative": [jsonl_source("junk", write_junk(folder / "junk.jsonl", 300))],
        "max_examples": 400,
        "training": {"dim": 16, "bucket": 20_000},
        **settings,
    }  # fmt: skip
    path = folder / "stories-vs-junk.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def train_job(root: Path) -> dg.JobDefinition:
    return build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def(CLASSIFIER_JOB)


def test_the_graph_has_quality_model_upstream_of_shards() -> None:
    graph = defs.resolve_asset_graph()
    node = graph.get(QUALITY_MODEL)
    assert node.group_name == "classifiers"
    assert isinstance(node.partitions_def, dg.DynamicPartitionsDefinition)
    assert node.partitions_def.name == CLASSIFIER_CONFIGS
    assert graph.get(SHARDS).parent_keys == {dg.AssetKey("raw"), QUALITY_MODEL}
    assert graph.get_partition_mapping(SHARDS, QUALITY_MODEL) == (
        dg.SpecificPartitionsPartitionMapping([])
    )
    job = defs.resolve_job_def(CLASSIFIER_JOB)
    assert job.executor_def is dg.in_process_executor
    assert job.asset_layer.selected_asset_keys == {QUALITY_MODEL}
    checks = job.asset_layer.asset_graph.asset_check_keys
    assert {k.name for k in checks} == {QUALITY_MODEL_MATCHES_MANIFEST}
    assert all(job.asset_layer.asset_graph.get(k).blocking for k in checks)
    assert QUALITY_MODEL not in defs.resolve_job_def(BUILD_JOB).asset_layer.selected_asset_keys


def test_an_asset_backfill_of_corpus_partitions_needs_no_classifier_partition() -> None:
    """What the UI launches for several partitions: an asset backfill. Under Dagster's default
    mapping between two dynamic partition sets (identity) it fails at once, each corpus
    partition "depends on non-existent partitions" of quality_model; with no partition mapped,
    it queues one run per corpus partition."""
    queued = {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"}
    keys = ["tiny-v1-0123456789ab", "tiny-v2-ba9876543210"]
    with dg.instance_for_test(overrides={"run_coordinator": queued}) as instance:
        instance.add_dynamic_partitions(CORPUS_CONFIGS, keys)
        instance.add_dynamic_partitions(CLASSIFIER_CONFIGS, ["junk-0123456789ab"])
        target = ModuleTarget(
            module_name="corpus_assets.definitions",
            attribute=None,
            working_directory=str(REPO),
            location_name="corpus_assets.definitions",
        )
        with create_test_daemon_workspace_context(target, instance) as workspace:
            backfill = PartitionBackfill.from_asset_partitions(
                backfill_id="corpus",
                asset_graph=workspace.create_request_context().asset_graph,
                partition_names=keys,
                asset_selection=CORPUS_ASSETS,
                backfill_timestamp=time.time(),
                tags={},
                dynamic_partitions_store=instance,
                all_partitions=False,
                title=None,
                description=None,
                run_config=None,
            )
            instance.add_backfill(backfill)
            errors = list(execute_backfill_iteration(workspace, logging.getLogger("backfill")))
        assert [e for e in errors if e is not None] == []
        stored = instance.get_backfill("corpus")
        assert stored is not None and stored.error is None
        runs = instance.get_runs()
        assert sorted(r.tags["dagster/partition"] for r in runs) == sorted(keys)
        assert all(r.status == dg.DagsterRunStatus.QUEUED for r in runs)
        assert all(QUALITY_MODEL not in (r.asset_selection or ()) for r in runs)


def test_materializing_a_classifier_partition_trains_it_and_shows_its_metrics(
    tmp_path: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    key = register_classifier(classifier_config(tmp_path / "clf"), root, instance)["partition_key"]
    assert instance.get_dynamic_partitions(CLASSIFIER_CONFIGS) == [key]
    result = train_job(root).execute_in_process(partition_key=key, instance=instance)
    assert result.success
    folder = root / "classifiers" / key
    manifest = json.loads((folder / "MANIFEST.json").read_text(encoding="utf-8"))
    assert file_sha256(folder / "model.bin") == manifest["model"]["sha256"]

    (materialization,) = result.asset_materializations_for_node("quality_model")
    metadata = materialization.metadata
    assert metadata["model_sha256"] == dg.MetadataValue.text(manifest["model"]["sha256"])
    assert metadata["model_bytes"] == dg.MetadataValue.int(manifest["model"]["bytes"])
    for name in ("precision", "recall", "roc_auc"):
        shown = metadata[f"validation_{name}"]
        assert isinstance(shown, dg.FloatMetadataValue)  # a number: the UI plots it
        assert shown.value == manifest["validation"][name]
    assert manifest["validation"]["roc_auc"] > 0.95  # stories and junk pages part well
    for cls in ("positive", "negative"):
        for count in ("train", "validation"):
            assert metadata[f"{cls}_{count}_examples"] == dg.MetadataValue.int(
                manifest["examples"][cls][count]
            )
    assert manifest["examples"]["positive"]["kept"] == 400  # max_examples of 1,728 stories
    summary = str(metadata["summary"].value)
    assert "| positive | `hq` | 1,728 | 0 | 400 |" in summary
    assert "ROC AUC" in summary and "20 bins over [0, 1]" in summary
    config_text = str(metadata["config"].value).split("\n", 1)[1].rsplit("```", 1)[0]
    assert json.loads(config_text) == manifest["config"]
    assert materialization.tags is not None
    assert materialization.tags["dagster/data_version"] == manifest["model"]["sha256"]
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == QUALITY_MODEL_MATCHES_MANIFEST and check.passed

    again = train_job(root).execute_in_process(partition_key=key, instance=instance)
    assert again.success
    (kept,) = again.asset_materializations_for_node("quality_model")
    assert kept.metadata["model_sha256"] == metadata["model_sha256"]
    logs = [e.user_message for e in instance.all_logs(again.run_id)]
    assert any(f"classifier {key} already trained" in line for line in logs)

    store = ClassifierConfigStore(paths=CorpusPaths(root=str(root)))
    assert model_matches_manifest(store, key).passed
    model = folder / "model.bin"
    data = model.read_bytes()
    model.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the same size
    changed = model_matches_manifest(store, key)
    assert not changed.passed
    assert changed.problems == (f"{model}: sha256 differs from the manifest",)
    model.unlink()
    assert model_matches_manifest(store, key).problems == (f"{model}: missing",)


def test_a_transient_failure_of_the_training_is_retried(
    tmp_path: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    """`corpus classifier train` exiting 75 (a source's server down, say) is tried again, with
    the fetch's retry policy: its examples come over the network first."""
    key = register_classifier(classifier_config(tmp_path / "clf"), root, instance)["partition_key"]
    runner = wrapped(tmp_path / "w", "exit-once=75", "classifier", fetch_retry_delay_s=0.0)
    job = build_defs(paths=CorpusPaths(root=str(root)), stage_runner=runner).resolve_job_def(
        CLASSIFIER_JOB
    )
    result = job.execute_in_process(partition_key=key, instance=instance)
    assert result.success
    assert (tmp_path / "w" / "classifier.attempts").read_text() == "2"
    steps = [
        r.event_log_entry.dagster_event_type.value  # type: ignore[union-attr]
        for r in instance.get_records_for_run(result.run_id).records
        if r.event_log_entry.step_key == "quality_model" and r.event_log_entry.is_dagster_event
    ]
    assert steps.count("STEP_UP_FOR_RETRY") == 1 and steps[-1] == "STEP_SUCCESS"
    assert (root / "classifiers" / key / "MANIFEST.json").exists()


def test_a_failed_training_fails_the_run_with_the_commands_line(
    tmp_path: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    blank = tmp_path / "clf" / "blank.jsonl"
    blank.parent.mkdir(parents=True)
    blank.write_text(
        "".join(json.dumps({"id": f"b{i}", "text": " \n\t "}) + "\n" for i in range(5)),
        encoding="utf-8",
    )
    config = classifier_config(tmp_path / "clf", negative=[jsonl_source("blank", blank)])
    key = register_classifier(config, root, instance)["partition_key"]
    result = train_job(root).execute_in_process(
        partition_key=key, instance=instance, raise_on_error=False
    )
    assert not result.success
    line = (
        "negative source 'blank' holds no document with text "
        "(`corpus classifier train` exit 65 (bad data), not retried)"
    )
    failure = result.failure_data_for_node("quality_model")
    assert failure is not None and failure.user_failure_data is not None
    assert failure.user_failure_data.description == line
    logs = instance.all_logs(result.run_id)
    assert next(e.user_message for e in logs if e.level >= logging.ERROR) == line
    assert not (root / "classifiers" / key).exists()
    assert result.asset_materializations_for_node("quality_model") == []
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    skip = cleanup_request(instance, run, "failed")  # no corpus build to clean up
    assert isinstance(skip, dg.SkipReason)
    assert f"run {run.run_id} trained a classifier" in str(skip.skip_message)


def test_an_unregistered_classifier_key_fails_in_one_line(
    root: Path, instance: dg.DagsterInstance
) -> None:
    key = "junk-0123456789ab"
    instance.add_dynamic_partitions(CLASSIFIER_CONFIGS, [key])
    result = train_job(root).execute_in_process(
        partition_key=key, instance=instance, raise_on_error=False
    )
    failure = result.failure_data_for_node("quality_model")
    assert failure is not None and failure.user_failure_data is not None
    description = str(failure.user_failure_data.description)
    assert description.startswith(f"classifier partition {key!r} is not registered under ")
    assert description.endswith("run `corpus register CONFIG` with the same --root first")


def test_corpus_register_stores_a_classifier_config_as_a_partition(tmp_path: Path) -> None:
    root = tmp_path / "data"
    config = classifier_config(tmp_path / "clf")
    environ = {"DAGSTER_HOME": str(root / "dagster"), "HF_HUB_OFFLINE": "1"}
    done = run_corpus("register", config, "--root", root, env=environ, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["kind"] == "classifier"
    key = summary["partition_key"]
    assert key.startswith("stories-vs-junk-") and summary["config"].endswith(f"{key[-12:]}.json")
    assert (root / summary["config"]).is_file()
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        assert instance.get_dynamic_partitions(CLASSIFIER_CONFIGS) == [key]
        assert instance.get_dynamic_partitions(CORPUS_CONFIGS) == []
    missing = json.loads(config.read_text(encoding="utf-8"))
    missing["negative"][0]["path"] = str(tmp_path / "gone.jsonl")
    bad = tmp_path / "clf" / "missing.json"
    bad.write_text(json.dumps(missing), encoding="utf-8")
    refused = run_corpus("register", bad, "--root", root, env=environ, timeout=120)
    assert refused.returncode == 64
    assert f"source 'junk': input not found: {tmp_path / 'gone.jsonl'}" in refused.stderr
    assert len(list((root / "classifier-configs").glob("*.origin.json"))) == 1


def test_a_classifier_config_dropped_into_the_inbox_is_registered_and_trained(
    example: Path, tmp_path: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    inbox = root / "inbox"
    inbox.mkdir(parents=True)
    shutil.copy(classifier_config(tmp_path / "clf"), inbox / "classifier.json")
    shutil.copytree(example.parent / "tiny", inbox / "tiny")
    shutil.copy(example, inbox / "tiny.toml")
    paths = CorpusPaths(root=str(root))
    with dg.build_sensor_context(
        instance=instance, resources={"paths": paths, "configs": ConfigStore(paths=paths)}
    ) as context:
        result = corpus_config_sensor(context)
    assert isinstance(result, dg.SensorResult)
    requests = {r.job_name: r.partition_key for r in result.run_requests or []}
    assert set(requests) == {BUILD_JOB, CLASSIFIER_JOB}
    assert str(requests[CLASSIFIER_JOB]).startswith("stories-vs-junk-")
    added = {
        r.partitions_def_name: list(r.partition_keys)
        for r in result.dynamic_partitions_requests or []
        if isinstance(r, dg.AddDynamicPartitionsRequest)
    }
    assert added == {
        CORPUS_CONFIGS: [requests[BUILD_JOB]],
        CLASSIFIER_CONFIGS: [requests[CLASSIFIER_JOB]],
    }
    stored = root / "classifier-configs" / f"{str(requests[CLASSIFIER_JOB])[-12:]}.json"
    assert stored.is_file()
