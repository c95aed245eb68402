"""The data-job executor: generate → clean → deduplicate/exclude → select → project → publish.

One coordinator (its own thread, see `run_data_job`) owns the checkpoint database and decides
everything in a fixed order; recipe code runs in `workers.Pool` and `workers.Producer`. Chunks
are `execution.batch_size` samples; their results are committed in submission order, so the
snapshot is the same for any worker count, backend or chunk size, and a resumed job picks up
after the last committed chunk.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import ConfigError, CorpusError, DataError, TransientError
from corpus_assets.tasks.checkpoints import Checkpoints, canonical
from corpus_assets.tasks.config import LoadedJobConfig, identity_form
from corpus_assets.tasks.files import private_writer
from corpus_assets.tasks.identity import (
    changed_message,
    identity_changes,
    job_identity,
    read_exclusions,
)
from corpus_assets.tasks.jobdir import JobFolder
from corpus_assets.tasks.snapshot import Snapshot, load_snapshot, write_snapshot
from corpus_assets.tasks.types import (
    GenerateContext,
    InsufficientDataError,
    Selection,
)
from corpus_assets.tasks.workers import (
    Pool,
    ProduceOrder,
    Producer,
    RecipeError,
    RecipeSpec,
    clean_chunk,
    project_chunk,
)

MAX_RETRY_DELAY_S = 60.0
Progress = Callable[[str], None]


class JobCancelled(CorpusError):
    """The job was cancelled between chunks; its folder records `cancelled` (resumable)."""

    exit_code = 130


class CancelEvent(threading.Event):
    """The one event that cancels a job, and the exit code its cancellation gives."""

    exit_code = JobCancelled.exit_code

    def request(self, exit_code: int) -> None:
        """Cancel with `exit_code` (130 SIGINT, 143 SIGTERM); a second request changes nothing."""
        if not self.is_set():
            self.exit_code = exit_code
            self.set()


class ExhaustedError(DataError):
    """`max_batches` or `max_candidates` was reached before `select` could fill the target."""


def retry_delay(base: float, attempt: int) -> float:
    """The wait before retry `attempt` (0-based): `base` doubled each time, capped at 60 s."""
    return float(min(base * 2.0**attempt, MAX_RETRY_DELAY_S))


def retryable(exc: BaseException) -> bool:
    """Only OSError (connection errors included), TimeoutError and our disk errors retry."""
    return isinstance(exc, OSError | TimeoutError | TransientError)


class DataJob:
    """One data job in one folder; `run()` on the coordinator thread returns its snapshot."""

    def __init__(
        self,
        config: LoadedJobConfig,
        output: Path,
        resume: bool = False,
        cancel: threading.Event | None = None,
        progress: Progress | None = None,
    ) -> None:
        if config.model.calibration is not None:
            raise ConfigError(
                "[calibration] is not supported yet (planned: task datasets part 2); "
                "remove it to select without calibration"
            )
        self.config = config
        self.model = config.model
        self.execution = config.model.execution
        self.output = output
        self.resume = resume
        self.cancel = cancel or threading.Event()
        self.say = progress or (lambda line: None)
        self.spec = RecipeSpec(config.model.recipe, dict(config.model.params))
        self.recipe = self.spec.build()  # the coordinator's own instance: select, identity
        self.identity = job_identity(config, self.spec, self.recipe)

    # -- the whole job ---------------------------------------------------------------------

    def run(self) -> Snapshot:
        folder = JobFolder.open(self.output, self.resume)
        try:
            return self._run_locked(folder)
        finally:
            folder.release()

    def _run_locked(self, folder: JobFolder) -> Snapshot:
        if self.resume:
            done = self._finished(folder)
            if done is not None:
                return done
        else:
            folder.write_config(self.config.raw)
            self._running(folder)
        ckpt = Checkpoints(folder.work / "checkpoints.sqlite3")
        self.folder, self.ckpt = folder, ckpt
        try:
            self._check_identity()
            if self.resume:  # only now: a refused resume keeps the stored identity
                self._running(folder)
            snapshot = self._with_retries()
        except BaseException as exc:
            state = "cancelled" if isinstance(exc, JobCancelled) else "failed"
            if isinstance(exc, JobCancelled):
                exc.exit_code = getattr(self.cancel, "exit_code", exc.exit_code)
            folder.write_job(state, error=_one_line(exc), exit_code=_exit_code(exc))
            raise
        finally:
            ckpt.close()
        folder.write_job(
            "succeeded", dataset_id=snapshot.dataset_id, dataset_path=str(snapshot.path)
        )
        return snapshot

    def _running(self, folder: JobFolder) -> None:
        folder.write_job(
            "running",
            partition_key=self.config.partition_key,
            config_sha256=self.config.sha256,
            identity=self.identity,
        )

    def _finished(self, folder: JobFolder) -> Snapshot | None:
        """A resumed job whose snapshot is published: verify and return it, doing no work."""
        if not folder.dataset.is_dir():
            return None
        stored = folder.read_job().get("identity") or {}
        changes = identity_changes(stored, self.identity)
        if changes:
            raise DataError(changed_message(folder.path, changes))
        snapshot = load_snapshot(folder.dataset)
        folder.write_job(
            "succeeded", dataset_id=snapshot.dataset_id, dataset_path=str(snapshot.path)
        )
        return snapshot

    def _check_identity(self) -> None:
        stored = self.ckpt.get("identity")
        if stored is None:
            self.ckpt.load_exclusions(read_exclusions(self.config.exclusions))
            self.ckpt.put("identity", self.identity)
            return
        changes = identity_changes(stored, self.identity)
        if changes:
            raise DataError(changed_message(self.folder.path, changes))

    def _with_retries(self) -> Snapshot:
        attempt = 0
        while True:
            try:
                return self._attempt()
            except BaseException as exc:
                if not retryable(exc) or attempt >= self.execution.max_retries:
                    if retryable(exc) and not isinstance(exc, TransientError):
                        raise TransientError(
                            f"{_one_line(exc)} (after {attempt + 1} attempt(s))"
                        ) from exc
                    raise
                delay = retry_delay(self.execution.retry_delay, attempt)
                self.say(f"tasks: {_one_line(exc)}; retry {attempt + 1} in {delay:g}s")
                if self.cancel.wait(delay):
                    raise JobCancelled("cancelled while waiting to retry") from None
                attempt += 1

    def _attempt(self) -> Snapshot:
        pool = Pool(self.spec, self.execution.backend, self.execution.max_workers)
        try:
            if self.ckpt.get("selection") is None:
                self._search(pool)
            self._project(pool)
        finally:
            pool.close()
        return self._publish()

    # -- generate, clean, deduplicate, exclude, select -------------------------------------

    def context(self, batch: int) -> GenerateContext:
        return GenerateContext(
            seed=self.model.seed,
            batch_index=batch,
            target_count=self.model.target_count,
            purpose=self.model.purpose,
            inputs=self.config.inputs,
        )

    def _search(self, pool: Pool) -> None:
        """Batches until `select` succeeds, or a bound is reached (ExhaustedError)."""
        searched = self.ckpt.get("searched")  # the last batch whose select asked for more
        batch = 0 if searched is None else searched + 1
        while True:
            state = self.ckpt.batch(batch)
            if not state.done:
                self._generate(pool, batch, state.consumed)
            self._write_batch_files(batch)
            try:
                selection = self.recipe.select(
                    self.ckpt.pool(), self.ckpt.scores(), self.context(batch)
                )
            except InsufficientDataError as exc:
                self._out_of_bounds(batch, exc)
                self.ckpt.put("searched", batch)
                batch += 1
                continue
            self._accept(selection, batch)
            return

    def _generate(self, pool: Pool, batch: int, consumed: int) -> None:
        """Generate batch `batch`, cleaning and committing chunks after the first `consumed`."""
        before = self.ckpt.generated_total() - consumed
        order = ProduceOrder(
            self.spec,
            self.context(batch),
            self.execution.batch_size,
            skip=consumed,
            limit=max(self.model.max_candidates - before, 0),
        )
        producer = Producer(order, self.execution.backend, self.cancel)
        pending: deque[tuple[int, int, Future[Any]]] = deque()
        end: tuple[Any, ...] | None = None
        try:
            for message in producer.messages():
                if message[0] == "error":
                    raise message[1]
                if message[0] == "end":
                    end = message
                    break
                _, start, payloads = message
                pending.append((start, len(payloads), pool.submit(clean_chunk, payloads)))
                while len(pending) > 2 * self.execution.max_workers:
                    self._commit_clean(batch, *pending.popleft())
            while pending and not self.cancel.is_set():
                self._commit_clean(batch, *pending.popleft())
            if self.cancel.is_set() or end is None:
                raise JobCancelled(f"cancelled during batch {batch}")
        finally:
            for _, _, future in pending:
                future.cancel()
            producer.close()
        self.ckpt.finish_batch(batch, end[1], end[2])

    def _commit_clean(self, batch: int, start: int, count: int, future: Future[Any]) -> None:
        self.ckpt.commit_chunk(batch, start + count, future.result())
        self._progress("generate", batch)
        if self.cancel.is_set():
            raise JobCancelled(f"cancelled during batch {batch}")

    def _out_of_bounds(self, batch: int, exc: InsufficientDataError) -> None:
        """Raise ExhaustedError when no further batch is allowed, naming the bound and counts."""
        generated = self.ckpt.generated_total()
        if generated >= self.model.max_candidates:
            bound = f"max_candidates = {self.model.max_candidates}"
        elif batch + 1 >= self.model.max_batches:
            bound = f"max_batches = {self.model.max_batches}"
        else:
            return
        totals = self._totals()
        raise ExhaustedError(
            f"ran out of candidates: {bound} reached after {batch + 1} batch(es) with "
            f"{totals['generated']} generated, {totals['retained']} retained "
            f"({totals['rejected']} rejected, {totals['duplicates']} duplicates, "
            f"{totals['excluded']} excluded), target_count {self.model.target_count}; "
            f"select said: {_one_line(exc)}"
        )

    def _accept(self, selection: Selection, batch: int) -> None:
        """Check `select`'s answer and store it: exactly target_count distinct pooled ids."""
        if not isinstance(selection, Selection):
            raise RecipeError(f"select() returned a {type(selection).__name__}; allowed: Selection")
        ids = list(selection.task_ids)
        if len(ids) != self.model.target_count:
            raise RecipeError(
                f"select() chose {len(ids)} task(s); it must choose exactly target_count "
                f"= {self.model.target_count}"
            )
        repeated = sorted(t for t, n in Counter(ids).items() if n > 1)
        if repeated:
            raise RecipeError(f"select() chose task id(s) twice: {', '.join(repeated[:5])}")
        try:
            self.ckpt.samples_by_id(ids)
        except KeyError as exc:
            raise RecipeError(
                f"select() chose {exc.args[0]!r}, which is not a retained candidate "
                "(unknown, rejected, duplicate or excluded)"
            ) from None
        statistics = json.loads(canonical(dict(selection.statistics)))
        self.ckpt.put("selection", {"task_ids": ids, "statistics": statistics, "batch": batch})
        self._progress("select", batch)

    def _write_batch_files(self, batch: int) -> None:
        """`work/batch-N-candidates.jsonl` and `-public.jsonl`, rebuilt from the checkpoints."""
        candidates = self.folder.work / f"batch-{batch}-candidates.jsonl"
        public = self.folder.work / f"batch-{batch}-public.jsonl"
        if candidates.exists() and public.exists():
            return
        with private_writer(candidates) as full, private_writer(public) as pub:
            for payload, public_task in self.ckpt.batch_payloads(batch):
                full.write(payload.encode("utf-8") + b"\n")
                pub.write(public_task.encode("utf-8") + b"\n")

    # -- project and publish ---------------------------------------------------------------

    def _project(self, pool: Pool) -> None:
        """The selected samples' public, reference and training rows, committed in chunks."""
        ids: list[str] = self.ckpt.get("selection")["task_ids"]
        size = self.execution.batch_size
        pending: deque[tuple[int, Future[Any]]] = deque()
        try:
            for start in range(self.ckpt.projected(), len(ids), size):
                payloads = [s.to_json() for s in self.ckpt.samples_by_id(ids[start : start + size])]
                pending.append((start, pool.submit(project_chunk, payloads)))
                while len(pending) > 2 * self.execution.max_workers:
                    self._commit_projection(*pending.popleft())
            while pending:
                self._commit_projection(*pending.popleft())
        finally:
            for _, future in pending:
                future.cancel()

    def _commit_projection(self, start: int, future: Future[Any]) -> None:
        rows = future.result()
        try:
            self.ckpt.commit_projection(start, rows)
        except (TypeError, ValueError) as exc:
            raise RecipeError(f"training_row() returned a value that is not JSON: {exc}") from None
        self._progress("project", None)
        if self.cancel.is_set():
            raise JobCancelled("cancelled while projecting")

    def _publish(self) -> Snapshot:
        """Write the snapshot in staging and publish it by one rename; verify it."""
        if not self.folder.dataset.is_dir():
            write_snapshot(
                self.folder.staging,
                self.folder.dataset,
                self.ckpt.projection_rows(),
                iter(()),
                self.report(),
                self.provenance(),
            )
        self._progress("published", None)
        return load_snapshot(self.folder.dataset)

    def report(self) -> dict[str, Any]:
        """Counts per batch and in total, and what selection said (report.json)."""
        selection = self.ckpt.get("selection")
        return {
            "target_count": self.model.target_count,
            "purpose": self.model.purpose,
            "calibrated": False,
            "batches": [b.counts() for b in self.ckpt.batches()],
            "totals": self._totals(),
            "exclusion_ids": self.ckpt.excluded_count(),
            "selection": {
                "selected": len(selection["task_ids"]),
                "after_batch": selection["batch"],
                "statistics": selection["statistics"],
            },
        }

    def provenance(self) -> dict[str, Any]:
        """The manifest's provenance: config, code digests, declared sources, calibration."""
        return {
            "job": {
                "name": self.config.name,
                "partition_key": self.config.partition_key,
                "config_sha256": self.config.sha256,
            },
            "config": identity_form(self.config.raw),
            "code": {
                "recipe": {"factory": self.spec.factory, "files": self.identity["recipe_files"]},
                "calibrator": None,
                "executor": self.identity["executor"],
            },
            "sources": {
                "inputs": self.identity["inputs"],
                "exclusions": self.identity["exclusions"],
            },
            "calibration": None,
        }

    # -- progress --------------------------------------------------------------------------

    def _totals(self) -> dict[str, int]:
        totals = dict.fromkeys(("generated", "rejected", "duplicates", "excluded", "retained"), 0)
        for state in self.ckpt.batches():
            for key, value in state.counts().items():
                if key != "batch":
                    totals[key] += value
        return totals

    def _progress(self, phase: str, batch: int | None) -> None:
        totals = self._totals()
        projected = self.ckpt.projected()
        self.folder.write_progress(
            {
                "phase": phase,
                "batch": batch,
                "target_count": self.model.target_count,
                "projected": projected,
            }
            | totals
        )
        where = f" batch {batch}" if batch is not None else ""
        self.say(
            f"tasks: {phase}{where}: {totals['generated']} generated, {totals['retained']} "
            f"retained, {totals['duplicates']} duplicates, {totals['excluded']} excluded, "
            f"{projected}/{self.model.target_count} projected"
        )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, CorpusError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _exit_code(exc: BaseException) -> int:
    return int(getattr(exc, "exit_code", 1))
