"""Phase 2 of the shard stage: exact, near and partial copies among the filtered documents."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.stages.shard_tasks import TaskOutput, task_path
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text.filters import make_filter
from corpus_assets.core.text.minhash import duplicate_of, jaccard
from corpus_assets.core.text.normalize import exact_key
from corpus_assets.core.text.partial import new_paragraphs

Mask = np.ndarray[Any, np.dtype[np.bool_]]
TEXT_CACHE_TASKS = 8


@dataclass(frozen=True)
class Dedup:
    """The outcome of phase 2, over the filtered documents in global order."""

    exact: Mask
    """Copies of an earlier document (compared as written: normalized, PII scrubbed): dropped."""
    near: Mask
    """Near copies of an earlier kept document: dropped."""
    partial: dict[int, str]
    """Partial copies (see `partial`), by row: kept with only these, their new paragraphs."""


def duplicates(
    cfg: LoadedConfig, outputs: list[TaskOutput], task_dir: Path, progress: Progress
) -> Dedup:
    """Exact copies, near copies and partial copies among the filtered documents."""
    total = sum(o.kept for o in outputs)
    out = Dedup(np.zeros(total, dtype=bool), np.zeros(total, dtype=bool), {})
    dedup = cfg.model.dedup
    if total == 0:
        return out
    keys = _concat(task_dir, outputs, ".keys.npy")
    if dedup.exact:
        out.exact[:] = exact_duplicates(keys)
    if not dedup.near:
        return out
    survivors = np.flatnonzero(~out.exact)
    sigs = _concat(task_dir, outputs, ".sigs.npy")[survivors]
    texts = _TextLookup(task_dir, outputs)

    def confirm(i: int, j: int) -> bool:
        progress.beat(f"near dedup: confirming candidate pairs (row {i:,} of {len(sigs):,})")
        a, b = texts.get(int(survivors[i])), texts.get(int(survivors[j]))
        return jaccard(a, b, dedup.ngram) >= dedup.threshold

    partner = duplicate_of(sigs, dedup, confirm if dedup.confirm else None)
    out.near[survivors[partner >= 0]] = True
    if dedup.partial:
        _cut_partial_copies(cfg, out, keys, survivors, partner, texts, progress)
    return out


def _cut_partial_copies(
    cfg: LoadedConfig,
    out: Dedup,
    keys: np.ndarray[Any, Any],
    survivors: np.ndarray[Any, Any],
    partner: np.ndarray[Any, Any],
    texts: _TextLookup,
    progress: Progress,
) -> None:
    """Move the near copies whose new paragraphs stand on their own from `near` to `partial`."""
    copies = np.flatnonzero(partner >= 0).tolist()
    if not copies:
        return
    keep_filter = make_filter(cfg.model.filters)
    kept_keys = _KeySet(keys[~(out.exact | out.near)])
    for j in copies:
        progress.beat(f"near dedup: cutting partial copies (row {j:,} of {len(partner):,})")
        row, kept_row = int(survivors[j]), int(survivors[partner[j]])
        rest = new_paragraphs(texts.get(kept_row), texts.get(row), cfg.model.dedup.ngram)
        if rest is None or keep_filter(rest) is not None:
            continue
        key = exact_key(rest)
        if key in kept_keys:
            continue
        kept_keys.add(key)
        out.near[row] = False
        out.partial[row] = rest


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


class _KeySet:
    """Membership of 128-bit exact keys: a sorted array of many, plus a set of a few added."""

    def __init__(self, keys: np.ndarray[Any, Any]) -> None:
        self.sorted = np.unique(np.ascontiguousarray(keys).view(np.dtype((np.void, 16))).ravel())
        self.added: set[bytes] = set()

    def __contains__(self, key: bytes) -> bool:
        probe = np.frombuffer(key, dtype=np.dtype((np.void, 16)))
        at = int(np.searchsorted(self.sorted, probe)[0])
        found = at < len(self.sorted) and self.sorted[at] == probe[0]
        return bool(found) or key in self.added

    def add(self, key: bytes) -> None:
        self.added.add(key)


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
