"""Band-by-band near dedup (`band_groups` + `keep_first`) picks exactly the partners of the
in-memory algorithm it replaced (kept below verbatim as the reference), also when each band is
split into hash ranges grouped separately, when the rows are walked in windows, with or
without a `confirm` that rejects some pairs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.text import minhash
from corpus_assets.core.text.minhash import (
    _band_keys,
    _verifier,
    band_groups,
    band_keys,
    duplicate_of,
    keep_first,
)

# --- the reference: an in-memory duplicate_of over bucket ids, kept verbatim ------------------


def _old_bucket_ids(sigs: NDArray[np.uint32], spec: DedupSpec) -> NDArray[np.int64]:
    rows = spec.num_perm // spec.bands
    out = np.full((sigs.shape[0], spec.bands), -1, dtype=np.int64)
    next_id = 0
    for band in range(spec.bands):
        keys = _band_keys(sigs[:, band * rows : (band + 1) * rows])
        order = np.argsort(keys)
        ordered = keys[order]
        fresh = np.ones(len(ordered), dtype=bool)
        fresh[1:] = ordered[1:] != ordered[:-1]
        group = np.cumsum(fresh) - 1
        shared = np.bincount(group)[group] > 1
        ids = np.cumsum(fresh & shared) - 1 + next_id
        out[order[shared], band] = ids[shared]
        next_id = int(ids[shared].max(initial=next_id - 1)) + 1
    return out


def _old_kept_match(
    j: int, buckets: list[int], kept_in: dict[int, list[int]], verify: Callable[[int, int], bool]
) -> int:
    tried: set[int] = set()
    for bucket in buckets:
        for i in kept_in.get(bucket, ()):
            if i not in tried:
                tried.add(i)
                if verify(i, j):
                    return i
    return -1


def old_duplicate_of(
    sigs: NDArray[np.uint32], spec: DedupSpec, confirm: Callable[[int, int], bool] | None = None
) -> NDArray[np.int64]:
    buckets = _old_bucket_ids(sigs, spec)
    verify = _verifier(sigs, spec, confirm)
    partner = np.full(sigs.shape[0], -1, dtype=np.int64)
    kept_in: dict[int, list[int]] = {}
    involved = np.flatnonzero((buckets >= 0).any(axis=1))
    for j, row in zip(involved.tolist(), buckets[involved].tolist(), strict=True):
        mine = [bucket for bucket in row if bucket >= 0]
        found = _old_kept_match(j, mine, kept_in, verify)
        if found >= 0:
            partner[j] = found
        else:
            for bucket in mine:
                kept_in.setdefault(bucket, []).append(j)
    return partner


# --- inputs: signatures with clusters of near copies, chains and chance collisions -------------


def clustered(seed: int, n: int, num_perm: int) -> NDArray[np.uint32]:
    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, 2**32, size=(n, num_perm), dtype=np.uint64).astype(np.uint32)
    for j in range(1, n):
        if rng.random() < 0.45:  # a copy of an earlier row (maybe itself a copy): a chain
            i = int(rng.integers(0, j))
            sigs[j] = sigs[i]
            changed = rng.random(num_perm) < rng.uniform(0.02, 0.6)
            sigs[j, changed] = rng.integers(0, 2**32, size=int(changed.sum()), dtype=np.uint64)
    small = rng.random((n, num_perm)) < 0.05  # a small alphabet somewhere: chance collisions
    sigs[small] = rng.integers(0, 3, size=int(small.sum()))
    return sigs


def reject_some(seed: int) -> Callable[[int, int], bool]:
    return lambda i, j: (i * 7919 + j * 104729 + seed) % 5 != 0


SPECS = [
    DedupSpec(),
    DedupSpec(bands=30, threshold=0.7),
    DedupSpec(bands=40, threshold=0.5, num_perm=120),
    DedupSpec(num_perm=64, bands=16, threshold=0.9),
]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.num_perm}x{s.bands}@{s.threshold}")
def test_same_partners_as_the_in_memory_algorithm(seed: int, spec: DedupSpec) -> None:
    sigs = clustered(seed, 600, spec.num_perm)
    for confirm in (None, reject_some(seed), lambda i, j: True):
        expected = old_duplicate_of(sigs, spec, confirm)
        assert (expected >= 0).sum() > 0  # the input really has near copies
        assert duplicate_of(sigs, spec, confirm).tolist() == expected.tolist()


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_hash_ranges_grouped_apart_give_the_same_partners(parts: int) -> None:
    spec = DedupSpec(bands=30, threshold=0.7)
    sigs = clustered(11, 800, spec.num_perm)
    keys = band_keys(sigs, spec)
    rows = np.arange(len(sigs), dtype=np.int64)
    groups = []
    for part in reversed(range(parts)):  # any order of the ranges
        for band in range(spec.bands):
            mine = keys[band] % np.uint64(parts) == part
            groups.append((band, band_groups(keys[band][mine], rows[mine])))
    verify = _verifier(sigs, spec, reject_some(3))
    expected = old_duplicate_of(sigs, spec, reject_some(3))
    assert keep_first(groups, len(sigs), verify).tolist() == expected.tolist()


@pytest.mark.parametrize("window_rows", [1, 37, 256])
def test_rows_walked_in_windows_give_the_same_partners(
    window_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minhash, "_WINDOW_ROWS", window_rows)
    monkeypatch.setattr(minhash, "_WINDOWS", 10**6)
    spec = DedupSpec(bands=30, threshold=0.7)
    sigs = clustered(7, 800, spec.num_perm)
    keys = band_keys(sigs, spec)
    rows = np.arange(len(sigs), dtype=np.int64)
    groups = []
    for part in range(3):
        for band in range(spec.bands):
            mine = keys[band] % np.uint64(3) == part
            groups.append((band, band_groups(keys[band][mine], rows[mine])))
    windows = []
    real_entries = minhash._window_entries

    def entries(*args: object) -> list[NDArray[np.int64]]:
        windows.append(args[2:4])
        return real_entries(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(minhash, "_window_entries", entries)
    for confirm in (None, reject_some(5)):
        verify = _verifier(sigs, spec, confirm)
        expected = old_duplicate_of(sigs, spec, confirm)
        assert keep_first(groups, len(sigs), verify).tolist() == expected.tolist()
    assert len(windows) == 2 * -(-800 // window_rows)  # really walked in windows


def test_no_rows_and_no_shared_buckets() -> None:
    spec = DedupSpec()
    assert duplicate_of(np.zeros((0, 120), dtype=np.uint32), spec).shape == (0,)
    distinct = np.arange(5 * 120, dtype=np.uint32).reshape(5, 120)
    assert duplicate_of(distinct, spec).tolist() == [-1] * 5
    empty = band_groups(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))
    assert empty.starts.tolist() == [0] and empty.members.tolist() == []
