"""What the executor checks and rebuilds on its own: declared files hashed again before
publication, and the derived batch files rebuilt from the checkpoints on resume.

Real jobs of the scripted recipe (`executor_recipes.py`), in process or through `corpus tasks`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from job_support import IMPORT_PATH, job_state, run_job

from corpus_assets.tasks.checkpoints import SCHEMA_VERSION

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ENV = os.environ | {"PYTHONPATH": IMPORT_PATH}


def sample(task_id: str, text: str) -> dict[str, Any]:
    return {"id": task_id, "input": {"text": text}, "answer": "1", "metadata": {}}


def write_config(folder: Path, **fields: Any) -> Path:
    """A JSON job config for the scripted recipe; `params` are the recipe's."""
    config = {"recipe": "executor_recipes:make", "target_count": 2, "purpose": "harness"}
    path = folder / "job.json"
    path.write_text(json.dumps(config | fields), encoding="utf-8")
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- declared files hashed again before publication ----------------------------------------


@pytest.mark.parametrize(
    ("key", "name", "content", "what"),
    [
        pytest.param("inputs", "input.txt", "input bytes\n", "input", id="input"),
        pytest.param(
            "exclusions", "exclusions.jsonl", '{"task_id": "none"}\n', "exclusion", id="exclusion"
        ),
    ],
)
def test_a_declared_file_that_changes_during_the_job_fails_it_and_publishes_nothing(
    tmp_path: Path, key: str, name: str, content: str, what: str
) -> None:
    declared = tmp_path / name
    declared.write_text(content, encoding="utf-8")
    before = sha256(declared)
    config = write_config(
        tmp_path,
        **{key: [name]},
        params={
            "batches": [[sample("a", "A"), sample("b", "B")]],
            "append_to": str(declared),  # select() appends to it: after it was hashed
        },
    )
    output = tmp_path / "out"
    done = run_job(config, output, ENV)
    after = sha256(declared)
    assert before != after
    assert done.returncode == 65, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, done.stderr  # one line, no traceback
    assert f"{what} file {name!r} changed while the job ran" in errors[0]
    assert before in errors[0] and after in errors[0]
    assert not (output / "dataset").exists()
    assert not (output / ".dataset.staging").exists()
    job = job_state(output)
    assert job["state"] == "failed" and job["exit_code"] == 65, job

    declared.write_text(content, encoding="utf-8")  # restored: the resume publishes
    resumed = run_job(config, output, ENV, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    manifest = json.loads((output / "dataset" / "manifest.json").read_text())
    assert manifest["sources"][key] == {name: before}


# -- derived batch files rebuilt on resume -------------------------------------------------


def batch_files(output: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((output / "work").glob("batch-*.jsonl"))}


def three_batches(tmp_path: Path, **params: Any) -> Path:
    """A job whose select needs three batches of two candidates."""
    batches = [[sample(f"{b}{i}", f"B{b}-{i}") for i in range(2)] for b in range(3)]
    return write_config(tmp_path, target_count=2, params={"batches": batches, "need": 6, **params})


def damage(output: Path, batches: int = 3) -> None:
    """Delete two derived files, forge one and add a byte to one (of the first `batches`)."""
    work = output / "work"
    (work / "batch-0-candidates.jsonl").unlink()
    (work / "batch-1-public.jsonl").unlink()
    (work / "batch-0-public.jsonl").write_bytes(b'{"task_id":"forged"}\n')
    with open(work / f"batch-{batches - 1}-candidates.jsonl", "ab") as fh:
        fh.write(b"\n")


def test_a_finished_jobs_resume_rebuilds_missing_and_damaged_batch_files(tmp_path: Path) -> None:
    config, output = three_batches(tmp_path), tmp_path / "out"
    first = run_job(config, output, ENV)
    assert first.returncode == 0, first.stderr
    originals = batch_files(output)
    assert len(originals) == 6  # both files of batches 0, 1 and 2
    damage(output)
    resumed = run_job(config, output, ENV, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert batch_files(output) == originals
    assert "rebuilt work/batch-0-candidates.jsonl from the checkpoints" in resumed.stderr
    again = run_job(config, output, ENV, resume=True)  # intact files are left alone
    assert "rebuilt" not in again.stderr
    assert batch_files(output) == originals


def test_a_failed_jobs_resume_rebuilds_the_batch_files_of_every_batch(tmp_path: Path) -> None:
    """The job fails in batch 2; its resume rebuilds the files of batches 0 and 1 as well."""
    plain = tmp_path / "plain"
    plain.mkdir()
    assert run_job(three_batches(plain), plain / "out", ENV).returncode == 0
    originals = batch_files(plain / "out")

    fail = {"kind": "ValueError", "times": 1, "counter": str(tmp_path / "raised.txt"), "on": "20"}
    config, output = three_batches(tmp_path, fail=fail), tmp_path / "out"
    failed = run_job(config, output, ENV)
    assert failed.returncode == 1, failed.stderr
    assert job_state(output)["state"] == "failed"
    assert sorted(batch_files(output)) == [n for n in sorted(originals) if "batch-2" not in n]
    damage(output, batches=2)
    resumed = run_job(config, output, ENV, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert batch_files(output) == originals


# -- a checkpoint database of another version ----------------------------------------------


def unstamp(output: Path) -> Path:
    """Make the job's database read as one of schema version 1 (written before the stamp)."""
    database = output / "work" / "checkpoints.sqlite3"
    db = sqlite3.connect(database)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.execute("PRAGMA user_version=0")
    db.close()
    return database


def test_a_resume_of_checkpoints_of_another_version_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    fail = {"kind": "ValueError", "times": 1, "counter": str(tmp_path / "raised.txt"), "on": "20"}
    config, output = three_batches(tmp_path, fail=fail), tmp_path / "out"
    assert run_job(config, output, ENV).returncode == 1
    database = unstamp(output)
    before = sha256(database)
    resumed = run_job(config, output, ENV, resume=True)
    assert resumed.returncode == 65, resumed.stderr
    errors = [line for line in resumed.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, resumed.stderr
    assert (
        f"schema version 1, this version of corpus_assets reads version {SCHEMA_VERSION}"
        in (errors[0])
    )
    assert sha256(database) == before  # nothing written into it
    assert not (output / "dataset").exists()


def test_a_finished_job_of_another_version_still_resumes_to_its_snapshot(tmp_path: Path) -> None:
    config, output = three_batches(tmp_path), tmp_path / "out"
    first = run_job(config, output, ENV)
    assert first.returncode == 0, first.stderr
    unstamp(output)
    resumed = run_job(config, output, ENV, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "of another corpus_assets version: batch files not checked" in resumed.stderr
    assert job_state(output)["state"] == "succeeded"
