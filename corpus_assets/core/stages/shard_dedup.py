"""Phase 2 of the shard stage: exact, near and partial copies among the filtered documents."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from corpus_assets.core.config import DedupSpec, LoadedConfig
from corpus_assets.core.stages import shard_lsh
from corpus_assets.core.stages.ray_tasks import RaySession
from corpus_assets.core.stages.shard_lsh import (
    Index,
    Signatures,
    Texts,
    band_parts,
    group_band,
    load_groups,
    write_index,
)
from corpus_assets.core.stages.shard_tasks import TaskOutput, task_path
from corpus_assets.core.stages.split_ranges import SPLIT_ROWS, read_range, split_by_range
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text.filters import make_filter
from corpus_assets.core.text.minhash import (
    UNCHECKED,
    BandGroups,
    joined_groups,
    keep_first_exact,
)
from corpus_assets.core.text.normalize import exact_key
from corpus_assets.core.text.partial import has_paragraphs, new_paragraphs

Mask = np.ndarray[Any, np.dtype[np.bool_]]
_KEY = np.dtype((np.void, 16))  # a 128-bit exact key as one comparable value


@dataclass(frozen=True)
class Dedup:
    """The outcome of phase 2, over the filtered documents in global order."""

    exact: Mask
    """Copies of an earlier document (compared as written: normalized, PII scrubbed): dropped."""
    near: Mask
    """Near copies of an earlier kept document: dropped."""
    partial: dict[int, str]
    """Partial copies (see `partial`), by row: kept with only these, their new paragraphs."""
    near_unchecked: int = 0
    """Documents kept without being compared in a full LSH bucket (minhash.BUCKET_KEPT): the
    only ones near dedup did not compare with every kept document of their buckets."""


def duplicates(
    cfg: LoadedConfig,
    outputs: list[TaskOutput],
    task_dir: Path,
    progress: Progress,
    session: RaySession | None = None,
) -> Dedup:
    """Exact copies, near copies and partial copies among the filtered documents.

    The LSH bands are grouped here or, given a Ray session, as Ray tasks, one per band (their
    results are files in the index folder, read back in the same order).
    """
    total = sum(o.kept for o in outputs)
    out = Dedup(np.zeros(total, dtype=bool), np.zeros(total, dtype=bool), {})
    dedup = cfg.model.dedup
    if total == 0:
        return out
    if dedup.exact:
        out.exact[:] = exact_copies(task_dir, outputs, total)
    if not dedup.near:
        return out
    survivors = np.flatnonzero(~out.exact)
    index = write_index(task_dir, outputs, ~out.exact, dedup, task_dir / "lsh")
    groups = joined_groups(list(_grouped(index, session, progress)))  # the walk's: one array
    shared = np.zeros(index.rows, dtype=bool)
    for _, g in groups:
        shared[g.members] = True
    candidates = np.flatnonzero(shared)
    del shared
    sigs = Signatures(index)
    texts = Texts(index, task_dir, outputs, ~out.exact, candidates)
    try:
        partner = _walk(groups, index.rows, dedup, sigs, texts, progress)
        del groups
        out.near[survivors[partner >= 0]] = True
        if dedup.partial:
            kept_keys = partial(_task_keys, task_dir, outputs)
            _cut_partial_copies(cfg, out, kept_keys, survivors, partner, texts, progress)
    finally:
        sigs.close()
        texts.close()
    return replace(out, near_unchecked=int(np.count_nonzero(partner == UNCHECKED)))


def _grouped(
    index: Index, session: RaySession | None, progress: Progress
) -> Iterator[tuple[int, BandGroups]]:
    """(band, its shared buckets) for every hash range of every band, in order: grouped here,
    or as Ray tasks that write them to files read back here."""
    bands = range(index.spec.bands)
    if session is None:
        for band in bands:
            progress.beat(f"near dedup: grouping LSH band {band + 1} of {len(bands)}")
            yield from ((band, groups) for groups in band_parts(index, band))
        return
    progress.note(f"near dedup: grouping {len(bands)} LSH bands as Ray tasks")
    files: Iterable[list[Path]] = session.map(group_band, [(index, b) for b in bands])
    for band, paths in enumerate(files):
        yield from ((band, load_groups(path)) for path in paths)


def _walk(
    groups: list[tuple[int, BandGroups]],
    rows: int,
    dedup: DedupSpec,
    sigs: Signatures,
    texts: Texts,
    progress: Progress,
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """keep_first over the shared buckets, candidate pairs tested as minhash's verifier does
    (compiled: keep_first_exact), texts shingled from `texts` when `dedup.confirm`."""

    def beat(row: int) -> None:
        progress.beat(f"near dedup: confirming candidate pairs (row {row:,} of {rows:,})")

    source = texts.get_many if dedup.confirm else None
    cache = shard_lsh.SHINGLE_CACHE_BYTES  # looked up here: tests set it
    return keep_first_exact(groups, rows, sigs.sigs, dedup, source, cache, beat)


def _cut_partial_copies(
    cfg: LoadedConfig,
    out: Dedup,
    keys: Callable[[], Iterator[np.ndarray[Any, Any]]],
    survivors: np.ndarray[Any, Any],
    partner: np.ndarray[Any, Any],
    texts: Texts,
    progress: Progress,
) -> None:
    """Move the near copies whose new paragraphs stand on their own from `near` to `partial`."""
    copies = np.flatnonzero(partner >= 0).tolist()
    if not copies:
        return
    keep_filter = make_filter(cfg.model.filters)
    ngram = cfg.model.dedup.ngram
    cut: list[tuple[int, str, bytes]] = []
    for lo in range(0, len(copies), _COPIES_READ):
        batch = copies[lo : lo + _COPIES_READ]
        progress.beat(f"near dedup: cutting partial copies (row {batch[0]:,} of {len(partner):,})")
        for j, copy in zip(batch, texts.get_many(batch), strict=True):
            if has_paragraphs(copy):  # else one paragraph: nothing to cut
                cut += _cut(texts, j, int(partner[j]), copy, ngram, keep_filter)
    taken = _present(keys, ~(out.exact | out.near), {key for _, _, key in cut})
    for j, rest, key in cut:  # in row order: the first of two equal cuts is kept
        if key in taken:
            continue
        taken.add(key)
        row = int(survivors[j])
        out.near[row] = False
        out.partial[row] = rest


_COPIES_READ = 4096  # near copies read at a time to look for their new paragraphs


def _cut(
    texts: Texts, j: int, i: int, copy: str, ngram: int, keep_filter: Callable[[str], Any]
) -> list[tuple[int, str, bytes]]:
    """(j, its new paragraphs, their exact key) if near copy j of row i has new paragraphs
    that pass the filters on their own, else nothing."""
    rest = new_paragraphs(texts.get(i), copy, ngram, partial(texts.shingles, i))
    if rest is not None and keep_filter(rest) is None:
        return [(j, rest, exact_key(rest))]
    return []


def _present(
    keys: Callable[[], Iterator[np.ndarray[Any, Any]]], rows: Mask, wanted: set[bytes]
) -> set[bytes]:
    """The keys of `wanted` held by one of `rows`, reading the keys a task at a time."""
    if not wanted:
        return set()
    probe = np.sort(np.frombuffer(b"".join(wanted), dtype=_KEY))
    found: set[bytes] = set()
    start = 0
    for task_keys in keys():
        view = np.ascontiguousarray(task_keys).view(_KEY).ravel()
        part = view[rows[start : start + len(view)]]
        start += len(view)
        at = np.minimum(np.searchsorted(probe, part), len(probe) - 1)
        found.update(k.tobytes() for k in part[probe[at] == part])
    return found


def _task_keys(task_dir: Path, outputs: list[TaskOutput]) -> Iterator[np.ndarray[Any, Any]]:
    """The exact keys of the filtered documents, task after task (uint64 pairs)."""
    for o in outputs:
        yield np.load(task_path(task_dir, o.index, ".keys.npy"))


EXACT_RANGE_ROWS = 1 << 20
"""Over this many rows, exact copies are found a hash range of the keys at a time."""
_KEY_RECORD = np.dtype([("hi", "<u8"), ("lo", "<u8"), ("row", "<u8")])


def exact_copies(task_dir: Path, outputs: list[TaskOutput], total: int) -> Mask:
    """Rows that copy an earlier row's exact key. Over EXACT_RANGE_ROWS rows the keys are split
    by hash range into a file first (equal keys share a range; rows stay ascending in it), so
    only one range's keys are held and sorted at a time."""
    parts = -(-total // EXACT_RANGE_ROWS)
    if parts <= 1:
        return exact_duplicates(_concat(task_dir, outputs, ".keys.npy"))
    dup = np.zeros(total, dtype=bool)
    split = task_dir / f".exact-keys.split-{os.getpid()}"
    try:
        chunks = partial(_key_records, task_dir, outputs)
        ends = split_by_range(split, _KEY_RECORD, chunks, "hi", parts)
        for part in range(parts):
            records = read_range(split, _KEY_RECORD, ends, part)
            keys = np.stack([records["hi"], records["lo"]], axis=1)
            dup[records["row"][exact_duplicates(keys)]] = True
            del records, keys
    finally:
        split.unlink(missing_ok=True)
    return dup


def _key_records(task_dir: Path, outputs: list[TaskOutput]) -> Iterator[np.ndarray[Any, Any]]:
    """(hi, lo, row) of every filtered row's exact key, tasks joined into chunks of at least
    SPLIT_ROWS rows (a task holds about a thousand: too few to split on their own)."""
    pending: list[np.ndarray[Any, Any]] = []
    start = held = 0
    for o in outputs:
        keys = np.load(task_path(task_dir, o.index, ".keys.npy"))
        records = np.empty(len(keys), dtype=_KEY_RECORD)
        records["hi"], records["lo"] = keys[:, 0], keys[:, 1]
        records["row"] = np.arange(start, start + len(keys), dtype=np.uint64)
        start += len(keys)
        pending.append(records)
        held += len(keys)
        if held >= SPLIT_ROWS:
            yield np.concatenate(pending)
            pending, held = [], 0
    if pending:
        yield np.concatenate(pending)


def exact_duplicates(keys: np.ndarray[Any, Any]) -> Mask:
    """Rows whose 128-bit key appeared in an earlier row (keys: uint64 pairs, one row each).

    A stable sort by (high, low) word keeps equal keys in row order, so the first of each run
    is the earliest row: about 26 bytes a row besides the keys (np.unique held ~65).
    """
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    fresh = np.ones(len(order), dtype=bool)
    for word in (0, 1):
        ordered = keys[order, word]
        fresh[1:] &= ordered[1:] == ordered[:-1]
    fresh[1:] = ~fresh[1:]
    dup = np.ones(len(order), dtype=bool)
    dup[order[fresh]] = False
    return dup


def _concat(task_dir: Path, outputs: list[TaskOutput], suffix: str) -> np.ndarray[Any, Any]:
    arrays = [np.load(task_path(task_dir, o.index, suffix)) for o in outputs]
    return np.concatenate(arrays)
