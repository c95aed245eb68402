"""The answer journal: what `keep` returned from is read back, a torn tail is cut off, the
answers of committed tasks are dropped, and a line is kept all or nothing."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.tasks.answer_journal import AnswerJournal, answer_line, read_lines
from corpus_assets.tasks.calibration import Attempt


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
