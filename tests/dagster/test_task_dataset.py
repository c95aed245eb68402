"""Task datasets in the asset graph: `corpus build`/`register` of a task config, the `dagster`
CLI, resuming a killed run, the cleanup sensors leaving task partitions alone, the checks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from support.corpus import run_corpus, start_corpus
from support.dagster import run_dagster
from support.waiting import wait_for

from corpus_assets.sensors.cleanup import cleanup_request
from corpus_assets.tasks.snapshot import load_snapshot

REPO = Path(__file__).resolve().parents[2]
TASK_TESTS = REPO / "tests" / "tasks"
EXAMPLES = REPO / "examples" / "tasks"
WAIT_S = 180.0


def env_for(root: Path) -> dict[str, str]:
    """The environment of a user on this data root; tests/tasks importable (test recipes)."""
    return {
        **os.environ,
        "DAGSTER_HOME": str(root / "dagster"),
        "CORPUS_ROOT": str(root),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(TASK_TESTS)]),
    }


def corpus(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_corpus(*args, "--root", root, environ=env_for(root), timeout=600)


def standalone_dataset_id(config: Path, output: Path, root: Path) -> str:
    """The dataset_id `corpus tasks` publishes for `config` outside Dagster."""
    done = run_corpus(
        "tasks", "--config", config, "--output", output,
        environ=env_for(root), timeout=600, check=True,
    )  # fmt: skip
    dataset_id: str = json.loads(done.stdout.splitlines()[-1])["dataset_id"]
    return dataset_id


def calibrated_example(folder: Path) -> Path:
    """The calibrated arithmetic example and its reports, copied into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLES / "reports", folder / "reports")
    return Path(shutil.copy(EXAMPLES / "arithmetic-calibrated.yaml", folder))


def scripted_job(folder: Path, name: str, count: int, **calibration: Any) -> Path:
    """A task config of the scripted test recipe, calibrated by the scripted calibrator."""
    samples = [
        {"id": f"t{i:02d}", "input": {"text": f"q{i}"}, "answer": f"a{i}", "metadata": {}}
        for i in range(count)
    ]
    config = {
        "recipe": "executor_recipes:make",
        "name": name,
        "target_count": count // 2,
        "purpose": "model",
        "params": {"batches": [samples]},
        "calibration": {
            "implementation": "calibrators:answer_all",
            "repeats": 2,
            "params": calibration,
        },
        "execution": {"batch_size": 2},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


def log_calls(log: Path) -> list[list[str]]:
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [r["task_ids"] for r in rows if "call" in r]


def test_corpus_build_of_a_task_config_materializes_checks_and_then_resumes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    config = calibrated_example(tmp_path / "configs")
    done = corpus(root, "build", str(config))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["kind"] == "task" and summary["success"] is True
    assert summary["stages"] == {"tasks": "materialized"}
    assert set(summary["checks"].values()) == {"passed"}
    assert len(summary["checks"]) == 4
    key = summary["partition_key"]
    assert key.startswith("arithmetic-calibrated-")
    folder = root / "tasks" / "arithmetic-calibrated" / key[-12:]
    assert summary["job_folder"] == str(folder)
    snapshot = load_snapshot(folder / "dataset")
    assert summary["dataset_id"] == snapshot.dataset_id
    assert standalone_dataset_id(config, tmp_path / "standalone", root) == snapshot.dataset_id
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        assert key in instance.get_dynamic_partitions("task_configs")
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("task_dataset"), asset_partitions=[key]),
            limit=5,
        ).records
        metadata = records[0].asset_materialization.metadata  # type: ignore[union-attr]
        assert metadata["dataset_id"].value == snapshot.dataset_id
        assert metadata["dagster/row_count"].value == 64  # the selected tasks, once
        assert metadata["generated"].value == 128 and "selected" not in metadata
        assert metadata["calibrated"].value == 127  # every retained candidate
        assert isinstance(metadata["calibrated"], dg.IntMetadataValue)
        assert str(metadata["summary"].value).startswith("**64** tasks selected of 128 generated")
        assert metadata["calibrated_selection"].value is True
        shown = str(metadata["config"].value)
        assert json.loads(shown.split("\n", 1)[1].rsplit("```", 1)[0])["name"] == (
            "arithmetic-calibrated"
        )
        assert metadata["calibration"].value["repeats"] == 2  # type: ignore[index]
    again = corpus(root, "build", str(config))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["dataset_id"] == snapshot.dataset_id
    logs = "".join(p.read_text() for p in (root / "logs").glob("*.log"))
    assert f"resuming the task job in {folder}" in logs


def test_register_validates_a_task_config_whole_before_writing(tmp_path: Path) -> None:
    root = tmp_path / "data"
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"recipe": "no_such_module:make", "target_count": 1, "purpose": "model"})
    )
    done = corpus(root, "register", str(bad))
    assert done.returncode == 64
    assert "module 'no_such_module' not found" in done.stderr
    assert not (root / "task-configs").exists()
    good = corpus(root, "register", str(calibrated_example(tmp_path / "configs")))
    assert good.returncode == 0, good.stderr
    summary = json.loads(good.stdout)
    assert summary["kind"] == "task"
    assert (root / summary["config"]).is_file()
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        assert instance.get_dynamic_partitions("task_configs") == [summary["partition_key"]]
        assert instance.get_dynamic_partitions("corpus_configs") == []


@pytest.mark.timeout(400)
def test_dagster_job_execute_and_asset_materialize_a_task_partition(tmp_path: Path) -> None:
    root = tmp_path / "data"
    registered = corpus(root, "register", str(calibrated_example(tmp_path / "configs")))
    key = json.loads(registered.stdout)["partition_key"]
    for argv in (
        ["job", "execute", "-j", "task_build", "--tags", json.dumps({"dagster/partition": key})],
        ["asset", "materialize", "--select", "task_dataset", "--partition", key],
    ):
        done = run_dagster(
            *argv[:2], "-m", "corpus_assets.definitions", *argv[2:], env=env_for(root), cwd=tmp_path
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("task_dataset"), asset_partitions=[key]),
            limit=5,
        ).records
        assert len(records) == 2
        ids = {r.asset_materialization.metadata["dataset_id"].value for r in records}  # type: ignore[union-attr]
        assert len(ids) == 1


def build_until_paused(
    config: Path, root: Path, log: Path, call: int, signum: int
) -> tuple[subprocess.Popen[str], str, str]:
    """Start `corpus build` in its own process group, wait until the scripted calibrator pauses
    before call `call`, send `signum` to the group; the ended process and its output."""
    proc = start_corpus(
        "build", config, "--root", root,
        environ=env_for(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        mark = f'"pause": {call}'
        wait_for(
            lambda: mark in (log.read_text() if log.exists() else ""),
            WAIT_S,
            "a pause",
            every=0.05,
            watch=[proc],
        )
        os.killpg(proc.pid, signum)
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=WAIT_S)
    return proc, out, err


@pytest.mark.timeout(600)
def test_a_task_run_killed_mid_calibration_resumes_on_the_next_materialization(
    tmp_path: Path,
) -> None:
    root, log, gate = tmp_path / "data", tmp_path / "calls.log", tmp_path / "gate"
    config = scripted_job(
        tmp_path / "configs", "killed", 12, log=str(log), pause_after=3, gate=str(gate)
    )
    proc, _, _ = build_until_paused(config, root, log, 3, signal.SIGKILL)  # build and child
    assert proc.returncode == -signal.SIGKILL
    before = log_calls(log)
    assert before == [["t00", "t01"], ["t02", "t03"], ["t04", "t05"]]
    folder = next((root / "tasks" / "killed").iterdir())
    db = sqlite3.connect(folder / "work" / "checkpoints.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 3
    db.close()
    assert not (folder / "dataset").exists()
    gate.touch()
    again = corpus(root, "build", str(config))
    assert again.returncode == 0, again.stderr
    after = log_calls(log)[len(before) :]
    assert after == [["t06", "t07"], ["t08", "t09"], ["t10", "t11"]]  # no call repeated
    expected = standalone_dataset_id(config, tmp_path / "uninterrupted", root)
    assert json.loads(again.stdout)["dataset_id"] == expected


def test_a_failed_task_run_keeps_its_folder_and_the_cleanup_sensor_leaves_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    config = scripted_job(tmp_path / "configs", "broken", 4, broken="missing")
    done = corpus(root, "build", str(config))
    assert done.returncode == 65, done.stderr  # the calibrator's answer is bad data
    summary = json.loads(done.stdout)
    assert "did not answer" in summary["error"]
    folder = next((root / "tasks" / "broken").iterdir())
    job = json.loads((folder / "job.json").read_text())
    assert job["state"] == "failed" and job["exit_code"] == 65
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        run = next(iter(instance.get_runs()))
        assert run.status == dg.DagsterRunStatus.FAILURE
        reason = cleanup_request(instance, run, "failed")
        assert isinstance(reason, dg.SkipReason)
        assert "task dataset" in str(reason.skip_message)
    assert (folder / "work" / "checkpoints.sqlite3").is_file()  # nothing was cleaned


def test_a_tampered_snapshot_fails_the_blocking_check(tmp_path: Path) -> None:
    from corpus_assets.tasks import audit

    root = tmp_path / "data"
    done = corpus(root, "build", str(calibrated_example(tmp_path / "configs")))
    folder = Path(json.loads(done.stdout)["job_folder"])
    for name, run in audit.AUDITS.items():
        assert run(folder).passed, name
    public = folder / "dataset" / "public.jsonl"
    rows = public.read_text().splitlines()
    leaked = json.loads(rows[0])
    leaked["metadata"]["reference"] = "leak"
    public.write_text("\n".join([json.dumps(leaked), *rows[1:]]) + "\n")
    assert not audit.snapshot_valid(folder).passed
    assert "public.jsonl" in audit.snapshot_valid(folder).problems[0]
    assert audit.public_has_no_reference(folder).problems == (
        "dataset/public.jsonl row 1 has a reference field",
    )
    public.chmod(0o644)
    assert audit.owner_only(folder).problems == ("dataset/public.jsonl: mode 644, want 600",)


def schema_of(root: Path, asset: str, key: str) -> dg.TableSchema:
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        latest = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
        ).records[0]
        metadata = latest.asset_materialization.metadata  # type: ignore[union-attr]
        return metadata["dagster/column_schema"].value  # type: ignore[return-value]


def _materialize(root: Path, cwd: Path, select: str, key: str) -> None:
    done = run_dagster(
        "asset", "materialize", "-m", "corpus_assets.definitions", "--select", select,
        "--partition", key, env=env_for(root), cwd=cwd,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.timeout(600)
def test_the_export_assets_write_loadable_datasets_once_per_source(
    tmp_path: Path, example: Path
) -> None:
    import datasets

    root = tmp_path / "data"
    corpus_build = corpus(root, "build", str(example))
    assert corpus_build.returncode == 0, corpus_build.stderr
    corpus_key = json.loads(corpus_build.stdout)["partition_key"]
    task_build = corpus(root, "build", str(calibrated_example(tmp_path / "tasks")))
    task_key = json.loads(task_build.stdout)["partition_key"]
    _materialize(root, tmp_path, "corpus_hf", corpus_key)
    _materialize(root, tmp_path, "task_hf", task_key)
    corpus_hf = datasets.load_from_disk(str(root / "exports" / "corpus" / corpus_key))
    assert corpus_hf.column_names == ["id", "text", "source", "license"]
    assert len(corpus_hf) == json.loads(corpus_build.stdout)["documents"]["out"]
    task_hf = datasets.load_from_disk(str(root / "exports" / "tasks" / task_key))
    assert len(task_hf) == 64
    _materialize(root, tmp_path, "task_hf", task_key)  # the same snapshot: kept, no work
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("task_hf"), asset_partitions=[task_key]),
            limit=5,
        ).records
        reused = [r.asset_materialization.metadata["reused"].value for r in records]  # type: ignore[union-attr]
        assert sorted(reused) == [False, True]
        for asset, key, dataset in (
            ("corpus_hf", corpus_key, corpus_hf),
            ("task_hf", task_key, task_hf),
        ):
            latest = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]),
                limit=1,
            ).records[0]
            metadata = latest.asset_materialization.metadata  # type: ignore[union-attr]
            schema = metadata["dagster/column_schema"].value
            assert [c.name for c in schema.columns] == dataset.column_names, asset
            sample = metadata["sample"].value.records
            assert len(sample) == 3, asset  # a few rows, every column, values as text
            assert set(sample[0].data) == set(dataset.column_names), asset
            assert all(isinstance(v, str) and len(v) <= 200 for v in sample[0].data.values())
    text = {c.name: c for c in schema_of(root, "corpus_hf", corpus_key).columns}["text"]
    assert text.type == "string" and text.description == "the filtered, PII-scrubbed text"


def test_the_cloze_example_reads_a_verified_corpus_build(tmp_path: Path, example: Path) -> None:
    import pyarrow.parquet as pq

    root, cloze = tmp_path / "data", EXAMPLES / "cloze.yaml"
    unregistered = corpus(root, "build", str(cloze))
    assert unregistered.returncode == 64
    assert "'tiny-stories-v1-778947f76566' is not registered" in unregistered.stderr
    assert corpus(root, "register", str(example)).returncode == 0
    unbuilt = corpus(root, "build", str(cloze))
    assert unbuilt.returncode == 65, unbuilt.stderr
    assert "no shards build" in unbuilt.stdout and "materialize shards first" in unbuilt.stdout
    assert corpus(root, "build", str(example)).returncode == 0
    done = corpus(root, "build", str(cloze))
    assert done.returncode == 0, done.stderr
    snapshot = load_snapshot(Path(json.loads(done.stdout)["dataset_path"]))
    assert snapshot.manifest["sources"]["corpus_inputs"] == [
        {
            "partition_key": "tiny-stories-v1-778947f76566",
            "build_id": "corpus/tiny-stories/v1/778947f76566",
            "manifest_sha256": snapshot.manifest["sources"]["corpus_inputs"][0]["manifest_sha256"],
        }
    ]
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        task_key = json.loads(done.stdout)["partition_key"]
        latest = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=dg.AssetKey("task_dataset"), asset_partitions=[task_key]
            ),
            limit=1,
        ).records[0]
        builds = str(latest.asset_materialization.metadata["corpus_builds"].value)  # type: ignore[union-attr]
    # the page names the build it read and links to that partition of shards
    assert "[tiny-stories-v1-778947f76566](/assets/shards?view=partitions&partition=" in builds
    assert "build `corpus/tiny-stories/v1/778947f76566`" in builds
    shards = sorted((root / "corpus" / "tiny-stories" / "v1" / "778947f76566").glob("*.parquet"))
    texts = {r["id"]: r["text"] for s in shards for r in pq.read_table(s).to_pylist()}
    publics = [json.loads(line) for line in (snapshot.path / "public.jsonl").open()]
    answers = [
        json.loads(line)["reference"]["answer"]
        for line in (snapshot.path / "references.jsonl").open()
    ]
    assert len(publics) == 32
    for public, answer in zip(publics, answers, strict=True):
        sentence = public["input"]["text"].replace("____", answer, 1)
        assert sentence in " ".join(texts[public["input"]["document"]].split())


@pytest.mark.timeout(600)
def test_ctrl_c_of_a_task_build_cancels_the_job_and_the_next_build_resumes_it(
    tmp_path: Path,
) -> None:
    root, log, gate = tmp_path / "data", tmp_path / "calls.log", tmp_path / "gate"
    config = scripted_job(
        tmp_path / "configs", "cancelled", 8, log=str(log), pause_after=2, gate=str(gate)
    )
    proc, out, err = build_until_paused(config, root, log, 2, signal.SIGINT)  # Ctrl-C
    assert proc.returncode == 130, (out, err[-2000:])
    folder = next((root / "tasks" / "cancelled").iterdir())
    job = json.loads((folder / "job.json").read_text())
    assert job["state"] == "cancelled", (job, err[-2000:])
    assert not (folder / "dataset").exists()
    before = log_calls(log)
    assert before == [["t00", "t01"], ["t02", "t03"]]
    gate.touch()
    again = corpus(root, "build", str(config))
    assert again.returncode == 0, again.stderr
    assert log_calls(log)[len(before) :] == [["t04", "t05"], ["t06", "t07"]]
    expected = standalone_dataset_id(config, tmp_path / "uninterrupted", root)
    assert json.loads(again.stdout)["dataset_id"] == expected
