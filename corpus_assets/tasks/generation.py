"""Generating one batch: samples from the recipe, cleaned by the pool's workers, admitted to the
checkpoints chunk by chunk in pool order.

Without generation-shard hooks one producer runs `generate` and the pool cleans its chunks; with
them the pool generates and cleans whole shards into shard files (`shards.py`) that are imported
in shard order. Either way each chunk (`batch_size` samples, or a shard file's block of
`shards.BLOCK_ROWS`) commits with the batch's progress, so a resumed batch goes on after its
last committed chunk. Chunks that are ready while the
workers run ahead commit as a group (at most GROUP_COMMIT_S apart, and before the coordinator
waits for a worker, when it would be idle), so a fast recipe pays one fsync per group, not per
chunk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_assets.tasks.checkpoints import Block, Checkpoints
from corpus_assets.tasks.config import ExecutionSpec
from corpus_assets.tasks.job_control import JobCancelled
from corpus_assets.tasks.shards import ShardFile, checked_plan
from corpus_assets.tasks.types import GenerateContext, Recipe
from corpus_assets.tasks.window import ordered
from corpus_assets.tasks.workers import (
    Pool,
    ProduceOrder,
    Producer,
    RecipeSpec,
    ShardOrder,
    clean_chunk,
    shard_chunk,
)

GROUP_COMMIT_S = 0.25  # chunks admitted while the workers are ahead commit together this often


@dataclass
class BatchGeneration:
    """What generating a batch needs from its job; `serial` or `sharded` generates one."""

    ckpt: Checkpoints
    spec: RecipeSpec
    recipe: Recipe
    execution: ExecutionSpec
    max_candidates: int
    work: Path
    cancel: threading.Event
    context: Callable[[int], GenerateContext]
    chunk_done: Callable[[int], None]  # a chunk of the batch was committed
    caught_up: Callable[[int], None]  # the batch was committed to its end

    def serial(self, pool: Pool, batch: int, consumed: int) -> None:
        """Generate batch `batch`, cleaning and committing chunks after the first `consumed`."""
        before = self.ckpt.generated_total() - consumed
        order = ProduceOrder(
            self.spec,
            self.context(batch),
            self.execution.batch_size,
            skip=consumed,
            limit=max(self.max_candidates - before, 0),
        )
        producer = Producer(order, self.execution.backend, self.cancel)
        ends: list[tuple[Any, ...]] = []  # the producer's ('end', count, truncated)

        def chunks() -> Iterator[tuple[tuple[int, int], Future[Any]]]:
            for message in producer.messages():
                if message[0] == "error":
                    raise message[1]
                if message[0] == "end":
                    ends.append(message)
                    return
                _, start, payloads = message
                yield (start, len(payloads)), pool.submit(clean_chunk, payloads)

        try:
            with ordered(chunks(), 2 * self.execution.max_workers) as results:
                for (start, count), future in results:
                    if self.cancel.is_set():
                        break
                    self._commit_clean(batch, start, count, future)
            if self.cancel.is_set() or not ends:
                raise JobCancelled(f"cancelled during batch {batch}")
        finally:
            producer.close()
            self.ckpt.flush()  # what was admitted stays, whatever stopped the batch
        end = ends[0]
        self.ckpt.finish_batch(batch, end[1], end[2])
        self.caught_up(batch)

    def _commit_clean(self, batch: int, start: int, count: int, future: Future[Any]) -> None:
        self._waiting_for(future)
        self.ckpt.commit_chunk(batch, start + count, future.result(), durable=self._flush_due())
        self.chunk_done(batch)
        if self.cancel.is_set():
            raise JobCancelled(f"cancelled during batch {batch}")

    def sharded(self, pool: Pool, batch: int, consumed: int) -> None:
        """Generate batch `batch` as the recipe's shards, in parallel shard files, and import
        their rows in shard order after the first `consumed` (see `shards.py`)."""
        before = self.ckpt.generated_total() - consumed
        context = self.context(batch)
        shard_size = self.execution.shard_size
        plan, truncated = checked_plan(
            self.recipe.generation_shards(context, shard_size),  # type: ignore[attr-defined]
            shard_size,
            max(self.max_candidates - before, 0),
        )
        files = [ShardFile(self.work, batch, i, shard) for i, shard in enumerate(plan)]
        position = 0  # samples of this batch in the shards before the next one to import

        def shards() -> Iterator[tuple[ShardFile, Future[Any] | int]]:
            for file in files:
                rows = file.verified_rows()  # a shard file left by an earlier attempt is reused
                if rows is None:
                    yield file, pool.submit(shard_chunk, ShardOrder(context, file))
                else:
                    yield file, rows

        try:
            with ordered(shards(), 2 * self.execution.max_workers) as results:
                for file, job in results:
                    position = self._import_shard(batch, consumed, position, file, job)
        finally:
            self.ckpt.flush()  # what was admitted stays, whatever stopped the batch
        self.ckpt.finish_batch(batch, max(position, consumed), truncated)
        self.caught_up(batch)
        for file in files:
            file.remove()

    def _import_shard(
        self, batch: int, consumed: int, position: int, file: ShardFile, job: Future[Any] | int
    ) -> int:
        """Commit a shard's rows not yet committed, a block of the file (its workers' rows,
        ready to insert) at a time; the next position."""
        if isinstance(job, Future):
            self._waiting_for(job)
        rows: int = job if isinstance(job, int) else job.result()
        end = position + rows
        if end > consumed:
            done = max(consumed, position)
            for block in file.read(done - position):
                done += block.size
                self._commit_rows(batch, done, block)
        return end

    def _commit_rows(self, batch: int, consumed: int, block: Block) -> None:
        self.ckpt.commit_chunk(batch, consumed, block, durable=self._flush_due())
        self.chunk_done(batch)
        if self.cancel.is_set():
            raise JobCancelled(f"cancelled during batch {batch}")

    def _waiting_for(self, future: Future[Any]) -> None:
        """Before waiting for a worker, commit the chunks admitted so far: idle time is when
        their fsync costs nothing."""
        if not future.done():
            self.ckpt.flush()

    def _flush_due(self) -> bool:
        """Whether this chunk closes its group: at most GROUP_COMMIT_S after the last commit."""
        return time.monotonic() - self.ckpt.flushed_at >= GROUP_COMMIT_S
