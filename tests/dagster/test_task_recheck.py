"""The task_dataset checks run again without a rebuild: the `task_recheck` job."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import dagster as dg
from support.corpus import run_corpus

from corpus_assets.jobs import task_recheck
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.task_configs import TaskConfigStore
from corpus_assets.tasks import audit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
TASK_DATASET = dg.AssetKey("task_dataset")


def _calibrated(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLES / "reports", folder / "reports")
    return Path(shutil.copy(EXAMPLES / "arithmetic-calibrated.yaml", folder))


def _corpus(root: Path, *args: str) -> dict[str, object]:
    env = {**os.environ, "DAGSTER_HOME": str(root / "dagster"), "HF_HUB_OFFLINE": "1"}
    done = run_corpus(*args, "--root", root, environ=env, timeout=600)
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout)
    return found


def _recheck(root: Path, instance: dg.DagsterInstance, key: str) -> dg.ExecuteInProcessResult:
    stores = {"task_configs": TaskConfigStore(paths=CorpusPaths(root=str(root)))}
    return task_recheck.execute_in_process(
        instance=instance, partition_key=key, resources=stores, raise_on_error=False
    )


def _evaluations(instance: dg.DagsterInstance, run_id: str) -> dict[str, dg.AssetCheckEvaluation]:
    found = {}
    for record in instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records:
        event = record.event_log_entry.dagster_event
        evaluation = event.event_specific_data if event is not None else None
        assert isinstance(evaluation, dg.AssetCheckEvaluation)
        found[evaluation.check_name] = evaluation
    return found


def test_the_task_checks_run_again_on_the_snapshot_as_it_is_now(tmp_path: Path) -> None:
    """Every task_dataset check is evaluated again for the partition, against its latest
    materialization, nothing rebuilt; a snapshot changed since fails the blocking check."""
    root = tmp_path / "data"
    built = _corpus(root, "build", str(_calibrated(tmp_path / "configs")))
    key, folder = str(built["partition_key"]), Path(str(built["job_folder"]))
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        latest = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=TASK_DATASET, asset_partitions=[key]), limit=5
        ).records
        assert len(latest) == 1

        run = _recheck(root, instance, key)
        assert run.success
        evaluations = _evaluations(instance, run.run_id)
        assert set(evaluations) == set(audit.AUDITS)
        for evaluation in evaluations.values():
            assert evaluation.passed and evaluation.partition == key
            assert evaluation.asset_key == TASK_DATASET
            target = evaluation.target_materialization_data
            assert target is not None and target.storage_id == latest[0].storage_id
            assert evaluation.blocking is (evaluation.check_name in audit.BLOCKING)

        public = folder / "dataset" / "public.jsonl"
        rows = public.read_text().splitlines()
        leaked = json.loads(rows[0])
        leaked["metadata"]["reference"] = "leak"
        public.write_text("\n".join([json.dumps(leaked), *rows[1:]]) + "\n")
        again = _recheck(root, instance, key)
        assert not again.success
        failed = sorted(n for n, e in _evaluations(instance, again.run_id).items() if not e.passed)
        assert failed == ["task_public_has_no_reference", "task_snapshot_valid"]
        errors = [
            e.user_message for e in instance.all_logs(again.run_id) if e.level >= logging.ERROR
        ]
        assert errors[0] == f"checks failed on {key}: {', '.join(failed)}"
        assert (
            len(
                instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=TASK_DATASET, asset_partitions=[key]), limit=5
                ).records
            )
            == 1
        ), "nothing was rebuilt"


def test_a_task_partition_never_materialized_is_refused_in_one_line(tmp_path: Path) -> None:
    root = tmp_path / "data"
    key = str(_corpus(root, "register", str(_calibrated(tmp_path / "configs")))["partition_key"])
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        run = _recheck(root, instance, key)
        assert not run.success
        errors = [e.user_message for e in instance.all_logs(run.run_id) if e.level >= logging.ERROR]
        assert errors[0] == (
            f"materialize task_dataset first: partition {key} has no snapshot to check"
        )
        assert not _evaluations(instance, run.run_id)
        failure = run.get_step_failure_events()[0].step_failure_data.user_failure_data
        assert failure is not None and failure.metadata["upstream_missing"].value is True
