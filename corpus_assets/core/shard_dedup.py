"""Phase 2 of the shard stage: exact then near dedup over all filtered documents, in task order."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.minhash import jaccard, near_duplicates
from corpus_assets.core.progress import Progress
from corpus_assets.core.shard_tasks import TaskOutput, task_path

Mask = np.ndarray[Any, np.dtype[np.bool_]]
TEXT_CACHE_TASKS = 8


def duplicates(
    cfg: LoadedConfig, outputs: list[TaskOutput], task_dir: Path, progress: Progress
) -> tuple[Mask, Mask]:
    """Masks over the filtered documents (global order): exact copies, near copies."""
    total = sum(o.kept for o in outputs)
    exact = np.zeros(total, dtype=bool)
    near = np.zeros(total, dtype=bool)
    dedup = cfg.model.dedup
    if total == 0:
        return exact, near
    if dedup.exact:
        exact = exact_duplicates(_concat(task_dir, outputs, ".keys.npy"))
    if dedup.near:
        survivors = np.flatnonzero(~exact)
        sigs = _concat(task_dir, outputs, ".sigs.npy")[survivors]
        texts = _TextLookup(task_dir, outputs)
        ngram = dedup.ngram

        def confirm(i: int, j: int) -> bool:
            progress.beat(f"near dedup: confirming candidate pairs (row {i:,} of {len(sigs):,})")
            a, b = texts.get(int(survivors[i])), texts.get(int(survivors[j]))
            return jaccard(a, b, ngram) >= dedup.threshold

        flags = near_duplicates(sigs, dedup, confirm if dedup.confirm else None)
        near[survivors[flags]] = True
    return exact, near


def exact_duplicates(keys: np.ndarray[Any, Any]) -> Mask:
    """Rows whose 128-bit key appeared in an earlier row."""
    view = np.ascontiguousarray(keys).view(np.dtype((np.void, 16))).ravel()
    _, first = np.unique(view, return_index=True)
    dup = np.ones(len(view), dtype=bool)
    dup[first] = False
    return dup


def _concat(task_dir: Path, outputs: list[TaskOutput], suffix: str) -> np.ndarray[Any, Any]:
    arrays = [np.load(task_path(task_dir, o.index, suffix)) for o in outputs]
    return np.concatenate(arrays)


class _TextLookup:
    """Texts of filtered documents by global index, a few task files cached at a time."""

    def __init__(self, task_dir: Path, outputs: list[TaskOutput]) -> None:
        self.task_dir = task_dir
        self.indexes = [o.index for o in outputs]
        self.starts = np.cumsum([0] + [o.kept for o in outputs])
        self.cache: OrderedDict[int, list[str]] = OrderedDict()

    def get(self, global_row: int) -> str:
        pos = int(np.searchsorted(self.starts, global_row, side="right")) - 1
        task = self.indexes[pos]
        if task not in self.cache:
            path = task_path(self.task_dir, task, ".parquet")
            self.cache[task] = pq.read_table(path, columns=["text"]).column("text").to_pylist()
            if len(self.cache) > TEXT_CACHE_TASKS:
                self.cache.popitem(last=False)
        self.cache.move_to_end(task)
        return self.cache[task][global_row - int(self.starts[pos])]
