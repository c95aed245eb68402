"""The walk of `keep_first_exact` (compiled, plain Python, or the one then the other) picks
exactly the partners of `keep_first` with the shard stage's test of a pair (exact Jaccard and
the estimate's floor, or the estimate alone): on templates with near copies and re-posts, with
a shingle buffer so small it is emptied again and again, in windows, paused and resumed, with
few slots for large buckets, with the groups' members joined in one array or apart."""

from __future__ import annotations

import random

import numpy as np
import pytest

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.text import minhash
from corpus_assets.core.text.minhash import (
    UNCHECKED,
    BandGroups,
    band_groups,
    band_keys,
    confirm_floor,
    estimate,
    jaccard_of,
    joined_groups,
    keep_first,
    keep_first_exact,
    shingle_sets,
    signatures,
)

SPEC = DedupSpec()
STORY = "Story {i}: Once upon a time there was a little girl named Lily who loved to play outside."
REVIEW = (
    "{name} from {city} gave this blender {stars} stars and wrote that the delivery was quick, "
    "the box arrived undamaged and the blades still work well after a month. Review {i}."
)
NAMES = ("Anna", "Ben", "Chloe", "David", "Emma", "Felix")
CITIES = ("Leeds", "Lyon", "Porto", "Graz", "Turin", "Ghent", "Bergen")


def templated(n: int, seed: int = 3) -> list[str]:
    """Stories, reviews (many of them near copies of each other) and 3% re-posts in capitals."""
    rng = random.Random(seed)
    texts: list[str] = []
    for i in range(n):
        if i > 50 and rng.random() < 0.03:
            texts.append(texts[rng.randrange(i)].upper())
        elif rng.random() < 0.5:
            texts.append(STORY.format(i=i))
        else:
            slots = {"name": rng.choice(NAMES), "city": rng.choice(CITIES), "stars": i % 5}
            texts.append(REVIEW.format(i=i, **slots))
    return texts


def groups_of(sigs: np.ndarray, spec: DedupSpec) -> list[tuple[int, BandGroups]]:
    keys = band_keys(sigs, spec)
    rows = np.arange(len(sigs), dtype=np.int64)
    return [(band, band_groups(keys[band], rows)) for band in range(spec.bands)]


def reference(texts: list[str], sigs: np.ndarray, spec: DedupSpec) -> np.ndarray:
    """keep_first with the shard stage's verifier as it was before it was compiled."""
    sets = shingle_sets(texts, spec.ngram)
    floor = confirm_floor(spec)

    def verify(i: int, j: int) -> bool:
        if not spec.confirm:
            return estimate(sigs, i, j) >= spec.threshold
        exact = jaccard_of(sets[i], sets[j]) >= spec.threshold
        return exact and estimate(sigs, i, j) >= floor

    return keep_first(groups_of(sigs, spec), len(texts), verify)


def compiled(texts: list[str], sigs: np.ndarray, spec: DedupSpec, cache_bytes: int) -> np.ndarray:
    asked: list[int] = []

    def read(rows: list[int]) -> list[str]:
        asked.extend(rows)
        return [texts[r] for r in rows]

    source = read if spec.confirm else None
    out = keep_first_exact(groups_of(sigs, spec), len(texts), sigs, spec, source, cache_bytes)
    assert bool(asked) == spec.confirm
    return out


# the walk as plain Python throughout, compiled throughout, Python then compiled
WALKS = {"python": (10**9, 1e9), "compiled": (0, 1e9), "both": (10**9, 0.0)}


@pytest.mark.parametrize("walk", list(WALKS))
@pytest.mark.parametrize("confirm", [True, False])
@pytest.mark.parametrize("cache_bytes", [64 << 20, 600])
def test_the_compiled_walk_picks_the_partners_of_keep_first(
    confirm: bool, cache_bytes: int, walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries, seconds = WALKS[walk]
    monkeypatch.setattr(minhash, "PYTHON_WALK_ENTRIES", entries)
    monkeypatch.setattr(minhash, "PYTHON_WALK_S", seconds)
    monkeypatch.setattr(minhash, "_PYTHON_STEP", 61)  # "both": compiled from the 2nd step on
    spec = DedupSpec(confirm=confirm)
    texts = templated(3000)
    sigs = signatures(texts, spec)
    expected = reference(texts, sigs, spec)
    assert (expected >= 0).sum() > 300 and (expected == UNCHECKED).sum() > 300
    assert compiled(texts, sigs, spec, cache_bytes).tolist() == expected.tolist()


@pytest.mark.parametrize("walk", list(WALKS))
def test_paused_in_windows_with_few_slots_it_picks_the_same(
    walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries, seconds = WALKS[walk]
    monkeypatch.setattr(minhash, "PYTHON_WALK_ENTRIES", entries)
    monkeypatch.setattr(minhash, "PYTHON_WALK_S", seconds)
    monkeypatch.setattr(minhash, "_PYTHON_STEP", 61)
    texts = templated(2500, seed=8)
    sigs = signatures(texts, SPEC)
    sigs.setflags(write=False)  # as the shard stage maps them
    expected = reference(texts, sigs, SPEC)
    monkeypatch.setattr(minhash, "_WINDOW_ROWS", 333)
    monkeypatch.setattr(minhash, "_WINDOWS", 10**6)
    monkeypatch.setattr(minhash, "_PAUSE_ENTRIES", 97)
    monkeypatch.setattr(minhash, "_ENTRIES", 50)
    monkeypatch.setattr(minhash, "_LARGE_SLOTS", 1)
    beats: list[int] = []
    groups = joined_groups(groups_of(sigs, SPEC))

    def read(rows: list[int]) -> list[str]:
        return [texts[r] for r in rows]

    got = keep_first_exact(groups, len(texts), sigs, SPEC, read, 5000, beats.append)
    assert got.tolist() == expected.tolist()
    assert len(beats) > 20 and beats == sorted(beats)


def test_no_groups_and_groups_of_one_bucket() -> None:
    sigs = signatures(["a b c d e f"] * 3, SPEC)
    assert keep_first_exact([], 3, sigs, SPEC, None, 1 << 20).tolist() == [-1, -1, -1]
    one = [(0, band_groups(np.zeros(3, dtype=np.uint64), np.arange(3, dtype=np.int64)))]
    texts = ["a b c d e f", "A B C D E F", "q r s t u v"]
    sigs = signatures(texts, SPEC)
    got = keep_first_exact(one, 3, sigs, SPEC, lambda rows: [texts[r] for r in rows], 1 << 20)
    assert got.tolist() == [-1, 0, -1]
