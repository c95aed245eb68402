"""What keeping each live answer durable costs: the answer journal against one file per request.

    .venv/bin/python bench/bench_answer_journal.py [--answers 1000] [--slots 1,8,32] [--work DIR]

Each of `--slots` coroutines (the requests a live calibrator has in flight) keeps answers one
after the other, as a slot does once its request is answered, until `--answers` answers (one
request's two attempts, about 60 bytes of response each) are kept; no model, no network: the
cost of durability alone. Two ways, in a fresh folder on the disk of `--work`:

- **journal**: `tasks/answer_journal.py`, one line appended per answer, the lines that arrive
  during an fdatasync sharing the next one (group commit);
- **file**: one file per answer, written at a temp name, fsynced, renamed and its folder
  fsynced (`core/store/atomic.atomic_writer`), on a worker thread as the journal's writes are.

Per way and slot count: wall seconds, ms per answer, answers per second, and the seconds to read
every kept answer back (what a resume does). A live request takes tens of ms to seconds, so a
cost well under a millisecond per answer is invisible; the table says how far under.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from corpus_assets.core.store.atomic import atomic_writer
from corpus_assets.tasks.answer_journal import AnswerJournal, answer_line, read_lines
from corpus_assets.tasks.calibration import Attempt


def attempts(i: int) -> list[Attempt]:
    text = f"The sum is {i}. " + "x" * 40
    return [Attempt(f"task-{i:06d}", r, text, None) for r in range(2)]


async def slots_keep(count: int, slots: int, keep: object) -> None:
    counter = iter(range(count))

    async def slot() -> None:
        for i in counter:
            await keep(attempts(i))  # type: ignore[operator]

    await asyncio.gather(*(slot() for _ in range(slots)))


def run_journal(folder: Path, count: int, slots: int) -> tuple[float, float]:
    path = folder / "answers-0.jsonl"
    journal = AnswerJournal.open(path, lambda ids: ())
    start = time.perf_counter()
    asyncio.run(slots_keep(count, slots, journal.keep))
    wall = time.perf_counter() - start
    journal.close()
    start = time.perf_counter()
    kept = sum(len(line) for line in read_lines(path))
    read = time.perf_counter() - start
    assert kept == 2 * count, kept
    return wall, read


def run_files(folder: Path, count: int, slots: int) -> tuple[float, float]:
    parts = folder / "parts"
    parts.mkdir()

    def write(batch: list[Attempt]) -> None:
        with atomic_writer(parts / f"{batch[0].task_id}.json") as fh:
            fh.write(answer_line(batch))

    async def keep(batch: list[Attempt]) -> None:
        await asyncio.to_thread(write, batch)

    start = time.perf_counter()
    asyncio.run(slots_keep(count, slots, keep))
    wall = time.perf_counter() - start
    start = time.perf_counter()
    kept = sum(len(json.loads(p.read_bytes())["attempts"]) for p in sorted(parts.iterdir()))
    read = time.perf_counter() - start
    assert kept == 2 * count, kept
    return wall, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--slots", default="1,8,32")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-journal-", dir=args.work))
    rows = []
    try:
        for slots in [int(s) for s in args.slots.split(",")]:
            for way, run in (("journal", run_journal), ("file", run_files)):
                folder = root / f"{way}-{slots}"
                folder.mkdir()
                wall, read = run(folder, args.answers, slots)
                rows.append({
                    "way": way, "slots": slots, "answers": args.answers, "wall_s": round(wall, 3),
                    "ms_per_answer": round(1000 * wall / args.answers, 3),
                    "answers_per_s": round(args.answers / wall), "read_s": round(read, 4),
                })  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {args.answers} answers")
    print("| way | slots | wall s | ms / answer | answers / s | read back s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['way']} | {r['slots']} | {r['wall_s']} | {r['ms_per_answer']} | "
            f"{r['answers_per_s']} | {r['read_s']} |"
        )
    print(json.dumps({"answer_journal": rows}))


if __name__ == "__main__":
    main()
