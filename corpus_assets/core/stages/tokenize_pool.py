"""The tokenize stage's shard work: shard tasks in this process or a pool of spawned workers.

A task turns one shard into its `.bin`/`.idx` pair in staging (atomically) and then writes its
completion marker, so a killed stage redoes only unfinished shards, and a new pool redoes them
when a pool worker dies (`local_pool`).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from corpus_assets.core.errors import CorpusError, DataError
from corpus_assets.core.stages.backend import LOCAL, Backend
from corpus_assets.core.stages.local_pool import open_pool, run_with_rebuilds
from corpus_assets.core.store.atomic import atomic_writer, write_json
from corpus_assets.core.store.digests import verify_files
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text.tokenizer import (
    DTYPES,
    IDX_DTYPE,
    Encoder,
    TokenizerInfo,
    load_encoder,
    text_sizes,
)

POLL_S = 1.0
Report = Callable[[int, int], None]  # (documents, text bytes) done
THREADS_PER_PROCESS = 4  # encoding threads one process of ours drives (see plan)
PARALLELISM_ENV = "TOKENIZERS_PARALLELISM"  # the library's own threads: off, we run ours
TEXT_BATCH_BYTES = 4 << 20  # per encode call: bounds the tokenizer's memory


def run_shards(
    tasks: list[ShardTask], workers: int, progress: Progress, backend: Backend = LOCAL
) -> None:
    """Run shard tasks, largest first, on `workers` cores (or on Ray); progress from their
    reports."""
    if not tasks:
        return
    order = sorted(tasks, key=lambda t: (-t.size, t.shard))
    if backend.is_ray:
        _run_ray(order, workers, progress, backend)
        return
    procs, threads = plan(tasks[0].tokenizer, workers, len(order))
    if procs > 1:
        _run_pool(order, procs, threads, progress)
        return
    saved = os.environ.get(PARALLELISM_ENV)  # in this process: no start-up cost
    os.environ[PARALLELISM_ENV] = "false"
    try:
        run_tasks(order, progress.add, threads)
    finally:
        if saved is None:
            del os.environ[PARALLELISM_ENV]
        else:
            os.environ[PARALLELISM_ENV] = saved


def plan(info: TokenizerInfo, workers: int, shards: int) -> tuple[int, int]:
    """(processes, encoding threads per process) for `workers` cores; never more processes
    than shards.

    A `tokenizers` tokenizer releases the GIL while it encodes, so one process runs up to
    THREADS_PER_PROCESS encoding threads (each encodes whole batches, the library's own threads
    off) while its main thread turns finished batches into ids and writes them. On 2 cores this
    was at least as fast as the library's own threads (whose batch-end waits it avoids, and
    whose Python work it overlaps) and clearly faster than 2 worker processes, which pay
    start-up and run their Python work on the same cores (bench/bench_tokenize.py
    --compare-modes). `bytes` is numpy work under the GIL: one process per core.
    """
    if info.id == "bytes":
        return max(1, min(shards, workers)), 1
    procs = max(1, min(shards, -(-workers // THREADS_PER_PROCESS)))
    return procs, max(1, workers // procs)


def _run_pool(tasks: list[ShardTask], procs: int, threads: int, progress: Progress) -> None:
    """Run the tasks in a pool of `procs` workers; a new pool (and queue) when one dies."""
    ctx = multiprocessing.get_context("spawn")

    def attempt(batch: list[ShardTask]) -> tuple[()]:
        shared = _Shared(ctx.Queue(), ctx.Event(), threads)  # new: a dead worker may hold a lock
        initargs = (shared, os.getpid())
        try:
            with open_pool(min(procs, len(batch)), ctx, _init_worker, initargs) as pool:
                _wait_all(pool, batch, shared, progress)
        finally:
            _drain(shared.reports, progress)
            shared.reports.close()
        return ()  # a shard's result is its files and marker

    def unfinished(task: ShardTask) -> bool:
        return read_marker(task, check_files=False) is None

    for _ in run_with_rebuilds(tasks, attempt, unfinished, "tokenize worker", progress.note):
        pass


def _wait_all(
    pool: ProcessPoolExecutor, tasks: list[ShardTask], shared: _Shared, progress: Progress
) -> None:
    """Submit every task to `pool` and wait for them, reporting progress meanwhile; on an
    error, tell the other workers to stop (a broken pool stops them itself)."""
    try:
        futures: set[Future[None]] = {pool.submit(run_task, t) for t in tasks}
        while futures:
            finished, futures = wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED)
            _drain(shared.reports, progress)
            for future in finished:
                future.result()
    except BrokenProcessPool:
        raise  # its workers are stopped already; the dead one may hold the stop flag's lock
    except BaseException:
        shared.stop.set()
        raise


def _run_ray(tasks: list[ShardTask], workers: int, progress: Progress, backend: Backend) -> None:
    """One Ray task per shard (one CPU, one encoding thread each); progress as they finish."""
    from corpus_assets.core.stages.ray_tasks import ray_session

    with ray_session(backend, workers, Path(tasks[0].marker).parent, progress) as session:
        for docs, nbytes in session.map(ray_task, [(t,) for t in tasks]):
            progress.add(docs, nbytes)


def ray_task(task: ShardTask) -> tuple[int, int]:
    """On a Ray worker: one shard, as a pool worker runs it; (documents, text bytes) done."""
    os.environ[PARALLELISM_ENV] = "false"
    done = [0, 0]

    def count(docs: int, nbytes: int) -> None:
        done[0] += docs
        done[1] += nbytes

    run_tasks([task], count, 1)
    return done[0], done[1]


def _drain(reports: Any, progress: Progress) -> None:
    docs = nbytes = 0
    while True:
        try:
            d, b = reports.get_nowait()
        except Exception:  # queue.Empty, or closed by a dead worker
            break
        docs += d
        nbytes += b
    progress.add(docs, nbytes)  # also a heartbeat when nothing finished


@dataclass(frozen=True)
class ShardTask:
    """One shard to tokenize into `<stem>.bin` / `<stem>.idx` in `out_dir`, then mark done."""

    shard: str
    shard_path: str
    shard_sha256: str
    rows: int
    size: int
    out_dir: str
    marker: str
    tokenizer: TokenizerInfo
    batch_size: int

    def key(self) -> dict[str, Any]:
        """What the pair's bytes depend on: a marker with another key is stale."""
        return {
            "shard": self.shard,
            "shard_sha256": self.shard_sha256,
            "rows": self.rows,
            "tokenizer": self.tokenizer.identity(),
        }


def read_marker(task: ShardTask, check_files: bool = True) -> dict[str, Any] | None:
    """The completion marker of `task` if it is current and (checked) its files are intact."""
    try:
        doc = json.loads(Path(task.marker).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != task.key():
        return None
    if check_files and verify_files(Path(task.out_dir), doc["files"]):
        return None
    return doc


@dataclass(frozen=True)
class _Shared:
    """What the stage shares with its pool workers: progress reports, a stop flag, threads."""

    reports: Any  # multiprocessing Queue of (documents, text bytes)
    stop: Any  # multiprocessing Event: another shard failed
    threads: int  # encoding threads per worker


_shared: _Shared | None = None
_encoder: tuple[object, Encoder] | None = None
"""The last encoder this process loaded, by `_encoder_key`: a Ray node that tokenizes shard
after shard loads it once, though each task has the tokenizer file at its own path."""


def _init_worker(shared: _Shared, parent_pid: int) -> None:
    """Die with the stage process; encode on our threads, not the library's."""
    global _shared
    _shared = shared
    if sys.platform.startswith("linux"):  # PR_SET_PDEATHSIG: killed the instant the stage dies
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    os.environ[PARALLELISM_ENV] = "false"


def _exit_when_orphaned(parent_pid: int) -> None:
    """Elsewhere (and as a backstop): an orphaned worker must not keep writing into staging."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(1)


def run_task(task: ShardTask) -> None:
    """In a pool worker: one shard, progress through the queue shared with the stage."""
    run_tasks([task], _to_stage, _shared.threads if _shared is not None else 1)


def run_tasks(tasks: list[ShardTask], report: Report, threads: int) -> None:
    """Tokenize shards in order, each into its file pair (atomically), then write its marker.

    One stream of batches runs through `threads` encoding threads across shard boundaries, so
    the threads stay busy while a shard's last batch is finished and its files are closed.
    """
    global _encoder
    if not tasks:
        return
    info = tasks[0].tokenizer
    key = _encoder_key(info)
    if _encoder is None or _encoder[0] != key:
        _encoder = (key, load_encoder(info))
    with closing(_encoded(_batches_of(tasks), _encoder[1], threads)) as stream:
        for task in tasks:
            out, stem = Path(task.out_dir), Path(task.shard).stem
            batches = _until_end(stream)
            files = _write_pair(task, batches, out / f"{stem}.bin", out / f"{stem}.idx", report)
            write_json(Path(task.marker), {"key": task.key(), "files": files})


def _encoder_key(info: TokenizerInfo) -> object:
    """What decides the encoder: the tokenizer's identity (its file's sha256, not where the
    file is), or the whole info for a tokenizer without a digest."""
    return json.dumps(info.identity(), sort_keys=True) if info.sha256 is not None else info


_END: tuple[None, None, int] = (None, None, 0)  # closes one shard's batches in the stream


def _batches_of(tasks: list[ShardTask]) -> Iterator[tuple[Any, int]]:
    for task in tasks:
        yield from _text_batches(task)
        yield None, 0


def _until_end(stream: Iterator[Any]) -> Iterator[Any]:
    """The stream's items up to (not including) the next `_END`; the rest stays in `stream`."""
    for item in stream:
        if item is _END:
            return
        yield item


def _encoded(
    batches: Iterator[tuple[Any, int]], encoder: Encoder, threads: int
) -> Generator[Any, None, None]:
    """(ids, lengths, text bytes) per batch, in order, `_END` for a `None` batch; up to
    `threads` batches encode at once on helper threads while this one finishes the oldest."""
    if threads == 1:
        for texts, nbytes in batches:
            _next_batch()
            yield _END if texts is None else (*encoder.encode(texts), nbytes)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="encode") as pool:
        window: deque[tuple[Future[Any] | None, int]] = deque()
        running = 0
        for texts, nbytes in batches:
            _next_batch()
            if texts is None:
                window.append((None, 0))
            else:
                window.append((pool.submit(encoder.start, texts), nbytes))
                running += 1
            while window and (window[0][0] is None or running > threads):
                item = window.popleft()
                if item[0] is not None:
                    running -= 1
                yield _finished(item, encoder)
        while window:
            yield _finished(window.popleft(), encoder)


def _finished(item: tuple[Future[Any] | None, int], encoder: Encoder) -> tuple[Any, ...]:
    started, nbytes = item
    return _END if started is None else (*encoder.finish(started.result()), nbytes)


def _next_batch() -> None:
    """In a pool worker: stop when another shard failed."""
    if _shared is not None and _shared.stop.is_set():
        raise CorpusError("stopped: another shard failed")


def _to_stage(docs: int, nbytes: int) -> None:
    if _shared is not None:
        _shared.reports.put((docs, nbytes))


def _write_pair(
    task: ShardTask, batches: Iterator[Any], bin_path: Path, idx_path: Path, report: Report
) -> list[dict[str, Any]]:
    dtype = DTYPES[task.tokenizer.dtype]
    bin_hash, idx_hash = hashlib.sha256(), hashlib.sha256()
    tokens = docs = 0
    with atomic_writer(bin_path) as fb, atomic_writer(idx_path) as fi:
        for ids, lengths, nbytes in batches:
            assert ids.dtype == dtype, (ids.dtype, dtype)
            _write(fb, bin_hash, ids)
            _write(fi, idx_hash, (np.cumsum(lengths) + tokens).astype(IDX_DTYPE))
            tokens += int(ids.size)
            docs += int(lengths.size)
            report(int(lengths.size), nbytes)
        if docs != task.rows:
            raise DataError(f"{task.shard}: read {docs} rows, the shards manifest says {task.rows}")
        fb_size, fi_size = fb.tell(), fi.tell()
    common = {"shard": task.shard, "tokens": tokens, "documents": docs}
    return [
        {"name": bin_path.name, **common, "sha256": bin_hash.hexdigest(), "bytes": fb_size},
        {"name": idx_path.name, **common, "sha256": idx_hash.hexdigest(), "bytes": fi_size},
    ]


def _write(fh: IO[bytes], digest: Any, array: np.ndarray[Any, Any]) -> None:
    view = np.ascontiguousarray(array).data.cast("B")
    digest.update(view)
    fh.write(view)


def _text_batches(task: ShardTask) -> Iterator[tuple[Any, int]]:
    """The shard's `text` column in batches of at most `batch_size` rows and about
    TEXT_BATCH_BYTES of text (one long document may exceed it), with their UTF-8 size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(task.shard_path, buffer_size=1 << 20, pre_buffer=False) as pf:
            if "text" not in pf.schema_arrow.names:
                raise DataError(f"shard {task.shard} has no 'text' column")
            for batch in pf.iter_batches(task.batch_size, columns=["text"], use_threads=False):
                texts = batch.column(0)
                if texts.null_count:
                    raise DataError(f"shard {task.shard} has a row with no text")
                yield from _by_size(texts, TEXT_BATCH_BYTES)
    except pa.ArrowException as exc:
        raise DataError(f"cannot read shard {task.shard}: {exc}") from None


def _by_size(texts: Any, limit: int) -> Iterator[tuple[Any, int]]:
    """Consecutive slices of `texts` holding about `limit` UTF-8 bytes each (at least one row)."""
    ends = np.cumsum(text_sizes(texts))
    start, done = 0, 0
    while start < len(texts):
        stop = max(start + 1, int(np.searchsorted(ends, done + limit, side="right")))
        yield texts.slice(start, stop - start), int(ends[stop - 1]) - done
        start, done = stop, int(ends[stop - 1])
