"""Small guarantees of the contract: what a failed attempt is, the score range, OSError retries.

Jobs run in-process on the scripted recipes of `executor_recipes.py`; the factories below are
named `test_protocol_guarantees:...` in the job configs.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from executor_recipes import ScriptedRecipe, sample

from corpus_assets.core.errors import TransientError
from corpus_assets.tasks.calibration import Attempt, CalibrationBatch, CalibrationContext
from corpus_assets.tasks.config import load_job_config
from corpus_assets.tasks.executor import DataJob
from corpus_assets.tasks.snapshot import Snapshot
from corpus_assets.tasks.types import JSON, DataSample, PublicTask, check_score
from corpus_assets.tasks.workers import RecipeError

SAMPLES = [sample(f"t{i:02d}", f"question {i}", f"a{i:02d}") for i in range(4)]


def write_job(folder: Path, recipe: str = "executor_recipes:make", **top: Any) -> Path:
    params = {"batches": [SAMPLES], **top.pop("params", {})}
    config = {"recipe": recipe, "target_count": 2, "purpose": "model", "params": params, **top}
    path = folder / "job.json"
    path.write_text(json.dumps(config))
    return path


def run(config: Path, output: Path) -> Snapshot:
    snapshot: Snapshot = asyncio.run(DataJob(load_job_config(config), output).run())
    return snapshot


def jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- a failed attempt is one with a non-empty failure reason ----------------------------------


def empty_reasons() -> Any:
    """A calibration factory: right in repeat 0, wrong in repeat 1, failure_reason "" always."""

    async def calibrate(
        tasks: Sequence[PublicTask], context: CalibrationContext
    ) -> CalibrationBatch:
        attempts = [
            Attempt(t.task_id, r, "a" + t.task_id[1:] if r == 0 else "wrong", "")
            for t in tasks
            for r in range(context.repeats)
        ]
        return CalibrationBatch(tuple(attempts))

    return calibrate


def test_an_empty_failure_reason_is_not_a_failure(tmp_path: Path) -> None:
    calibration = {"implementation": "test_protocol_guarantees:empty_reasons", "repeats": 2}
    snapshot = run(write_job(tmp_path, calibration=calibration), tmp_path / "out")
    probes = jsonl(snapshot.path / "probes.jsonl")
    assert [(p["task_id"], p["failure_reason"], p["score"]) for p in probes] == [
        ("t00", None, 1.0),
        ("t00", None, 0.0),
        ("t01", None, 1.0),
        ("t01", None, 0.0),
    ]
    report = json.loads((snapshot.path / "report.json").read_text())
    assert report["batches"][0]["attempts"] == 8
    assert report["batches"][0]["failed_attempts"] == 0


# -- a score is a finite number in [0, 1] -----------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, 0.0, 0.25, 1.0])
def test_check_score_accepts_numbers_in_the_unit_interval(value: float) -> None:
    score = check_score(value)
    assert score == value and type(score) is float


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.5, "a finite number in \\[0, 1\\], got 1.5"),
        (-0.25, "a finite number in \\[0, 1\\], got -0.25"),
        (2, "a finite number in \\[0, 1\\], got 2"),
        (math.nan, "a finite number in \\[0, 1\\], got nan"),
        (math.inf, "a finite number in \\[0, 1\\], got inf"),
        (True, "a number in \\[0, 1\\], got bool"),
        ("1", "a number in \\[0, 1\\], got str"),
        (None, "a number in \\[0, 1\\], got NoneType"),
    ],
)
def test_check_score_refuses_anything_else(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^a score must be {message}$"):
        check_score(value)


class FixedScore(ScriptedRecipe):
    """The scripted recipe whose `score` returns `value` whatever the response."""

    def __init__(self, value: Any, **params: Any) -> None:
        super().__init__(**params)
        self.value = value

    def score(self, sample: DataSample, response: JSON) -> float:
        return self.value  # type: ignore[no-any-return]


def fixed_score(value: Any, **params: Any) -> FixedScore:
    return FixedScore(value, **params)


@pytest.mark.parametrize(("value", "shown"), [(1.5, "1.5"), (-1, "-1"), ("0.5", "str")])
def test_a_score_outside_the_unit_interval_fails_the_job_naming_the_task(
    tmp_path: Path, value: Any, shown: str
) -> None:
    config = write_job(
        tmp_path,
        "test_protocol_guarantees:fixed_score",
        params={"value": value},
        calibration={"implementation": "calibrators:answer_all", "repeats": 1},
    )
    with pytest.raises(RecipeError, match=f"^score\\('t00'\\): a score must be .*got {shown}$"):
        run(config, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "job.json").read_text())["state"] == "failed"
    assert not (tmp_path / "out" / "dataset").exists()


# -- every OSError and TimeoutError is retried ------------------------------------------------


@pytest.mark.parametrize("backend", ["thread", "process"])
@pytest.mark.parametrize("kind", ["ConnectionResetError", "OSError"])
def test_a_recipe_os_error_while_a_shard_is_written_is_retried(
    tmp_path: Path, backend: str, kind: str
) -> None:
    counter = tmp_path / "raised.txt"
    config = write_job(
        tmp_path,
        "executor_recipes:make_sharded",
        params={"fail": {"kind": kind, "on": "t01", "times": 1, "counter": str(counter)}},
        execution={"backend": backend, "shard_size": 2, "max_retries": 1, "retry_delay": 0.01},
    )
    snapshot = run(config, tmp_path / "out")
    assert counter.read_text().splitlines() == ["t01"]
    assert [t.task_id for t in snapshot.public_tasks()] == ["t00", "t01"]


def fail_publication_once(monkeypatch: pytest.MonkeyPatch, errno_value: int) -> list[str]:
    """Make the rename that publishes `dataset/` fail once with `errno_value`; the failures."""
    real, failed = os.replace, []

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        if Path(dst).name == "dataset" and not failed:
            failed.append(str(dst))
            raise OSError(errno_value, os.strerror(errno_value))
        real(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return failed


@pytest.mark.parametrize("errno_value", [errno.EIO, errno.ENOSPC])
def test_a_disk_error_while_publishing_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errno_value: int
) -> None:
    failed = fail_publication_once(monkeypatch, errno_value)
    config = write_job(tmp_path, execution={"max_retries": 1, "retry_delay": 0.01})
    snapshot = run(config, tmp_path / "out")
    assert failed == [str(tmp_path / "out" / "dataset")]
    assert snapshot.rows == 2


def test_a_disk_error_past_the_retries_is_transient(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_publication_once(monkeypatch, errno.EIO)
    config = write_job(tmp_path)  # max_retries 0
    with pytest.raises(TransientError, match=r"dataset: Input/output error \(after 1 attempt"):
        run(config, tmp_path / "out")
