"""The executor's calibrate step: calls, checkpointed responses, grading, probes, recovery.

The scripted recipe (`executor_recipes.py`) scores a response 1.0 when it equals the reference
answer; the scripted calibrator (`calibrators.py`) logs what every call was given.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from job_support import IMPORT_PATH, kill_group, run_job, start_job, wait_for_text

from corpus_assets.core.errors import DataError
from corpus_assets.tasks.calibration import CalibrationError
from corpus_assets.tasks.config import load_job_config
from corpus_assets.tasks.executor import DataJob
from corpus_assets.tasks.snapshot import load_snapshot

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ENV = os.environ | {"PYTHONPATH": IMPORT_PATH, "HF_HUB_OFFLINE": "1"}


def samples(count: int, secret: bool = False) -> list[dict[str, Any]]:
    """`count` scripted samples t00.. with answers a00..; `secret` marks every reference."""
    return [
        {
            "id": f"t{i:02d}",
            "input": {"text": f"question {i}"},
            "answer": f"SECRET-{i}" if secret else f"a{i:02d}",
            "metadata": {},
        }
        for i in range(count)
    ]


def write_job(
    folder: Path,
    batches: list[list[dict[str, Any]]],
    calibration: dict[str, Any] | None,
    target: int = 2,
    execution: dict[str, Any] | None = None,
    recipe: str = "executor_recipes:make",
    name: str = "job.json",
    **params: Any,
) -> Path:
    config: dict[str, Any] = {
        "recipe": recipe,
        "target_count": target,
        "purpose": "model",
        "params": {"batches": batches, **params},
        "execution": execution or {},
    }
    if calibration is not None:
        config["calibration"] = calibration
    path = folder / name
    path.write_text(json.dumps(config))
    return path


def calibration(repeats: int = 2, **params: Any) -> dict[str, Any]:
    return {"implementation": "calibrators:answer_all", "repeats": repeats, "params": params}


def run(config: Path, output: Path, resume: bool = False) -> Any:
    return asyncio.run(DataJob(load_job_config(config), output, resume).run())


def log_calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    return [r for r in rows if "call" in r]


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_responses_are_graded_by_the_recipe_and_probes_hold_every_selected_repeat(
    tmp_path: Path,
) -> None:
    answers = {"t00": ["a00", "wrong"], "t01": ["a01", "a01"], "t02": ["x", "y"]}
    config = write_job(
        tmp_path,
        [samples(3)],
        calibration(answers=answers, failures=[["t01", 1]], default="a00"),
        target=3,
    )
    snapshot = run(config, tmp_path / "out")
    probes = jsonl(snapshot.path / "probes.jsonl")
    assert probes == [
        {"task_id": "t00", "repeat": 0, "response": "a00", "failure_reason": None, "score": 1.0},
        {"task_id": "t00", "repeat": 1, "response": "wrong", "failure_reason": None, "score": 0.0},
        {"task_id": "t01", "repeat": 0, "response": "a01", "failure_reason": None, "score": 1.0},
        {
            "task_id": "t01",
            "repeat": 1,
            "response": "a01",
            "failure_reason": "scripted failure",
            "score": None,
        },
        {"task_id": "t02", "repeat": 0, "response": "x", "failure_reason": None, "score": 0.0},
        {"task_id": "t02", "repeat": 1, "response": "y", "failure_reason": None, "score": 0.0},
    ]
    report = json.loads((snapshot.path / "report.json").read_text())
    assert report["calibrated"] is True
    assert report["batches"][0]["calibrated"] == 3
    assert report["batches"][0]["attempts"] == 6
    assert report["batches"][0]["failed_attempts"] == 1
    manifest = snapshot.manifest
    assert manifest["calibration"]["repeats"] == 2
    assert manifest["calibration"]["batches"] == [{"batch": 0, "provenance": [{"scripted": True}]}]
    assert manifest["code"]["calibrator"]["factory"] == "calibrators:answer_all"
    assert list(manifest["code"]["calibrator"]["files"]) == ["calibrators.py"]


def test_calls_hold_at_most_batch_size_tasks_and_at_most_max_workers_run_at_once(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    config = write_job(
        tmp_path,
        [samples(10)],
        calibration(repeats=3, log=str(log), delay=0.3),
        execution={"batch_size": 3, "max_workers": 2},
    )
    run(config, tmp_path / "out")
    calls = log_calls(log)
    assert sorted(len(c["task_ids"]) for c in calls) == [1, 3, 3, 3]
    assert max(c["running"] for c in calls) == 2  # two at a time, never three
    asked = [t for c in calls for t in c["task_ids"]]
    assert sorted(asked) == [f"t{i:02d}" for i in range(10)]  # every task once
    assert {c["repeats"] for c in calls} == {3}  # all repeats inside the one call


def test_the_calibrator_never_sees_a_reference_and_cannot_change_a_candidate(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    config = write_job(
        tmp_path, [samples(6, secret=True)], calibration(log=str(log), mutate=True), target=6
    )
    snapshot = run(config, tmp_path / "out")
    seen = [s for call in log_calls(log) for s in call["strings"]]
    assert "question 0" in seen and "t05" in seen  # it did see the public side
    assert not [s for s in seen if "SECRET" in s]
    public = (snapshot.path / "public.jsonl").read_text()
    assert "mutated" not in public and "question 5" in public
    references = (snapshot.path / "references.jsonl").read_text()
    assert "SECRET-5" in references


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ("missing", "did not answer (task 't02', repeat 1)"),
        ("extra", "answered an extra pair (task 'not-asked', repeat 0)"),
        ("twice", "answered (task 't00', repeat 0) twice"),
    ],
)
def test_every_pair_must_come_back_exactly_once(tmp_path: Path, broken: str, message: str) -> None:
    config = write_job(tmp_path, [samples(3)], calibration(broken=broken))
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 65, out.stderr
    assert message in out.stderr
    job = json.loads((tmp_path / "out" / "job.json").read_text())
    assert job["state"] == "failed" and message in job["error"]


def test_a_grading_failure_regrades_from_the_stored_responses_without_calling_again(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    fail = {"kind": "ValueError", "on": "t03", "times": 1, "counter": str(tmp_path / "n")}
    config = write_job(
        tmp_path,
        [samples(8)],
        calibration(log=str(log)),
        execution={"batch_size": 2},
        score_fail=fail,
    )
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 1 and "scripted ValueError" in out.stderr
    assert len(log_calls(log)) == 4  # every call answered and committed before grading
    db = sqlite3.connect(tmp_path / "out" / "work" / "checkpoints.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 16
    db.close()
    snapshot = run(config, tmp_path / "out", resume=True)
    assert len(log_calls(log)) == 4  # no call repeated
    clean = write_job(tmp_path, [samples(8)], calibration(), name="clean.json")
    assert snapshot.dataset_id == run(clean, tmp_path / "clean").dataset_id


def test_a_retried_grading_failure_needs_no_new_calls(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    fail = {"kind": "OSError", "on": "t01", "times": 1, "counter": str(tmp_path / "n")}
    config = write_job(
        tmp_path,
        [samples(4)],
        calibration(log=str(log)),
        execution={"batch_size": 2, "max_retries": 1, "retry_delay": 0.01},
        score_fail=fail,
    )
    run(config, tmp_path / "out")
    assert (tmp_path / "n").read_text().splitlines() == ["t01"]  # the fault really happened
    assert len(log_calls(log)) == 2


def test_a_failed_call_is_retried_and_the_answered_calls_are_not_asked_again(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    fail = {"kind": "TimeoutError", "calls": [2], "times": 1, "counter": str(tmp_path / "n")}
    config = write_job(
        tmp_path,
        [samples(8)],
        calibration(log=str(log), fail=fail),
        execution={"batch_size": 2, "max_retries": 2, "retry_delay": 0.01},
    )
    run(config, tmp_path / "out")
    asked = [c["task_ids"] for c in log_calls(log)]
    assert asked == [["t00", "t01"], ["t02", "t03"], ["t04", "t05"], ["t04", "t05"], ["t06", "t07"]]


def test_a_calibrator_that_is_not_async_fails_naming_the_protocol(tmp_path: Path) -> None:
    config = write_job(tmp_path, [samples(2)], {"implementation": "calibrators:not_async"})
    with pytest.raises(CalibrationError, match="not an awaitable"):
        run(config, tmp_path / "out")


def test_killed_during_calibration_the_job_resumes_without_repeating_a_completed_call(
    tmp_path: Path,
) -> None:
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    params = {"log": str(log), "pause_after": 3, "gate": str(gate)}
    config = write_job(
        tmp_path, [samples(12)], calibration(**params), target=4, execution={"batch_size": 2}
    )
    proc = start_job(config, tmp_path / "out", ENV, tmp_path / "stderr")
    wait_for_text(log, '{"pause": 3}', proc)
    kill_group(proc)
    before = log_calls(log)
    assert [c["task_ids"] for c in before] == [["t00", "t01"], ["t02", "t03"], ["t04", "t05"]]
    db = sqlite3.connect(tmp_path / "out" / "work" / "checkpoints.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 3
    db.close()
    gate.touch()
    out = run_job(config, tmp_path / "out", ENV, resume=True)
    assert out.returncode == 0, out.stderr
    after = log_calls(log)[len(before) :]
    assert [c["task_ids"] for c in after] == [["t06", "t07"], ["t08", "t09"], ["t10", "t11"]]
    uninterrupted = run(config, tmp_path / "again")
    assert load_snapshot(tmp_path / "out" / "dataset").dataset_id == uninterrupted.dataset_id


def test_a_resume_with_other_reports_or_calibrator_params_is_refused(tmp_path: Path) -> None:
    fail = {"kind": "ValueError", "on": "t01", "times": 1, "counter": str(tmp_path / "n")}
    config = write_job(tmp_path, [samples(3)], calibration(), score_fail=fail)
    with pytest.raises(ValueError, match="scripted"):
        run(config, tmp_path / "out")
    write_job(tmp_path, [samples(3)], calibration(default="other"), score_fail=fail)
    with pytest.raises(DataError, match="config"):
        run(config, tmp_path / "out", resume=True)
