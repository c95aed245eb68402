"""The calibrated example end to end: probe job → stand-in reports → calibrated snapshot.

`examples/tasks/arithmetic-probe.yaml` writes the public tasks the evaluation answers,
`examples/tasks/standin_model.py` answers them (the shipped reports must be exactly what it
writes), and `examples/tasks/arithmetic-calibrated.yaml` selects against those reports.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.corpus import run_corpus

from corpus_assets.recipes.arithmetic import create_recipe
from corpus_assets.tasks.snapshot import load_snapshot
from corpus_assets.tasks.types import DataSample, PublicTask

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "tasks"
CALIBRATED = EXAMPLES / "arithmetic-calibrated.yaml"
ENV = os.environ | {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
MINIMUM_PER_FAMILY = 2


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=600
    )
    assert out.returncode == 0, out.stderr
    return out


def corpus_tasks(config: Path, output: Path) -> dict[str, Any]:
    out = run_corpus(
        "tasks", "--config", config, "--output", output, environ=ENV, timeout=600, check=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The calibrated example's job folder, run once for this module."""
    output = tmp_path_factory.mktemp("calibrated") / "job"
    corpus_tasks(CALIBRATED, output)
    return output


def test_the_shipped_reports_are_what_the_stand_in_writes_for_the_probe_job(
    tmp_path: Path,
) -> None:
    corpus_tasks(EXAMPLES / "arithmetic-probe.yaml", tmp_path / "probe")
    run(str(EXAMPLES / "standin_model.py"), str(tmp_path / "probe"), str(tmp_path / "reports"))
    written = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert written == ["batch-0-repeat-0.json", "batch-0-repeat-1.json"]
    for name in written:
        assert (tmp_path / "reports" / name).read_bytes() == (
            EXAMPLES / "reports" / name
        ).read_bytes()


def classes(job: Path) -> dict[str, tuple[str, str]]:
    """Per candidate of batch 0: its family, and `incomplete`, `twice`, `once` or `never` as
    regraded from the shipped reports with the recipe's score."""
    recipe = create_recipe()
    reports = [
        json.loads((EXAMPLES / "reports" / f"batch-0-repeat-{r}.json").read_text()) for r in (0, 1)
    ]
    results = [{row["task_id"]: row for row in report["results"]} for report in reports]
    out = {}
    for doc in jsonl(job / "work" / "batch-0-candidates.jsonl"):
        sample = DataSample.from_json(doc)
        rows = [per[sample.task_id] for per in results]
        if any(row["failure_reason"] is not None for row in rows):
            kind = "incomplete"
        else:
            correct = sum(recipe.score(sample, row["response"]) == 1.0 for row in rows)
            kind = {2: "twice", 1: "once", 0: "never"}[correct]
        out[sample.task_id] = (str(sample.task.metadata["family"]), kind)
    return out


def test_probes_are_a_regrade_of_the_reports(calibrated: Path) -> None:
    snapshot = load_snapshot(calibrated / "dataset")
    recipe = create_recipe()
    references = {r["task_id"]: r["reference"] for r in jsonl(snapshot.path / "references.jsonl")}
    publics = {r["task_id"]: r for r in jsonl(snapshot.path / "public.jsonl")}
    reports = [
        json.loads((EXAMPLES / "reports" / f"batch-0-repeat-{r}.json").read_text()) for r in (0, 1)
    ]
    probes = jsonl(snapshot.path / "probes.jsonl")
    assert len(probes) == 2 * len(publics) == 128
    for probe in probes:
        row = next(
            r for r in reports[probe["repeat"]]["results"] if r["task_id"] == probe["task_id"]
        )
        assert probe["response"] == row["response"]
        assert probe["failure_reason"] == row["failure_reason"]
        public = publics[probe["task_id"]]
        task = PublicTask(public["task_id"], public["input"], public["metadata"])
        assert probe["score"] == recipe.score(
            DataSample(task, references[task.task_id]), row["response"]
        )
    provenance = snapshot.manifest["calibration"]["batches"][0]["provenance"][0]
    assert provenance["kind"] == "recorded_responses"
    assert [r["sha256"] for r in provenance["reports"]] == [
        hashlib.sha256((EXAMPLES / "reports" / f"batch-0-repeat-{r}.json").read_bytes()).hexdigest()
        for r in (0, 1)
    ]


def test_the_selection_keeps_the_edge_of_what_the_model_can_do(calibrated: Path) -> None:
    kinds = classes(calibrated)
    chosen = [
        json.loads(line)["task_id"] for line in (calibrated / "dataset" / "public.jsonl").open()
    ]
    order = [kinds[t] for t in chosen]
    assert not [k for _, k in order if k in ("incomplete", "twice")]
    assert Counter(k for _, k in order) == {"once": 57, "never": 7}  # both kinds really occur
    # the family minima come first; after them every once-correct task precedes every
    # twice-wrong one; a twice-wrong task among the minima means its family lacked once-correct
    # ones
    families = sorted({f for f, _ in kinds.values()})
    minima = len(families) * MINIMUM_PER_FAMILY
    rest = [k for _, k in order[minima:]]
    assert rest == sorted(rest, key=lambda k: k != "once")
    eligible_once = Counter(f for f, k in kinds.values() if k == "once")
    for family, kind in order[:minima]:
        if kind == "never":
            assert eligible_once[family] < MINIMUM_PER_FAMILY
    per_family = Counter(f for f, _ in order)
    assert min(per_family[f] for f in families) >= MINIMUM_PER_FAMILY


@pytest.mark.parametrize(
    ("backend", "workers"), [("thread", 1), ("thread", 2), ("process", 2), ("process", 4)]
)
def test_any_backend_and_worker_count_give_the_same_dataset(
    tmp_path: Path, calibrated: Path, backend: str, workers: int
) -> None:
    shutil.copytree(EXAMPLES / "reports", tmp_path / "reports")
    text = CALIBRATED.read_text()
    execution = (
        f"execution:\n  backend: {backend}\n  max_workers: {workers}\n"
        "  batch_size: 16\n  shard_size: 24\n"
    )
    config = tmp_path / "calibrated.yaml"
    config.write_text(text + execution)
    result = corpus_tasks(config, tmp_path / "job")
    assert result["dataset_id"] == load_snapshot(calibrated / "dataset").dataset_id


def test_a_resume_after_a_report_changed_is_refused_naming_the_report(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "reports", tmp_path / "reports")
    config = tmp_path / "calibrated.yaml"
    shutil.copy(CALIBRATED, config)
    corpus_tasks(config, tmp_path / "job")
    report = tmp_path / "reports" / "batch-0-repeat-1.json"
    report.write_text(report.read_text().replace("standin-b0-r1", "another-trial"))
    args = ["tasks", "--config", str(config), "--output", str(tmp_path / "job"), "--resume"]
    out = run_corpus(*args, environ=ENV, timeout=600)
    assert out.returncode == 65, out.stderr
    assert "calibration file 'reports/batch-0-repeat-1.json' changed" in out.stderr
    (tmp_path / "reports" / "batch-0-repeat-0.json").unlink()
    out = run_corpus(*args, environ=ENV, timeout=600)
    assert out.returncode == 65 and "batch-0-repeat-0.json not found" in out.stderr
