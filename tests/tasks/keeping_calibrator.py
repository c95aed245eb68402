"""A test calibrator that keeps each answer through `context.keep` the moment it has it.

`make(log, fail_after=-1)` answers (task, repeat) with `"a<task number>"` when the repeat is
even, else `"no"`. Every pair it answers itself it logs to `log` (one JSON line), then keeps.
`answered` pairs it returns as given, without logging. In a process's first call, after
`fail_after` pairs kept, it raises ConnectionError (an executor retry takes over).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from corpus_assets.tasks.calibration import Attempt, CalibrationBatch, CalibrationContext
from corpus_assets.tasks.types import PublicTask


def make(log: str, fail_after: int = -1) -> KeepingCalibrator:
    return KeepingCalibrator(log, fail_after)


class KeepingCalibrator:
    def __init__(self, log: str, fail_after: int) -> None:
        self.log = log
        self.fail_after = fail_after
        self.calls = 0

    async def __call__(
        self, tasks: Sequence[PublicTask], context: CalibrationContext
    ) -> CalibrationBatch:
        self.calls += 1
        kept = 0
        attempts = []
        for task in tasks:
            for repeat in range(context.repeats):
                pair = (task.task_id, repeat)
                if pair in context.answered:
                    attempts.append(context.answered[pair])
                    continue
                if self.calls == 1 and kept == self.fail_after:
                    raise ConnectionError(f"scripted fault after {kept} answers")
                answer = "a" + task.task_id[1:] if repeat % 2 == 0 else "no"
                attempt = Attempt(task.task_id, repeat, answer)
                with open(self.log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(pair) + "\n")
                assert context.keep is not None
                await context.keep([attempt])
                kept += 1
                attempts.append(attempt)
        return CalibrationBatch(tuple(attempts), {"kind": "keeping"})
