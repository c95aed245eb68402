"""The stand-in model script (examples/tasks/standin_model.py): right solvers, stable reports."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from support.values import standin_model

from corpus_assets.recipes.arith_families import STREAMS
from corpus_assets.recipes.arithmetic import ArithmeticRecipe, create_recipe
from corpus_assets.recipes.arithmetic_calibration import recorded_responses
from corpus_assets.tasks.calibration import CalibrationContext
from corpus_assets.tasks.types import DataSample, GenerateContext, PublicTask


@pytest.fixture(scope="module")
def standin() -> ModuleType:
    """The script loaded as a module."""
    return standin_model()


def samples(recipe: ArithmeticRecipe, batches: int, seed: int = 4) -> list[list[DataSample]]:
    """Generated batches of the recipe, each id kept once (as the executor's pool keeps it)."""
    seen: set[str] = set()
    kept: list[list[DataSample]] = []
    for batch_index in range(batches):
        kept.append([])
        for sample in recipe.generate(GenerateContext(seed, batch_index, 1, "model")):
            if sample.task_id not in seen:
                seen.add(sample.task_id)
                kept[-1].append(sample)
    return kept


def test_solver_without_slips_is_always_right(standin: ModuleType) -> None:
    recipe = create_recipe(candidate_count=320)
    graded = Counter[str]()
    for sample in (s for b in samples(recipe, 2) for s in b):
        result = standin.attempt(sample.task.to_json(), "any-trial", slips=False)
        assert recipe.score(sample, result["response"]) == 1.0, (sample, result)
        graded[str(sample.task.metadata["stream"])] += 1
    assert set(graded) == {s.name for s in STREAMS} and min(graded.values()) >= 20


def test_a_slip_is_wrong_and_a_timeout_has_no_response(standin: ModuleType) -> None:
    recipe = create_recipe(candidate_count=320)
    kinds = Counter[str]()
    for sample in samples(recipe, 1)[0]:
        result = standin.attempt(sample.task.to_json(), "standin-b0-r0")
        if result["failure_reason"] == "timeout":
            assert result["response"] is None and result["score"] == 0.0
            kinds["timeout"] += 1
        else:
            assert result["failure_reason"] is None
            assert recipe.score(sample, result["response"]) == result["score"]
            kinds["right" if result["score"] == 1.0 else "slip"] += 1
    assert 0 < kinds["timeout"] < 0.1 * 300 and kinds["slip"] > 20 and kinds["right"] > 150


def write_job(job: Path, batches: list[list[DataSample]]) -> None:
    """A job folder with public batch files, and a candidates file the stand-in must not read."""
    work = job / "work"
    work.mkdir(parents=True)
    for index, batch in enumerate(batches):
        rows = [json.dumps(s.task.to_json()) + "\n" for s in batch]
        (work / f"batch-{index}-public.jsonl").write_text("".join(rows))
        (work / f"batch-{index}-candidates.jsonl").write_text("not json: never read\n")


def test_reports_are_deterministic_distinct_per_repeat_and_readable(
    standin: ModuleType, tmp_path: Path
) -> None:
    recipe = create_recipe(candidate_count=160)
    batches = samples(recipe, 2)
    write_job(tmp_path / "job", batches)
    assert standin.main([str(tmp_path / "job"), str(tmp_path / "a")]) == 0
    assert standin.main([str(tmp_path / "job"), str(tmp_path / "b"), "--repeats", "2"]) == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == [f"batch-{b}-repeat-{r}.json" for b in (0, 1) for r in (0, 1)]
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    first, second = (
        json.loads((tmp_path / "a" / f"batch-0-repeat-{r}.json").read_text()) for r in (0, 1)
    )
    assert list(first) == [
        "model_ref", "harness_ref", "backend_model_digest", "verifier_digest",
        "trial_id", "batch", "repeat", "results",
    ]  # fmt: skip
    assert (first["trial_id"], second["trial_id"]) == ("standin-b0-r0", "standin-b0-r1")
    assert first["model_ref"] == "standin-model-v1" and first["repeat"] == 0
    assert first["backend_model_digest"].startswith("sha256:")
    assert [r["task_id"] for r in first["results"]] == [s.task_id for s in batches[0]]
    assert first["results"] != second["results"]

    calibrate = recorded_responses(
        **{
            k: first[k]
            for k in ("model_ref", "harness_ref", "backend_model_digest", "verifier_digest")
        },
        reports=[[f"batch-0-repeat-{r}.json" for r in (0, 1)]],
        config_dir=str(tmp_path / "a"),
    )
    tasks = [PublicTask(s.task_id, s.task.input, s.task.metadata) for s in batches[0]]
    result = asyncio.run(calibrate(tasks, CalibrationContext(0, 2, "model", 4)))
    by_id = {s.task_id: s for s in batches[0]}
    correct = Counter[str]()
    failed = {a.task_id for a in result.attempts if a.failure_reason is not None}
    for a in result.attempts:
        correct[a.task_id] += int(recipe.score(by_id[a.task_id], a.response))
    outcomes = Counter(correct[t] for t in by_id if t not in failed)
    assert set(outcomes) == {0, 1, 2} and failed  # right in both repeats, once, never


def test_refuses_a_row_with_a_reference_or_no_public_file(
    standin: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = create_recipe(candidate_count=16)
    work = tmp_path / "job" / "work"
    work.mkdir(parents=True)
    row = samples(recipe, 1)[0][0].to_json()
    (work / "batch-0-public.jsonl").write_text(json.dumps(row) + "\n")
    assert standin.main([str(tmp_path / "job"), str(tmp_path / "out")]) == 1
    assert "batch-0-public.jsonl:1: not a public task" in capsys.readouterr().err
    assert standin.main([str(tmp_path / "empty"), str(tmp_path / "out")]) == 1
    assert "no work/batch-N-public.jsonl files" in capsys.readouterr().err
    assert not list((tmp_path / "out").iterdir())
