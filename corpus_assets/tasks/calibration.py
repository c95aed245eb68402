"""The calibration protocol: what a calibrator is given and what it must return.

A calibrator is an async callable built by a `module:callable` factory from
`calibration.params`: `await calibrator(tasks, context) -> CalibrationBatch`. It only ever sees
`PublicTask`s, and deep copies of them (`public_copies`), so a backend that mutates what it is
given changes no candidate, and no reference can reach it. The executor grades the responses
itself with the recipe's `score`; `check_attempts` first makes sure every requested (task,
repeat) pair came back exactly once.

The executor's calibrate step is `tasks/calibrate.py`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from corpus_assets.core.errors import DataError
from corpus_assets.tasks.types import JSON, PublicTask, Purpose


class CalibrationError(DataError):
    """A calibrator's answer or a recorded report does not fit the request (exit 65)."""


@dataclass(frozen=True)
class Attempt:
    """One response to one task in one zero-based repeat; a non-empty failure reason means
    the attempt failed and gets no score (`None` and `""` mean it did not fail)."""

    task_id: str
    repeat: int
    response: JSON
    failure_reason: str | None = None


@dataclass(frozen=True)
class CalibrationBatch:
    """A calibrator's answer: one attempt per requested pair, and JSON provenance."""

    attempts: tuple[Attempt, ...]
    provenance: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True)
class CalibrationContext:
    """What a calibrator is told: the batch, repeats, the job's purpose and seed, the ids of
    all the batch's retained candidates (`work/batch-N-candidates.jsonl`), of which one call
    gets at most `execution.batch_size`, and the recipe's optional `prompt(task)` method (how a
    public task is asked of a chat model), None when the recipe has none.

    `keep` and `answered` let a calibrator lose nothing to a kill: `await keep(attempts)` makes
    answers durable the moment they arrive (all or nothing; `answer_journal.py`), and a call
    asked again after a kill, a cancel or a failure gets in `answered` what an earlier attempt
    kept for its tasks, to return as it is instead of asking again."""

    batch_index: int
    repeats: int
    purpose: Purpose
    seed: int
    batch_task_ids: Sequence[str] = ()  # all of the batch's retained candidates, in order
    prompt: Callable[[PublicTask], JSON] | None = None
    keep: Callable[[Sequence[Attempt]], Awaitable[None]] | None = None
    answered: Mapping[tuple[str, int], Attempt] = field(default_factory=dict)


class Calibrator(Protocol):
    """What a calibration factory returns: `await calibrator(tasks, context)`, any async callable
    (a function, or an object with an async `__call__`) taking these two arguments."""

    def __call__(
        self, tasks: Sequence[PublicTask], context: CalibrationContext, /
    ) -> Awaitable[CalibrationBatch]: ...


def public_copies(tasks: Sequence[PublicTask]) -> list[PublicTask]:
    """Deep copies of `tasks`: what a calibrator gets, so mutating them changes nothing here."""
    return [
        PublicTask(t.task_id, copy.deepcopy(t.input), copy.deepcopy(dict(t.metadata)))
        for t in tasks
    ]


def check_attempts(
    tasks: Sequence[PublicTask], repeats: int, batch: object
) -> dict[tuple[str, int], Attempt]:
    """The attempts by (task_id, repeat), once each pair was answered exactly once.

    Otherwise CalibrationError naming the first extra, repeated or missing pair (in request
    order: task order, then repeat), or the first malformed attempt.
    """
    if not isinstance(batch, CalibrationBatch):
        raise CalibrationError(
            f"the calibrator returned a {type(batch).__name__}; allowed: CalibrationBatch"
        )
    _check_json(batch.provenance, "the calibration provenance")
    wanted = [(t.task_id, r) for t in tasks for r in range(repeats)]
    expected = set(wanted)
    found: dict[tuple[str, int], Attempt] = {}
    for attempt in batch.attempts:
        pair = _pair(attempt)
        if pair not in expected:
            raise CalibrationError(f"the calibrator answered an extra pair {_name(pair)}")
        if pair in found:
            raise CalibrationError(f"the calibrator answered {_name(pair)} twice")
        found[pair] = attempt
    for pair in wanted:
        if pair not in found:
            raise CalibrationError(f"the calibrator did not answer {_name(pair)}")
    return found


def _pair(attempt: object) -> tuple[str, int]:
    if not isinstance(attempt, Attempt):
        raise CalibrationError(f"an attempt is a {type(attempt).__name__}; allowed: Attempt")
    repeat = attempt.repeat
    if (
        not isinstance(attempt.task_id, str)
        or isinstance(repeat, bool)
        or not isinstance(repeat, int)
    ):
        raise CalibrationError(f"attempt {attempt!r}: task_id must be a string, repeat an integer")
    if attempt.failure_reason is not None and not isinstance(attempt.failure_reason, str):
        raise CalibrationError(
            f"attempt {_name((attempt.task_id, repeat))}: failure_reason must be a string or None"
        )
    _check_json(attempt.response, f"the response of {_name((attempt.task_id, repeat))}")
    return attempt.task_id, repeat


def _check_json(value: object, what: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CalibrationError(f"{what} is not JSON: {exc}") from None


def _name(pair: tuple[str, int]) -> str:
    return f"(task {pair[0]!r}, repeat {pair[1]})"
