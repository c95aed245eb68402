"""The recipe cap is a selection bucket cap: generation goes on, selection caps each bucket.

The arithmetic recipe in the calibrated shape (1024 candidates a batch, `maximum_per_recipe`
48, `minimum_one_pass`, up to 8 batches) against `scripted_model`, a calibrator that solves
each public task with the stand-in's solvers and then slips on purpose: every fractions task is
right in one repeat of two (the best rank, so the cap on its two streams binds), other tasks
are right in both (not eligible), in one or in neither by a hash of the task id.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.values import standin_model

from corpus_assets.recipes.arith_families import FAMILIES
from corpus_assets.recipes.arith_select import bucket
from corpus_assets.recipes.arithmetic import create_recipe
from corpus_assets.tasks.calibration import Attempt, CalibrationBatch, CalibrationContext
from corpus_assets.tasks.config import load_job_config
from corpus_assets.tasks.executor import DataJob
from corpus_assets.tasks.types import GenerateContext, PublicTask

SEED = 5
CAP = 48
CANDIDATES = 1024


def outcome(task: PublicTask) -> int:
    """How many of two repeats are right: 1 for fractions, else 2, 1 or 0 (1/4, 1/2, 1/4)."""
    if task.metadata["family"] == "fractions":
        return 1
    draw = hashlib.sha256(task.task_id.encode()).digest()[0] % 4
    return 2 if draw == 0 else 1 if draw < 3 else 0


def scripted_model() -> Any:
    """A calibration factory: right answers from the public values, slipping by `outcome`."""
    standin = standin_model()

    async def calibrate(
        tasks: Sequence[PublicTask], context: CalibrationContext
    ) -> CalibrationBatch:
        attempts = []
        for task in tasks:
            answer = standin.solve(task.to_json())
            for repeat in range(context.repeats):
                value = answer if repeat < outcome(task) else answer + 1
                response = f"\\boxed{{{standin.format_answer(value)}}}"
                attempts.append(Attempt(task.task_id, repeat, response))
        return CalibrationBatch(tuple(attempts), {"scripted": "cap test"})

    return calibrate


def write_config(folder: Path, target: int, minimum_one_pass: int) -> Path:
    config = {
        "recipe": "corpus_assets.recipes.arithmetic:create_recipe",
        "target_count": target,
        "purpose": "model",
        "seed": SEED,
        "params": {
            "candidate_count": CANDIDATES,
            "maximum_per_recipe": CAP,
            "minimum_one_pass": minimum_one_pass,
        },
        "max_batches": 8,
        "calibration": {"implementation": "test_recipe_cap:scripted_model", "repeats": 2},
        "execution": {"batch_size": 512},
    }
    path = folder / "calibrated.json"
    path.write_text(json.dumps(config))
    return path


def batch_of(task_ids: set[str], batches: int) -> dict[str, int]:
    """The batch whose generation first made each task (as the pool keeps the first)."""
    recipe, found = create_recipe(candidate_count=CANDIDATES), dict[str, int]()
    for index in range(batches):
        context = GenerateContext(SEED, index, 0, "model")
        for sample in recipe.generate(context):
            cleaned = recipe.clean(sample)
            if cleaned is not None and cleaned.task_id in task_ids:
                found.setdefault(cleaned.task_id, index)
    return found


# A batch has about 700 selectable candidates, 500 of them right once (the fractions streams
# give 48 of their 64 each). A cap on generation stopped a job at 768 candidates in all.
@pytest.mark.parametrize(("target", "minimum_one_pass", "batches"), [(512, 450, 1), (800, 600, 2)])
def test_the_calibrated_shape_reaches_its_target_with_the_cap_per_stream_and_batch(
    tmp_path: Path, target: int, minimum_one_pass: int, batches: int
) -> None:
    config = load_job_config(write_config(tmp_path, target, minimum_one_pass))
    snapshot = asyncio.run(DataJob(config, tmp_path / "job").run())
    assert snapshot.rows == target
    report = json.loads((snapshot.path / "report.json").read_text())
    assert [b["generated"] for b in report["batches"]] == [CANDIDATES] * batches
    tasks = list(snapshot.public_tasks())
    where = batch_of({t.task_id for t in tasks}, batches)
    buckets = Counter(bucket(str(t.metadata["stream"]), where[t.task_id]) for t in tasks)
    assert max(buckets.values()) == CAP  # reached by a fractions stream: all 64 were eligible
    assert {t.metadata["family"] for t in tasks} == set(FAMILIES)
    assert sum(1 for t in tasks if outcome(t) == 1) >= minimum_one_pass
    assert not any(outcome(t) == 2 for t in tasks)
