"""Test calibrators: scripted answers, a call log, what each call was given, injected failures.

`answer_all(...)` is a calibration factory. Its calibrator answers every (task, repeat) with
`answers[task_id][repeat]` (default `default`), a failure reason where `failures` names the
pair, after `delay` seconds. Every call appends one JSON line to `log`: the task ids it got,
the repeats, how many calls were running at its start, and every string reachable from what it
was given (tasks and context), so a test can search them for references. `mutate` makes it
scribble over the tasks it gets; `broken` makes it answer wrongly (`missing`, `extra`,
`twice`); `fail` raises `kind` in the calls listed (by number, from 0) while the file `counter`
has fewer than `times` lines. `pause_after` makes every call after that many wait for the file
`gate` (calls logged before the pause): a test kills the job there.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from executor_recipes import _append as append_line
from executor_recipes import _lines

from corpus_assets.tasks.calibration import Attempt, CalibrationBatch, CalibrationContext
from corpus_assets.tasks.types import PublicTask

POLL_S = 0.02


def strings(obj: Any) -> Iterator[str]:
    """Every string inside `obj`: dataclass fields, mappings (keys too), sequences."""
    if isinstance(obj, str):
        yield obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from strings(getattr(obj, f.name))
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(obj, list | tuple | set | frozenset):
        for item in obj:
            yield from strings(item)


def _append(path: str, doc: Any) -> None:
    append_line(path, json.dumps(doc))


def answer_all(
    default: Any = "1",
    answers: Mapping[str, Sequence[Any]] | None = None,
    failures: Sequence[Sequence[Any]] = (),
    log: str | None = None,
    delay: float = 0.0,
    mutate: bool = False,
    broken: str | None = None,
    fail: Mapping[str, Any] | None = None,
    pause_after: int | None = None,
    gate: str | None = None,
) -> ScriptedCalibrator:
    return ScriptedCalibrator(
        default,
        dict(answers or {}),
        {(str(t), int(r)) for t, r in failures},
        log,
        delay,
        mutate,
        broken,
        fail,
        (pause_after, gate),
    )


def not_async() -> Any:
    """A calibration factory whose calibrator is a plain function (not allowed)."""

    def calibrate(tasks: Sequence[PublicTask], context: CalibrationContext) -> CalibrationBatch:
        return CalibrationBatch(())

    return calibrate


class ScriptedCalibrator:
    def __init__(
        self,
        default: Any,
        answers: dict[str, Sequence[Any]],
        failures: set[tuple[str, int]],
        log: str | None,
        delay: float,
        mutate: bool,
        broken: str | None,
        fail: Mapping[str, Any] | None,
        pause: tuple[int | None, str | None],
    ) -> None:
        self.default, self.answers, self.failures = default, answers, failures
        self.log, self.delay, self.mutate, self.broken, self.fail = log, delay, mutate, broken, fail
        self.pause_after, self.gate = pause
        self.calls = 0
        self.running = 0

    async def __call__(
        self, tasks: Sequence[PublicTask], context: CalibrationContext
    ) -> CalibrationBatch:
        number = self.calls
        self.calls += 1
        self.running += 1
        try:
            await self._maybe_pause(number)
            if self.log:
                _append(
                    self.log,
                    {
                        "call": number,
                        "batch": context.batch_index,
                        "task_ids": [t.task_id for t in tasks],
                        "repeats": context.repeats,
                        "running": self.running,
                        "strings": sorted(set(strings([list(tasks), context]))),
                    },
                )
            await asyncio.sleep(self.delay)
            self._maybe_fail(number)
            if self.mutate:
                for task in tasks:
                    task.metadata["mutated"] = True  # type: ignore[index]
                    if isinstance(task.input, dict):
                        task.input["text"] = "mutated"
            return CalibrationBatch(tuple(self._attempts(tasks, context)), {"scripted": True})
        finally:
            self.running -= 1

    async def _maybe_pause(self, number: int) -> None:
        if self.pause_after is None or number < self.pause_after or not self.gate:
            return
        if self.log:
            _append(self.log, {"pause": number})
        while not os.path.exists(self.gate):
            await asyncio.sleep(POLL_S)

    def _maybe_fail(self, number: int) -> None:
        fail = self.fail
        if not fail or number not in fail.get("calls", [number]):
            return
        if _lines(fail["counter"]) < fail["times"]:
            _append(fail["counter"], number)
            raise getattr(builtins, fail["kind"])(f"scripted calibrator {fail['kind']}")

    def _attempts(self, tasks: Sequence[PublicTask], context: CalibrationContext) -> list[Attempt]:
        out = []
        for task in tasks:
            for repeat in range(context.repeats):
                pair = (task.task_id, repeat)
                answer = self.answers.get(task.task_id, [self.default] * context.repeats)
                reason = "scripted failure" if pair in self.failures else None
                out.append(Attempt(task.task_id, repeat, answer[repeat], reason))
        if self.broken == "missing":
            out.pop()
        elif self.broken == "extra":
            out.append(Attempt("not-asked", 0, "1"))
        elif self.broken == "twice":
            out.append(out[0])
        return out
