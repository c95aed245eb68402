"""The calibration protocol and the recorded-responses calibrator, on real report files."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.core.errors import EXIT_DATA
from corpus_assets.recipes.arithmetic_calibration import recorded_responses
from corpus_assets.recipes.report_index import scan_report
from corpus_assets.tasks.calibration import (
    Attempt,
    CalibrationBatch,
    CalibrationContext,
    CalibrationError,
    check_attempts,
    public_copies,
)
from corpus_assets.tasks.types import PublicTask

IDENTITY = {
    "model_ref": "stand-in-model@1",
    "harness_ref": "boxed-harness@1",
    "backend_model_digest": "sha256:aaaa",
    "verifier_digest": "sha256:bbbb",
}
TASKS = [PublicTask("t1", {"problem": "1+1?"}, {"family": "x"}), PublicTask("t2", {"problem": "2"})]


def context(batch: int = 0, repeats: int = 2) -> CalibrationContext:
    return CalibrationContext(batch_index=batch, repeats=repeats, purpose="model", seed=7)


def report(
    batch: int, repeat: int, trial: str, over: dict[str, Any] | None = None
) -> dict[str, Any]:
    results = [
        {
            "task_id": "t1",
            "response": f"\\boxed{{{2 + repeat}}}",
            "failure_reason": None,
            "score": 0.5,
        },
        {"task_id": "t2", "response": None, "failure_reason": "timeout", "score": 1.0},
    ]
    return {
        **IDENTITY,
        "trial_id": trial,
        "batch": batch,
        "repeat": repeat,
        "results": results,
        **(over or {}),
    }


def write(folder: Path, name: str, doc: dict[str, Any]) -> str:
    (folder / name).write_text(json.dumps(doc))
    return name


def calibrator(folder: Path, reports: list[list[str]]) -> Any:
    return recorded_responses(**IDENTITY, reports=reports, config_dir=str(folder))


def run(cal: Any, ctx: CalibrationContext) -> CalibrationBatch:
    result: CalibrationBatch = asyncio.run(cal(public_copies(TASKS), ctx))
    return result


def test_recorded_reports_answer_every_pair_and_record_their_digests(tmp_path: Path) -> None:
    files = [
        write(tmp_path, "r0.json", report(0, 0, "trial-a")),
        write(tmp_path, "r1.json", report(0, 1, "trial-b")),
    ]
    batch = run(calibrator(tmp_path, [files]), context())
    pairs = check_attempts(TASKS, 2, batch)
    assert pairs[("t1", 0)] == Attempt("t1", 0, "\\boxed{2}", None)
    assert pairs[("t1", 1)].response == "\\boxed{3}"
    assert pairs[("t2", 1)].failure_reason == "timeout"
    assert not any(hasattr(a, "score") for a in batch.attempts)  # stored scores are dropped
    assert batch.provenance["model_ref"] == "stand-in-model@1"
    assert batch.provenance["reports"] == [
        {
            "path": str((tmp_path / f).resolve()),
            "repeat": r,
            "trial_id": t,
            "sha256": hashlib.sha256((tmp_path / f).read_bytes()).hexdigest(),
        }
        for r, (f, t) in enumerate(zip(files, ["trial-a", "trial-b"], strict=True))
    ]


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"model_ref": "other"}, "'model_ref'"),
        ({"verifier_digest": "sha256:cccc"}, "'verifier_digest'"),
        ({"batch": 3}, "'batch'"),
        ({"repeat": 1}, "'repeat'"),
        ({"trial_id": ""}, "'trial_id'"),
        ({"results": {}}, "'results'"),
    ],
)
def test_a_mismatched_report_field_is_named_with_the_file(
    tmp_path: Path, over: dict[str, Any], field: str
) -> None:
    files = [
        write(tmp_path, "bad.json", report(0, 0, "t", over)),
        write(tmp_path, "ok.json", report(0, 1, "u")),
    ]
    with pytest.raises(CalibrationError) as err:
        run(calibrator(tmp_path, [files]), context())
    assert field in str(err.value) and "bad.json" in str(err.value)
    assert err.value.exit_code == EXIT_DATA


def test_uncovered_extra_and_repeated_tasks_fail(tmp_path: Path) -> None:
    short = report(0, 0, "a")
    short["results"] = short["results"][:1]
    with pytest.raises(CalibrationError, match="does not cover task 't2'"):
        run(calibrator(tmp_path, [[write(tmp_path, "a.json", short)]]), context(repeats=1))
    extra = report(0, 0, "a")
    extra["results"].append({"task_id": "t9", "response": "x"})
    with pytest.raises(CalibrationError, match="'t9', which is not a candidate"):
        run(calibrator(tmp_path, [[write(tmp_path, "b.json", extra)]]), context(repeats=1))
    twice = report(0, 0, "a")
    twice["results"].append(twice["results"][0])
    with pytest.raises(CalibrationError, match="'t1' appears twice"):
        run(calibrator(tmp_path, [[write(tmp_path, "c.json", twice)]]), context(repeats=1))


def test_missing_batches_repeats_and_shared_trials_fail(tmp_path: Path) -> None:
    one = write(tmp_path, "r0.json", report(0, 0, "same"))
    two = write(tmp_path, "r1.json", report(0, 1, "same"))
    with pytest.raises(CalibrationError, match="no reports for batch 1"):
        run(calibrator(tmp_path, [[one, two]]), context(batch=1))
    with pytest.raises(CalibrationError, match="has 1 report"):
        run(calibrator(tmp_path, [[one]]), context(repeats=2))
    with pytest.raises(CalibrationError, match="distinct trial ids"):
        run(calibrator(tmp_path, [[one, two]]), context())
    with pytest.raises(CalibrationError, match="cannot read"):
        run(calibrator(tmp_path, [["gone.json"]]), context(repeats=1))


def test_bad_factory_params_fail() -> None:
    with pytest.raises(CalibrationError, match="model_ref"):
        recorded_responses(**{**IDENTITY, "model_ref": ""}, reports=[])
    with pytest.raises(CalibrationError, match="reports must be a list"):
        recorded_responses(**IDENTITY, reports=[["a"], "b"])  # type: ignore[list-item]


def test_every_pair_exactly_once_names_the_first_problem() -> None:
    good = [Attempt(t.task_id, r, "x") for t in TASKS for r in range(2)]
    assert len(check_attempts(TASKS, 2, CalibrationBatch(tuple(good)))) == 4
    with pytest.raises(CalibrationError, match=r"did not answer \(task 't2', repeat 1\)"):
        check_attempts(TASKS, 2, CalibrationBatch(tuple(good[:-1])))
    with pytest.raises(CalibrationError, match=r"extra pair \(task 't1', repeat 2\)"):
        check_attempts(TASKS, 2, CalibrationBatch((*good, Attempt("t1", 2, "x"))))
    with pytest.raises(CalibrationError, match=r"\(task 't1', repeat 0\) twice"):
        check_attempts(TASKS, 2, CalibrationBatch((*good, good[0])))
    with pytest.raises(CalibrationError, match="not JSON"):
        check_attempts(TASKS, 1, CalibrationBatch((Attempt("t1", 0, {1, 2}),)))
    with pytest.raises(CalibrationError, match="allowed: CalibrationBatch"):
        check_attempts(TASKS, 1, [good[0]])


def test_a_calibrator_that_mutates_its_tasks_changes_no_candidate() -> None:
    originals = [PublicTask("t", {"problem": "p", "values": [1, 2]}, {"family": "f"})]
    copies = public_copies(originals)
    copies[0].input["values"].append(3)  # type: ignore[index]
    copies[0].metadata["family"] = "changed"  # type: ignore[index]
    assert originals[0].input == {"problem": "p", "values": [1, 2]}
    assert originals[0].metadata == {"family": "f"}
    assert all(isinstance(c, PublicTask) and not hasattr(c, "reference") for c in copies)


def test_a_call_about_part_of_a_batch_gets_its_pairs_and_the_report_must_cover_the_batch(
    tmp_path: Path,
) -> None:
    files = [
        write(tmp_path, "r0.json", report(0, 0, "a")),
        write(tmp_path, "r1.json", report(0, 1, "b")),
    ]
    cal = calibrator(tmp_path, [files])
    whole = CalibrationContext(0, 2, "model", 7, batch_task_ids=("t1", "t2"))
    part = asyncio.run(cal(public_copies(TASKS[1:]), whole))
    assert [(a.task_id, a.repeat) for a in part.attempts] == [("t2", 0), ("t2", 1)]
    bigger = CalibrationContext(1, 2, "model", 7, batch_task_ids=("t1", "t2", "t3"))
    later = [
        write(tmp_path, "s0.json", report(1, 0, "c")),
        write(tmp_path, "s1.json", report(1, 1, "d")),
    ]
    cal = calibrator(tmp_path, [files, later])
    uncovered = r"s0\.json: field 'results' does not cover task 't3'"
    with pytest.raises(CalibrationError, match=uncovered):
        asyncio.run(cal(public_copies(TASKS[:1]), bigger))


@settings(max_examples=60, deadline=None)
@given(
    fields=st.dictionaries(
        st.text(min_size=1, max_size=5).filter(lambda k: k != "results"),
        st.recursive(st.none() | st.booleans() | st.integers() | st.text(), st.lists, max_leaves=4),
        max_size=4,
    ),
    results=st.lists(
        st.fixed_dictionaries({"task_id": st.text(max_size=8), "response": st.text()}),
        max_size=6,
    ),
    where=st.integers(min_value=0, max_value=4),
    indent=st.sampled_from([None, 0, 2]),
    chunk=st.sampled_from([1, 2, 3, 7, 64, 1 << 20]),
)
def test_the_streaming_scanner_reads_what_json_reads(
    fields: dict[str, Any],
    results: list[dict[str, Any]],
    where: int,
    indent: int | None,
    chunk: int,
) -> None:
    """Whatever the chunk size: values cut at a chunk's end (numbers too) are read whole."""
    items = list(fields.items())
    items.insert(min(where, len(items)), ("results", results))
    text = json.dumps(dict(items), indent=indent)
    seen: list[object] = []
    found = scan_report(io.StringIO(text), Path("r.json"), lambda i, r: seen.append(r), chunk)
    assert seen == results
    assert found == {**fields, "results": []}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "must be a JSON object"),
        ('{"results": [1,, 2]}', "not JSON"),
        ('{"a": 1} trailing', "not JSON"),
        ("{", "not JSON"),
        ('{"results": [1], }', "not JSON"),
    ],
)
def test_the_streaming_scanner_refuses_what_json_refuses(text: str, message: str) -> None:
    for chunk in (1, 4, 1 << 20):
        with pytest.raises(CalibrationError, match=message):
            scan_report(io.StringIO(text), Path("r.json"), lambda i, r: None, chunk)
