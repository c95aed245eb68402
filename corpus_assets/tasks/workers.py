"""Where recipe code runs: a pool of thread or spawned-process workers, and one producer.

Every worker builds its own recipe instance from the factory reference and params, so recipe
state is never shared between threads or processes. The coordinator submits chunks and takes
their results back in submission order, which is what makes the result independent of the
number of workers and of the backend. Generation is one iterator per batch, so it runs in one
producer (a thread, or a spawned process for the `process` backend) that streams chunks of
samples through a bounded queue while the pool cleans earlier chunks.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from corpus_assets.core.errors import CorpusError, TransientError
from corpus_assets.core.stages.local_pool import WorkerDied, open_pool
from corpus_assets.tasks.cleaned import Block, Cleaned
from corpus_assets.tasks.factory import load_factory
from corpus_assets.tasks.ranking import RankedCandidate
from corpus_assets.tasks.shards import ShardFile
from corpus_assets.tasks.types import (
    JSON,
    DataSample,
    GenerateContext,
    ProjectedRow,
    Recipe,
    check_score,
)

QUEUE_CHUNKS = 4  # chunks a producer may run ahead of the coordinator
POLL_S = 0.2
ORPHAN_POLL_S = 0.5
EXIT_ORPHANED = 70  # a worker whose coordinator died


class RecipeError(CorpusError):
    """The recipe broke the protocol (a wrong type, a value that is not JSON): not retried."""


class WorkerLost(TransientError):
    """A worker process died (killed by a signal, out of memory): the attempt is retried."""


@dataclass(frozen=True)
class RecipeSpec:
    """How a worker builds its own recipe: the factory reference and its params."""

    factory: str
    params: dict[str, Any]

    def build(self) -> Recipe:
        recipe = load_factory(self.factory)(**self.params)
        missing = [
            name
            for name in ("generate", "clean", "score", "select", "training_row")
            if not callable(getattr(recipe, name, None))
        ]
        if missing:
            raise RecipeError(
                f"{self.factory} returned a {type(recipe).__name__} without "
                f"{', '.join(missing)}; a recipe needs generate, clean, score, select, "
                "training_row"
            )
        return recipe  # type: ignore[no-any-return]


# -- per-worker recipe ---------------------------------------------------------------------

_local = threading.local()


def _init_worker(spec: RecipeSpec, coordinator: int | None) -> None:
    """Pool initializer: this worker's own recipe; a process also leaves Ctrl-C to its parent
    and exits when its parent is gone."""
    if coordinator is not None:
        _child_of_coordinator(coordinator)
    _local.recipe = spec.build()


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread while it spawns: a child inherits the blocked mask through
    exec, so a Ctrl-C to the process group while the child is still starting (before it can
    ignore SIGINT) stays pending instead of killing it. The main thread still receives it."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _child_of_coordinator(coordinator: int) -> None:
    """In a spawned worker: ignore SIGINT (the coordinator stops us) and die with the parent.

    A coordinator killed with SIGKILL cannot stop its workers, and a worker blocked on its
    queue would wait for ever; a watchdog thread sees the parent change and exits.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending one is dropped

    def watch() -> None:  # the coordinator's pid comes from it: it may be dead already
        while os.getppid() == coordinator:
            time.sleep(ORPHAN_POLL_S)
        os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _recipe() -> Recipe:
    recipe: Recipe = _local.recipe
    return recipe


def clean_chunk(payloads: list[dict[str, JSON]]) -> Block:
    """Clean one chunk of samples in a worker: each one encoded, hashed and keyed, as the block
    the pool admits."""
    recipe = _recipe()
    return Block.of([_cleaned(recipe, DataSample.from_json(payload)) for payload in payloads])


def _cleaned(recipe: Recipe, sample: DataSample) -> Cleaned | None:
    """`clean` of a sample the recipe gave (its own object: no copy), encoded and hashed."""
    cleaned = recipe.clean(sample)
    if cleaned is not None and not isinstance(cleaned, DataSample):
        raise RecipeError(
            f"clean({sample.task_id!r}) returned a {type(cleaned).__name__}; "
            "allowed: a DataSample or None"
        )
    return None if cleaned is None else _encoded(cleaned)


@dataclass(frozen=True)
class ShardOrder:
    """One generation shard for a worker: generate it, clean it, write its file."""

    context: GenerateContext
    file: ShardFile


def shard_chunk(order: ShardOrder) -> int:
    """Generate and clean one shard in a worker and write its file and sidecar; the row count."""
    recipe = _recipe()
    shard = order.file.shard
    limit = shard.stop - shard.start

    def rows() -> Iterator[Cleaned | None]:
        samples = recipe.generate_shard(order.context, shard)  # type: ignore[attr-defined]
        for count, sample in enumerate(samples, 1):
            if not isinstance(sample, DataSample):
                raise RecipeError(
                    f"generate_shard() yielded a {type(sample).__name__}; allowed: DataSample"
                )
            if count > limit:
                raise RecipeError(
                    f"generate_shard() yielded more than the {limit} sample(s) of shard "
                    f"{shard.start}..{shard.stop}"
                )
            yield _cleaned(recipe, sample)

    return order.file.write(rows())


def score_chunk(
    items: list[tuple[dict[str, JSON], list[tuple[JSON, str | None]]]],
) -> list[list[float | None]]:
    """Grade one chunk: per sample, its score per repeat (None where the attempt failed)."""
    recipe = _recipe()
    out = []
    for payload, attempts in items:
        sample = DataSample.from_json(payload)
        out.append(
            [None if reason is not None else _score(recipe, sample, r) for r, reason in attempts]
        )
    return out


def _score(recipe: Recipe, sample: DataSample, response: JSON) -> float:
    value = recipe.score(sample, response)
    try:
        return check_score(value)
    except ValueError as exc:
        raise RecipeError(f"score({sample.task_id!r}): {exc}") from None


@dataclass(frozen=True)
class RankOrder:
    """One chunk to rank: samples with their scores, and their batch's context."""

    context: GenerateContext
    items: list[tuple[dict[str, JSON], tuple[float | None, ...]]]


def rank_chunk(order: RankOrder) -> list[RankedCandidate]:
    """Rank one chunk in a worker: the eligible candidates, sorted by the rank order."""
    recipe = _recipe()
    ranked = []
    for payload, scores in order.items:
        sample = DataSample.from_json(payload)
        try:
            place = recipe.rank(sample, scores, order.context)  # type: ignore[attr-defined]
        except ValueError as exc:  # RankedCandidate's own checks
            raise RecipeError(str(exc)) from None
        if place is None:
            continue
        if not isinstance(place, RankedCandidate) or place.task_id != sample.task_id:
            raise RecipeError(
                f"rank({sample.task_id!r}) returned {type(place).__name__}"
                f"{'' if not isinstance(place, RankedCandidate) else ' for ' + repr(place.task_id)}"
                "; allowed: None or a RankedCandidate with the sample's task_id"
            )
        ranked.append(place)
    return sorted(ranked, key=RankedCandidate.order)


def _encoded(sample: DataSample) -> Cleaned:
    try:
        return Cleaned.of(sample)
    except (TypeError, ValueError) as exc:
        raise RecipeError(
            f"clean({sample.task_id!r}) returned a sample that is not JSON: {exc}"
        ) from None


def project_chunk(payloads: list[dict[str, JSON]]) -> list[ProjectedRow]:
    """(public row, reference row, training row) for one chunk of selected samples."""
    recipe = _recipe()
    rows = []
    for payload in payloads:
        sample = DataSample.from_json(payload)
        train = recipe.training_row(sample)
        if not isinstance(train, dict):
            raise RecipeError(
                f"training_row({sample.task_id!r}) returned a {type(train).__name__}; "
                "allowed: a JSON object (dict)"
            )
        reference = {"task_id": sample.task_id, "reference": sample.reference}
        rows.append((sample.task.to_json(), reference, train))
    return rows


class Pool:
    """`max_workers` thread or spawned-process workers, each with its own recipe; `with` it.

    Leaving the `with` waits for running calls to end and cancels those not started. A worker
    process that dies (SIGKILL from the OOM killer, a crash) breaks the process pool: the
    BrokenProcessPool that any of its calls raises inside the `with` leaves it as a
    WorkerLost naming the dead worker (`local_pool.open_pool`).
    """

    def __init__(self, spec: RecipeSpec, backend: str, max_workers: int) -> None:
        self._stack = ExitStack()
        self.executor: Executor
        if backend == "process":
            self.executor = self._stack.enter_context(
                open_pool(
                    max_workers,
                    multiprocessing.get_context("spawn"),
                    _init_worker,
                    (spec, os.getpid()),
                )
            )
        else:
            self.executor = ThreadPoolExecutor(
                max_workers,
                thread_name_prefix="task-worker",
                initializer=_init_worker,
                initargs=(spec, None),
            )
            self._stack.callback(self.executor.shutdown, wait=True, cancel_futures=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        try:
            return bool(self._stack.__exit__(kind, exc, tb))
        except WorkerDied as death:
            raise WorkerLost(f"a task worker {death}") from None

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Future[Any]:
        with _sigint_blocked():  # a process pool spawns its workers inside submit
            return self.executor.submit(fn, arg)


def _killed(process: Any) -> str:
    """'(pid 1234) was killed by SIGKILL' for a process that a signal ended."""
    code = -int(process.exitcode)
    try:
        name = signal.Signals(code).name
    except ValueError:
        name = f"signal {code}"
    return f"(pid {process.pid}) was killed by {name}"


# -- the producer --------------------------------------------------------------------------


@dataclass(frozen=True)
class ProduceOrder:
    """One batch to generate: skip what is committed, stop at `limit` samples in all."""

    spec: RecipeSpec
    context: GenerateContext
    chunk_size: int
    skip: int
    limit: int


def produce(order: ProduceOrder, put: Callable[[tuple[Any, ...]], bool]) -> None:
    """Run `generate` and `put` ('chunk', start, payloads) ..., then ('end', count, truncated).

    `put` returns False when the coordinator no longer listens: generation stops. Errors are
    put as ('error', exc), so the coordinator raises them.
    """
    try:
        recipe = order.spec.build()
        count, chunk, start = 0, [], order.skip
        samples = iter(recipe.generate(order.context))
        truncated = False
        for sample in samples:
            if count == order.limit:
                truncated = True
                break
            if not isinstance(sample, DataSample):
                raise RecipeError(
                    f"generate() yielded a {type(sample).__name__}; allowed: DataSample"
                )
            count += 1
            if count <= order.skip:
                continue
            chunk.append(sample.to_json())
            if len(chunk) == order.chunk_size:
                if not put(("chunk", start, chunk)):
                    return
                start, chunk = start + len(chunk), []
        if chunk and not put(("chunk", start, chunk)):
            return
        put(("end", count, truncated))
    except BaseException as exc:  # every failure travels to the coordinator
        put(("error", exc))


def _produce_in_process(order: ProduceOrder, channel: Any, coordinator: int) -> None:
    _child_of_coordinator(coordinator)

    def put(message: tuple[Any, ...]) -> bool:
        channel.put(message)
        return True

    produce(order, put)


class Producer:
    """One batch's generation on a thread or in a spawned process; iterate its messages."""

    def __init__(self, order: ProduceOrder, backend: str, stopping: threading.Event) -> None:
        self._stopping = stopping
        self._process: Any = None
        if backend == "process":
            ctx = multiprocessing.get_context("spawn")
            self._queue: Any = ctx.Queue(QUEUE_CHUNKS)
            self._process = ctx.Process(
                target=_produce_in_process, args=(order, self._queue, os.getpid()), daemon=True
            )
            with _sigint_blocked():
                self._process.start()
        else:
            self._queue = queue.Queue(QUEUE_CHUNKS)
            self._abandoned = threading.Event()
            self._thread = threading.Thread(
                target=produce, args=(order, self._put), name="task-producer", daemon=True
            )
            self._thread.start()

    def _put(self, message: tuple[Any, ...]) -> bool:
        while not self._abandoned.is_set():
            try:
                self._queue.put(message, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def messages(self) -> Iterator[tuple[Any, ...]]:
        """Chunks, then ('end', ...) or ('error', exc); stops early when `stopping` is set."""
        while not self._stopping.is_set():
            try:
                message: tuple[Any, ...] = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if self._process is None or self._process.is_alive():
                    continue
                message = self._last_words()
            yield message
            if message[0] != "chunk":
                return

    def _last_words(self) -> tuple[Any, ...]:
        """What a finished producer process left in the queue, else its death as an error."""
        try:
            message: tuple[Any, ...] = self._queue.get(timeout=POLL_S)
        except queue.Empty:
            code = self._process.exitcode
            if code is not None and code < 0:  # killed by a signal: a transient fault
                return ("error", WorkerLost(f"the generation process {_killed(self._process)}"))
            return ("error", RecipeError(f"the generation process died (exit code {code})"))
        return message

    def close(self) -> None:
        """Stop generation and wait for the producer to be gone."""
        if self._process is not None:
            if self._process.is_alive():
                self._process.terminate()
            self._process.join()
            self._queue.close()
            self._queue.join_thread()
        else:
            self._abandoned.set()
            self._thread.join()
