"""The data-job executor: generate → clean → deduplicate/exclude → calibrate → rank/select →
project → publish.

One coordinator (its own thread and event loop, see `run_data_job`) owns the checkpoint
database and decides everything in a fixed order; recipe code runs in `workers.Pool` and
`workers.Producer`, calibrator calls on the coordinator's loop (`calibrate.py`). Chunks are
`execution.batch_size` samples; their results are committed in pool order, so the snapshot is
the same for any worker count, backend or chunk size, and a resumed job picks up after the last
committed chunk. Generating a batch is `generation.py` (a recipe with generation-shard hooks
generates it in parallel shard files, `shards.py`); one with ranking hooks is selected by the
global ranked merge (`ranking.py`); the snapshot's report and provenance are `publication.py`;
how a job stops (cancel, exhaustion, retries) is `job_control.py`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import DataError, TransientError
from corpus_assets.tasks import corpus_inputs
from corpus_assets.tasks.batch_files import write_batch_files
from corpus_assets.tasks.calibrate import CalibrateStep, build_calibrator
from corpus_assets.tasks.checkpoints import Checkpoints, StaleCheckpoints, canonical
from corpus_assets.tasks.config import LoadedJobConfig
from corpus_assets.tasks.generation import BatchGeneration
from corpus_assets.tasks.identity import (
    changed_message,
    identity_changes,
    job_identity,
    read_exclusions,
)
from corpus_assets.tasks.job_control import (
    MAX_RETRY_DELAY_S,
    CancelEvent,
    ExhaustedError,
    JobCancelled,
    exit_code,
    one_line,
    retry_delay,
    retryable,
)
from corpus_assets.tasks.jobdir import JobFolder
from corpus_assets.tasks.publication import Publication, batch_totals
from corpus_assets.tasks.ranking import RankedSelection, SelectionPolicy, select_ranked_candidates
from corpus_assets.tasks.shards import has_shard_hooks
from corpus_assets.tasks.snapshot import Snapshot, load_snapshot
from corpus_assets.tasks.types import (
    GenerateContext,
    InsufficientDataError,
    Selection,
)
from corpus_assets.tasks.window import ordered
from corpus_assets.tasks.workers import (
    Pool,
    RankOrder,
    RecipeError,
    RecipeSpec,
    WorkerLost,
    project_chunk,
    rank_chunk,
)

PROGRESS_EVERY_S = 0.5  # generating: a progress update at most this often, and one at the end
Progress = Callable[[str], None]
__all__ = [  # with the names other modules import from here
    "MAX_RETRY_DELAY_S",
    "CancelEvent",
    "DataJob",
    "ExhaustedError",
    "JobCancelled",
    "Progress",
    "retry_delay",
    "write_batch_files",
]


class DataJob:
    """One data job in one folder; `run()` on the coordinator thread returns its snapshot."""

    def __init__(
        self,
        config: LoadedJobConfig,
        output: Path,
        resume: bool = False,
        cancel: threading.Event | None = None,
        progress: Progress | None = None,
        root: Path | None = None,
        attached: bool = False,
    ) -> None:
        self.config = config
        self.model = config.model
        self.execution = config.model.execution
        self.output = output
        self.resume = resume
        self.attached = attached
        self.root = root
        self.cancel = cancel or threading.Event()
        self.say = progress or (lambda line: None)
        self.spec = RecipeSpec(config.model.recipe, dict(config.model.params))
        self.recipe = self.spec.build()  # the coordinator's own instance: select, identity
        calibration = config.model.calibration
        self.calibrate: CalibrateStep | None = None
        if calibration is not None:
            self.calibrate = CalibrateStep(
                build_calibrator(calibration, config.base_dir),
                calibration.repeats,
                self.model.purpose,
                self.model.seed,
                self.execution.batch_size,
                self.execution.max_workers,
                getattr(self.recipe, "prompt", None),
            )
        calibrator = None if self.calibrate is None else self.calibrate.calibrator
        corpus_inputs.check_registered(self.model.corpus_inputs, root)
        self.identity = job_identity(config, self.spec, self.recipe, calibrator)
        self.corpus_inputs: tuple[corpus_inputs.CorpusInput, ...] = ()
        self.inputs = config.inputs
        self.reading = ExitStack()  # the corpus builds' shard locks, held while they are read
        self._progress_at = -PROGRESS_EVERY_S  # when progress.json was last written
        self._progress_behind = False  # a chunk committed since then

    # -- the whole job ---------------------------------------------------------------------

    async def run(self) -> Snapshot:
        """Run (or resume) the job on the calling thread's event loop; its verified snapshot.

        The corpus builds it reads are held (their shard locks, shared) from their verification
        until the search has selected, which is all the reading there is.
        """
        with self.reading:
            self._read_corpus_inputs()
            folder = JobFolder.open(self.output, self.resume, self.attached)
            try:
                return await self._run_locked(folder)
            finally:
                folder.release()

    def _read_corpus_inputs(self) -> None:
        """Take the corpus builds' locks, verify the builds, add their shards to the inputs."""
        found = self.reading.enter_context(
            corpus_inputs.reading(self.model.corpus_inputs, self.root, self._waiting)
        )
        self.corpus_inputs = found
        self.inputs = (*self.config.inputs, *(p for c in found for p in c.shards))
        self.identity["corpus_inputs"] = {c.partition_key: c.manifest_sha256 for c in found}

    def _waiting(self, line: str) -> None:
        """A line while a lock is held elsewhere; a cancelled job stops waiting."""
        if self.cancel.is_set():
            cancelled = JobCancelled(f"cancelled while {line}")
            cancelled.exit_code = getattr(self.cancel, "exit_code", cancelled.exit_code)
            raise cancelled
        self.say(f"tasks: {line}")

    async def _run_locked(self, folder: JobFolder) -> Snapshot:
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
            snapshot = await self._with_retries()
        except BaseException as exc:
            state = "cancelled" if isinstance(exc, JobCancelled) else "failed"
            if isinstance(exc, JobCancelled):
                exc.exit_code = getattr(self.cancel, "exit_code", exc.exit_code)
            folder.write_job(state, error=one_line(exc), exit_code=exit_code(exc))
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
        database = folder.work / "checkpoints.sqlite3"
        if database.is_file():
            try:
                ckpt = Checkpoints(database)
            except StaleCheckpoints:  # the snapshot is verified; its work files stay as they are
                self.say(
                    "tasks: work/ is of another corpus_assets version: batch files not checked"
                )
            else:
                with closing(ckpt):
                    self._rebuild_batch_files(folder.work, ckpt)
        folder.write_job(
            "succeeded", dataset_id=snapshot.dataset_id, dataset_path=str(snapshot.path)
        )
        return snapshot

    def _rebuild_batch_files(self, work: Path, ckpt: Checkpoints) -> None:
        """The derived files of every generated batch, rewritten where missing or damaged."""
        for state in ckpt.batches():
            if state.done:
                for path in write_batch_files(work, ckpt, state.batch):
                    self.say(f"tasks: rebuilt work/{path.name} from the checkpoints")

    def _check_identity(self) -> None:
        stored = self.ckpt.get("identity")
        if stored is None:
            self.ckpt.load_exclusions(read_exclusions(self.config.exclusions))
            self.ckpt.put("identity", self.identity)
            return
        changes = identity_changes(stored, self.identity)
        if changes:
            raise DataError(changed_message(self.folder.path, changes))

    async def _with_retries(self) -> Snapshot:
        attempt = 0
        while True:
            try:
                return await self._attempt()
            except BaseException as exc:
                if not retryable(exc) or attempt >= self.execution.max_retries:
                    if isinstance(exc, WorkerLost):
                        raise WorkerLost(
                            f"{exc} (after {attempt + 1} attempt(s)); resume the job (with "
                            "fewer max_workers if its workers ran out of memory)"
                        ) from None
                    if retryable(exc) and not isinstance(exc, TransientError):
                        raise TransientError(
                            f"{one_line(exc)} (after {attempt + 1} attempt(s))"
                        ) from exc
                    raise
                delay = retry_delay(self.execution.retry_delay, attempt)
                self.say(f"tasks: {one_line(exc)}; retry {attempt + 1} in {delay:g}s")
                if self.cancel.wait(delay):
                    raise JobCancelled("cancelled while waiting to retry") from None
                attempt += 1

    async def _attempt(self) -> Snapshot:
        self._rebuild_batch_files(self.folder.work, self.ckpt)
        with Pool(self.spec, self.execution.backend, self.execution.max_workers) as pool:
            if self.ckpt.get("selection") is None:
                await self._search(pool)
            self.reading.close()  # projecting and publishing read the checkpoints only
            self._project(pool)
        return self._publish()

    # -- generate, clean, deduplicate, exclude, select -------------------------------------

    def context(self, batch: int) -> GenerateContext:
        return GenerateContext(
            seed=self.model.seed,
            batch_index=batch,
            target_count=self.model.target_count,
            purpose=self.model.purpose,
            inputs=self.inputs,
        )

    async def _search(self, pool: Pool) -> None:
        """Batches until selection succeeds, or a bound is reached (ExhaustedError)."""
        searched = self.ckpt.get("searched")  # the last batch whose select asked for more
        batch = 0 if searched is None else searched + 1
        while True:
            state = self.ckpt.batch(batch)
            if not state.done:
                generation = BatchGeneration(
                    self.ckpt,
                    self.spec,
                    self.recipe,
                    self.execution,
                    self.model.max_candidates,
                    self.folder.work,
                    self.cancel,
                    self.context,
                    self._chunk_progress,
                    self._caught_up,
                )
                if has_shard_hooks(self.recipe):
                    generation.sharded(pool, batch, state.consumed)
                else:
                    generation.serial(pool, batch, state.consumed)
                write_batch_files(self.folder.work, self.ckpt, batch)
            if self.calibrate is not None:
                await self._calibrate(pool, batch)
            try:
                selection = self._select(pool, batch)
            except InsufficientDataError as exc:
                self._out_of_bounds(batch, exc)
                self.ckpt.put("searched", batch)
                batch += 1
                continue
            self._accept(selection, batch)
            return

    async def _calibrate(self, pool: Pool, batch: int) -> None:
        """Ask the calibrator about the batch's new candidates, then grade the answers."""
        assert self.calibrate is not None
        await self.calibrate.ask(self.ckpt, batch, self.cancel.is_set)
        if self.cancel.is_set():
            raise JobCancelled(f"cancelled while calibrating batch {batch}")
        self._progress("calibrate", batch, self.ckpt.calibration_counts(batch))
        self.calibrate.grade(self.ckpt, pool, batch, self.cancel.is_set)
        if self.cancel.is_set():
            raise JobCancelled(f"cancelled while grading batch {batch}")

    def _select(self, pool: Pool, batch: int) -> Selection:
        """The recipe's selection: the ranked merge when its policy hook gives a policy."""
        context = self.context(batch)
        hook = getattr(self.recipe, "selection_policy", None)
        policy = hook(context, self.calibrate is not None) if callable(hook) else None
        if policy is None:
            return self.recipe.select(self.ckpt.pool(), self.ckpt.scores(), context)
        if not isinstance(policy, SelectionPolicy):
            raise RecipeError(
                f"selection_policy() returned a {type(policy).__name__}; allowed: "
                "SelectionPolicy or None"
            )
        for earlier in range(batch + 1):
            self._rank(pool, earlier)
        ranked = select_ranked_candidates(self.ckpt.ranking(), self.model.target_count, policy)
        finalize = getattr(self.recipe, "finalize_selection", None)
        if not callable(finalize):
            return _plain_selection(ranked, self.model.target_count)
        return finalize(ranked, self.ckpt.eligible(), context)  # type: ignore[no-any-return]

    def _rank(self, pool: Pool, batch: int) -> None:
        """Rank the batch's candidates not ranked yet, in worker chunks committed in order."""
        context = self.context(batch)

        def chunks() -> Iterator[tuple[int, Future[Any]]]:
            start = self.ckpt.ranked(batch)
            for seqs in self.ckpt.seq_pages(batch, self.execution.batch_size, skip=start):
                payloads = [json.loads(p) for p in self.ckpt.candidate_rows(seqs, "payload")]
                scores = self.ckpt.scores_of([p["task_id"] for p in payloads])
                items = [(p, scores.get(p["task_id"], ())) for p in payloads]
                start += len(items)
                yield start, pool.submit(rank_chunk, RankOrder(context, items))

        with ordered(chunks(), self._window) as results:
            for ranked, future in results:
                self._commit_ranking(batch, ranked, future)

    @property
    def _window(self) -> int:
        """How many chunks the workers may run ahead of the commits."""
        return 2 * self.execution.max_workers

    def _commit_ranking(self, batch: int, ranked: int, future: Future[Any]) -> None:
        self.ckpt.commit_ranking(batch, ranked, future.result())
        if self.cancel.is_set():
            raise JobCancelled(f"cancelled while ranking batch {batch}")

    def _out_of_bounds(self, batch: int, exc: InsufficientDataError) -> None:
        """Raise ExhaustedError when no further batch is allowed, naming the bound and counts."""
        generated = self.ckpt.generated_total()
        if generated >= self.model.max_candidates:
            bound = f"max_candidates = {self.model.max_candidates}"
        elif batch + 1 >= self.model.max_batches:
            bound = f"max_batches = {self.model.max_batches}"
        else:
            return
        totals = batch_totals(self.ckpt)
        raise ExhaustedError(
            f"ran out of candidates: {bound} reached after {batch + 1} batch(es) with "
            f"{totals['generated']} generated, {totals['retained']} retained "
            f"({totals['rejected']} rejected, {totals['duplicates']} duplicates, "
            f"{totals['excluded']} excluded), target_count {self.model.target_count}; "
            f"select said: {one_line(exc)}"
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
        unknown = self.ckpt.first_unknown(ids)
        if unknown is not None:
            raise RecipeError(
                f"select() chose {unknown!r}, which is not a retained candidate "
                "(unknown, rejected, duplicate or excluded)"
            )
        statistics = json.loads(canonical(dict(selection.statistics)))
        self.ckpt.put("selection", {"task_ids": ids, "statistics": statistics, "batch": batch})
        self._progress("select", batch)

    # -- project and publish ---------------------------------------------------------------

    def _project(self, pool: Pool) -> None:
        """The selected samples' public, reference and training rows, committed in chunks."""
        ids: list[str] = self.ckpt.get("selection")["task_ids"]
        size = self.execution.batch_size

        def chunks() -> Iterator[tuple[int, Future[Any]]]:
            for start in range(self.ckpt.projected(), len(ids), size):
                payloads = [s.to_json() for s in self.ckpt.samples_by_id(ids[start : start + size])]
                yield start, pool.submit(project_chunk, payloads)

        with ordered(chunks(), self._window) as results:
            for start, future in results:
                self._commit_projection(start, future)

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
            Publication(
                self.config,
                self.spec,
                self.recipe,
                self.calibrate,
                self.identity,
                self.corpus_inputs,
                self.ckpt,
                self.folder,
            ).write()
        self._progress("published", None)
        return load_snapshot(self.folder.dataset)

    # -- progress --------------------------------------------------------------------------

    def _chunk_progress(self, batch: int) -> None:
        """The progress of a committed chunk of generation, at most every PROGRESS_EVERY_S
        seconds (each update is a few queries, a line and an fsynced progress.json)."""
        if time.monotonic() - self._progress_at >= PROGRESS_EVERY_S:
            self.ckpt.flush()  # progress.json never counts chunks that are not durable
            self._progress("generate", batch)
        else:
            self._progress_behind = True

    def _caught_up(self, batch: int) -> None:
        """The generated batch's last progress, when a chunk's update was left out."""
        if self._progress_behind:
            self._progress("generate", batch)

    def _progress(self, phase: str, batch: int | None, extra: dict[str, int] | None = None) -> None:
        """progress.json and one progress line; `extra` adds a phase's own counts."""
        self._progress_at, self._progress_behind = time.monotonic(), False
        totals = batch_totals(self.ckpt)
        projected = self.ckpt.projected()
        self.folder.write_progress(
            {
                "phase": phase,
                "batch": batch,
                "target_count": self.model.target_count,
                "projected": projected,
            }
            | totals
            | (extra or {})
        )
        where = f" batch {batch}" if batch is not None else ""
        more = "".join(f", {value} {key.replace('_', ' ')}" for key, value in (extra or {}).items())
        self.say(
            f"tasks: {phase}{where}: {totals['generated']} generated, {totals['retained']} "
            f"retained, {totals['duplicates']} duplicates, {totals['excluded']} excluded"
            f"{more}, {projected}/{self.model.target_count} projected"
        )


def _plain_selection(ranked: RankedSelection, target_count: int) -> Selection:
    """The ranked merge's ids as the selection, for a recipe without `finalize_selection`."""
    if len(ranked.selected) < target_count or ranked.unmet_minimums:
        unmet = ", ".join(f"{g}: {n} short" for g, n in ranked.unmet_minimums.items())
        raise InsufficientDataError(
            f"ranked selection found {len(ranked.selected)} of {target_count} task(s)"
            + (f"; group minimums unmet ({unmet})" if unmet else "")
        )
    return Selection(ranked.task_ids, {"ranked": True, "selected": len(ranked.selected)})
