"""The answer journal: what `keep` returned from is read back, a torn tail is cut off, the
answers of committed tasks are dropped, and a line is kept all or nothing; a calibrator that
keeps its answers is not asked them again by the executor's retry."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.tasks.answer_journal import AnswerJournal, answer_line, read_lines
from corpus_assets.tasks.calibration import Attempt
from corpus_assets.tasks.config import load_job_config
from corpus_assets.tasks.executor import DataJob
from corpus_assets.tasks.snapshot import Snapshot


def request(i: int, repeats: int = 2) -> list[Attempt]:
    """One request's attempts, one of them failed."""
    return [
        Attempt(f"t{i:03d}", r, f"answer {i}.{r} ü", "length" if r == 1 else None)
        for r in range(repeats)
    ]


def nothing_committed(ids: object) -> list[str]:
    return []


async def keep_all(journal: AnswerJournal, count: int, slots: int) -> None:
    todo = iter(range(count))

    async def slot() -> None:
        for i in todo:
            await journal.keep(request(i))

    await asyncio.gather(*(slot() for _ in range(slots)))


def test_answers_kept_by_concurrent_slots_are_all_read_back_one_line_per_keep(
    tmp_path: Path,
) -> None:
    (tmp_path / "work").mkdir(mode=0o700)
    path = tmp_path / "work" / "answers-0.jsonl"
    journal = AnswerJournal.open(path, nothing_committed)
    asyncio.run(keep_all(journal, 200, slots=16))
    journal.close()
    lines = list(read_lines(path))
    assert sorted(lines, key=lambda line: line[0].task_id) == [request(i) for i in range(200)]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = AnswerJournal.open(path, nothing_committed)
    assert again.answered(["t007", "t150"]) == {
        (a.task_id, a.repeat): a for a in request(7) + request(150)
    }


def test_a_torn_tail_is_cut_off_before_anything_is_appended(tmp_path: Path) -> None:
    path = tmp_path / "answers-0.jsonl"
    whole = answer_line(request(0)) + answer_line(request(1))
    path.write_bytes(whole + answer_line(request(2))[:-9])  # killed mid-write
    journal = AnswerJournal.open(path, nothing_committed)
    assert path.read_bytes() == whole
    asyncio.run(journal.keep(request(3)))
    journal.close()
    assert list(read_lines(path)) == [request(0), request(1), request(3)]


def test_lines_after_a_line_that_is_no_answer_are_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "answers-0.jsonl"
    path.write_bytes(
        answer_line(request(0)) + b"\0\0\0\0\n" + answer_line(request(1)) + b'{"attempts": []}\n'
    )
    journal = AnswerJournal.open(path, nothing_committed)
    assert set(journal.answered(["t000", "t001"])) == {("t000", 0), ("t000", 1)}
    assert list(read_lines(path)) == [request(0)]


def test_the_answers_of_committed_tasks_are_dropped_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "answers-0.jsonl"
    path.write_bytes(b"".join(answer_line(request(i)) for i in range(5)))
    asked: list[list[str]] = []

    def committed(ids: list[str]) -> list[str]:
        asked.append(list(ids))
        return [t for t in ids if t in ("t001", "t003")]

    journal = AnswerJournal.open(path, committed)
    assert asked == [["t000", "t001", "t002", "t003", "t004"]]
    assert list(read_lines(path)) == [request(0), request(2), request(4)]
    assert set(journal.answered(["t001", "t002"])) == {("t002", 0), ("t002", 1)}
    all_committed = AnswerJournal.open(path, lambda ids: ids)
    assert not path.exists() and all_committed.answered(["t000"]) == {}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=8), st.data())
def test_a_kill_at_any_byte_keeps_exactly_the_whole_lines_before_it(
    tmp_path_factory: object, repeats: list[int], data: st.DataObject
) -> None:
    """Whatever byte a write stops at, the journal gives back the lines written whole before
    it, and appends after them."""
    folder = Path(str(tmp_path_factory.mktemp("cut")))  # type: ignore[attr-defined]
    lines = [answer_line(request(i, n)) for i, n in enumerate(repeats)]
    full = b"".join(lines)
    cut = data.draw(st.integers(0, len(full)))
    path = folder / "answers-0.jsonl"
    path.write_bytes(full[:cut])
    whole = [request(i, n) for i, n in enumerate(repeats) if sum(map(len, lines[: i + 1])) <= cut]
    journal = AnswerJournal.open(path, nothing_committed)
    assert list(read_lines(path)) == whole
    asyncio.run(journal.keep(request(99)))
    journal.close()
    assert list(read_lines(path)) == [*whole, request(99)]


def keeping_job(folder: Path, fail_after: int) -> Path:
    """12 scripted tasks in calls of 4, two repeats, calibrated by `keeping_calibrator`."""
    samples = [
        {"id": f"t{i:02d}", "input": {"text": f"question {i}"}, "answer": f"a{i:02d}"}
        for i in range(12)
    ]
    config = {
        "recipe": "executor_recipes:make",
        "target_count": 6,
        "purpose": "model",
        "params": {"batches": [samples]},
        "calibration": {
            "implementation": "keeping_calibrator:make",
            "repeats": 2,
            "params": {"log": str(folder / "asked.jsonl"), "fail_after": fail_after},
        },
        "execution": {"batch_size": 4, "max_workers": 1, "max_retries": 1, "retry_delay": 0.01},
    }
    path = folder / "job.json"
    path.write_text(json.dumps(config))
    return path


def asked(folder: Path) -> list[tuple[str, int]]:
    return [tuple(json.loads(line)) for line in (folder / "asked.jsonl").read_text().splitlines()]


def test_a_calibrator_that_keeps_its_answers_is_not_asked_them_again_after_a_failure(
    tmp_path: Path,
) -> None:
    """The first call fails after keeping 6 of its 8 answers: the executor's retry gives them
    back in `context.answered`, the calibrator answers the other 2, every pair is answered
    once, the journal is gone at the end, and the dataset is the one of a job that never
    failed."""
    (tmp_path / "failing").mkdir()
    (tmp_path / "clean").mkdir()
    failing = run_job(keeping_job(tmp_path / "failing", fail_after=6))
    clean = run_job(keeping_job(tmp_path / "clean", fail_after=-1))
    pairs = asked(tmp_path / "failing")
    assert len(pairs) == len(set(pairs)) == 24
    assert pairs[:6] == [("t00", 0), ("t00", 1), ("t01", 0), ("t01", 1), ("t02", 0), ("t02", 1)]
    assert pairs[6:8] == [("t03", 0), ("t03", 1)]  # the retry asks only what was not kept
    assert not list((tmp_path / "failing" / "out" / "work").glob("answers-*"))
    assert failing.dataset_id == clean.dataset_id


def run_job(config: Path) -> Snapshot:
    loaded = load_job_config(config)
    return asyncio.run(DataJob(loaded, config.parent / "out").run())
