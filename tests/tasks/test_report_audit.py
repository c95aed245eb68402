"""The `task_report_adds_up` check: a published job's report adds up, and each way it can stop
adding up (a batch's parts, the totals, the selection) is reported by name."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from job_support import job_config, job_env, run_job

from corpus_assets.tasks.audit import report_adds_up

Report = dict[str, Any]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    config = job_config(folder / "job.json")
    done = run_job(config, folder / "job", job_env(folder / "calls.log"))
    assert done.returncode == 0, done.stderr
    return folder / "job"


def _batch_parts(report: Report) -> None:
    report["batches"][0]["rejected"] += 1


def _totals(report: Report) -> None:
    report["totals"]["generated"] += 1
    report["totals"]["retained"] += 1  # the totals add up, but not to the sum of the batches


def _selection(report: Report) -> None:
    report["selection"]["selected"] -= 1


@pytest.mark.parametrize(
    ("tamper", "says"),
    [
        (_batch_parts, "batch 0: generated "),
        (_totals, "totals.generated "),
        (_selection, "selected 99, rows 100 and target_count 100 differ"),
    ],
    ids=["a batch's parts", "the totals", "the selection"],
)
def test_a_report_that_does_not_add_up_is_named(
    published: Path, tmp_path: Path, tamper: Callable[[Report], None], says: str
) -> None:
    assert report_adds_up(published).passed, report_adds_up(published).problems
    folder = tmp_path / "job"
    shutil.copytree(published, folder)
    path = folder / "dataset" / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    tamper(report)
    path.write_text(json.dumps(report), encoding="utf-8")
    audit = report_adds_up(folder)
    assert not audit.passed
    assert any(says in problem for problem in audit.problems), audit.problems
