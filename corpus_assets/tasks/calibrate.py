"""The executor's calibrate step: ask the calibrator, checkpoint the responses, grade them.

For each batch, the retained candidates that have no responses yet go to the calibrator in calls
of at most `execution.batch_size` public tasks, at most `execution.max_workers` calls at a time,
all repeats of a task inside one call. Each finished call is checked (`check_attempts`) and its
responses and provenance are committed in one transaction before anything is graded, so a job
killed or failed at any later point resumes without asking again for what it already has.
Inside a call, what a calibrator hands over through `context.keep` (the live calibrator: each
request's answers) is durable at once in the batch's answer journal (`answer_journal.py`), and
a call asked again gets it back in `context.answered`, so a kill loses only requests in flight.
The grading runs in the worker pool with the recipe's own `score` and the private reference,
which never leaves the executor; a grading failure regrades from the stored responses.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import ConfigError
from corpus_assets.tasks.answer_journal import AnswerJournal, journal_path
from corpus_assets.tasks.calibration import (
    CalibrationBatch,
    CalibrationContext,
    CalibrationError,
    Calibrator,
    check_attempts,
    public_copies,
)
from corpus_assets.tasks.checkpoints import Checkpoints, canonical
from corpus_assets.tasks.config import CalibrationSpec
from corpus_assets.tasks.factory import load_factory
from corpus_assets.tasks.types import JSON, PublicTask, Purpose
from corpus_assets.tasks.window import ordered
from corpus_assets.tasks.workers import Pool, score_chunk

POLL_S = 0.2  # how often a waiting calibrate step looks at the cancel event
CONFIG_DIR = "config_dir"


def build_calibrator(spec: CalibrationSpec, config_dir: Path) -> Calibrator:
    """The calibrator `calibration.implementation` builds from `calibration.params`.

    A factory that declares a `config_dir` parameter (or `**kwargs`) also gets the job config's
    folder, against which it resolves the paths in its params.
    """
    factory = load_factory(spec.implementation)
    params = dict(spec.params)
    if CONFIG_DIR in params:
        raise ConfigError(
            f"calibration.params must not set {CONFIG_DIR!r}: the executor passes the config's "
            "folder itself"
        )
    if _accepts(factory, CONFIG_DIR):
        params[CONFIG_DIR] = str(config_dir)
    try:
        signature = inspect.signature(factory)
        signature.bind(**params)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"calibration factory {spec.implementation!r} does not take these params: {exc}"
        ) from None
    calibrator = factory(**params)
    if not callable(calibrator):
        raise ConfigError(
            f"calibration factory {spec.implementation!r} returned a "
            f"{type(calibrator).__name__}; allowed: an async callable (tasks, context)"
        )
    result: Calibrator = calibrator
    return result


def _accepts(factory: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class CalibrateStep:
    """Calibration of one job's batches against one calibrator."""

    def __init__(
        self,
        calibrator: Calibrator,
        repeats: int,
        purpose: Purpose,
        seed: int,
        batch_size: int,
        max_workers: int,
        prompt: Callable[[PublicTask], JSON] | None = None,
    ) -> None:
        self.prompt = prompt  # the recipe's optional `prompt(task)`, passed in the context
        self.calibrator = calibrator
        self.repeats = repeats
        self.purpose = purpose
        self.seed = seed
        self.batch_size = batch_size
        self.max_workers = max_workers

    async def ask(self, ckpt: Checkpoints, batch: int, cancelled: Callable[[], bool]) -> None:
        """Call the calibrator for the batch's candidates without responses; commit each call.

        The answers a calibrator hands over through `context.keep` go to the batch's answer
        journal beside the checkpoints first; a call asked again gets them in
        `context.answered`, and once every candidate has its responses the journal is removed.
        """
        calls = ckpt.seq_pages(batch, self.batch_size, without="responses")
        seqs = next(calls, None)
        path = journal_path(ckpt.path.parent, batch)
        if seqs is None:
            path.unlink(missing_ok=True)
            return
        journal = AnswerJournal.open(path, lambda ids: ckpt.responses(ids).keys())
        context = CalibrationContext(
            batch, self.repeats, self.purpose, self.seed, ckpt.batch_task_ids(batch), self.prompt,
            journal.keep,
        )  # fmt: skip
        running: set[asyncio.Task[tuple[int, list[PublicTask], CalibrationBatch]]] = set()
        try:
            while seqs is not None or running:
                while seqs is not None and len(running) < self.max_workers:
                    tasks = [_public(text) for text in ckpt.candidate_rows(seqs, "public")]
                    answered = journal.answered(t.task_id for t in tasks)
                    call = self._call(seqs[0], tasks, replace(context, answered=answered))
                    running.add(asyncio.ensure_future(call))
                    seqs = next(calls, None)
                done, running = await asyncio.wait(
                    running, timeout=POLL_S, return_when=asyncio.FIRST_COMPLETED
                )
                self._commit_finished(ckpt, batch, done)
                if cancelled():
                    return
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            journal.close()
        journal.remove()

    async def _call(
        self, first: int, tasks: list[PublicTask], context: CalibrationContext
    ) -> tuple[int, list[PublicTask], CalibrationBatch]:
        result = self.calibrator(public_copies(tasks), context)
        if not inspect.isawaitable(result):
            raise CalibrationError(
                f"the calibrator returned a {type(result).__name__}, not an awaitable; a "
                "calibrator is an async callable (tasks, context) -> CalibrationBatch"
            )
        return first, tasks, await result

    def _commit_finished(
        self,
        ckpt: Checkpoints,
        batch: int,
        done: set[asyncio.Task[tuple[int, list[PublicTask], CalibrationBatch]]],
    ) -> None:
        """Commit the calls that answered, in pool order; then raise the first failure."""
        failures = [t.exception() for t in done if t.exception() is not None]
        answered = sorted((t.result() for t in done if t.exception() is None), key=_first)
        for first, tasks, answer in answered:
            self._commit(ckpt, batch, first, tasks, answer)
        if failures:
            raise failures[0]  # type: ignore[misc]

    def _commit(
        self,
        ckpt: Checkpoints,
        batch: int,
        first: int,
        tasks: Sequence[PublicTask],
        answer: CalibrationBatch,
    ) -> None:
        found = check_attempts(tasks, self.repeats, answer)
        rows = [
            (
                t.task_id,
                r,
                canonical(found[(t.task_id, r)].response),
                found[(t.task_id, r)].failure_reason or None,  # "" is no failure
            )
            for t in tasks
            for r in range(self.repeats)
        ]
        ckpt.commit_call(batch, first, rows, canonical(dict(answer.provenance)))

    def grade(
        self, ckpt: Checkpoints, pool: Pool, batch: int, cancelled: Callable[[], bool]
    ) -> None:
        """Score the stored responses of the batch's ungraded candidates in the pool."""

        def chunks() -> Iterator[tuple[list[str], Future[Any]]]:
            for seqs in ckpt.seq_pages(batch, self.batch_size, without="scores"):
                payloads = [json.loads(p) for p in ckpt.candidate_rows(seqs, "payload")]
                ids = [p["task_id"] for p in payloads]
                responses = ckpt.responses(ids)
                items = [(p, responses[t]) for p, t in zip(payloads, ids, strict=True)]
                yield ids, pool.submit(score_chunk, items)

        with ordered(chunks(), 2 * self.max_workers) as results:
            for ids, future in results:
                if cancelled():
                    return
                self._commit_scores(ckpt, ids, future)

    @staticmethod
    def _commit_scores(ckpt: Checkpoints, ids: list[str], future: Future[Any]) -> None:
        scores: list[list[float | None]] = future.result()
        ckpt.commit_scores(
            [(t, r, s) for t, per in zip(ids, scores, strict=True) for r, s in enumerate(per)]
        )


def _first(answered: tuple[int, list[PublicTask], CalibrationBatch]) -> int:
    return answered[0]


def _public(text: str) -> PublicTask:
    doc = json.loads(text)
    return PublicTask(doc["task_id"], doc["input"], doc.get("metadata") or {})
