"""Near dedup on templated documents: a bucket that holds BUCKET_KEPT kept rows is full and not
searched, so a row costs a bounded number of verifications (comparing every row with every
kept row of its buckets, a corpus of templates is quadratic); the rows kept with a full bucket
skipped are marked UNCHECKED and counted in the shard manifest; a real copy among the
templates is still found."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.stages.run import run_stage
from corpus_assets.core.text import minhash
from corpus_assets.core.text.minhash import (
    BUCKET_KEPT,
    UNCHECKED,
    BandGroups,
    band_groups,
    band_keys,
    confirm_floor,
    duplicate_of,
    jaccard,
    jaccard_of,
    keep_first,
    shingle_sets,
    signatures,
)

SPEC = DedupSpec()
STORY = "Story {i}: Once upon a time there was a little girl named Lily who loved to play outside."


def stories(n: int) -> list[str]:
    return [STORY.format(i=i) for i in range(n)]


def groups_of(sigs: np.ndarray, spec: DedupSpec) -> list[tuple[int, BandGroups]]:
    keys = band_keys(sigs, spec)
    rows = np.arange(len(sigs), dtype=np.int64)
    return [(band, band_groups(keys[band], rows)) for band in range(spec.bands)]


def test_templated_rows_cost_a_bounded_number_of_verifications() -> None:
    texts = stories(2000)
    # every pair is below the threshold, yet above the estimate's floor: each needs a verify
    assert confirm_floor(SPEC) < jaccard(texts[0], texts[1], SPEC.ngram) == 0.75 < SPEC.threshold
    sets = shingle_sets(texts, SPEC.ngram)
    calls: Counter[int] = Counter()

    def verify(i: int, j: int) -> bool:
        calls[j] += 1
        return jaccard_of(sets[i], sets[j]) >= SPEC.threshold

    partner = keep_first(groups_of(signatures(texts, SPEC), SPEC), len(texts), verify)
    assert not (partner >= 0).any()
    assert max(calls.values()) <= SPEC.bands * (BUCKET_KEPT - 1)  # the bound, per row
    assert sum(calls.values()) < len(texts)  # all rows compared with all: ~1.8 million calls
    assert (partner == UNCHECKED).sum() > 0.9 * len(texts)


def test_a_full_bucket_is_not_searched_and_its_rows_are_marked() -> None:
    n = BUCKET_KEPT + 9
    rows = np.arange(n, dtype=np.int64)
    one_bucket = band_groups(np.zeros(n, dtype=np.uint64), rows)
    pair = np.arange(n, dtype=np.uint64)
    pair[-1] = 3  # in band 1 the last row shares a bucket with row 3 only
    asked: list[tuple[int, int]] = []

    def verify(i: int, j: int) -> bool:
        asked.append((i, j))
        return (i, j) == (3, n - 1)

    partner = keep_first([(0, one_bucket), (1, band_groups(pair, rows))], n, verify)
    # rows 0..15 are kept, each compared with every earlier one; then the bucket is full
    assert asked == [(i, j) for j in range(BUCKET_KEPT) for i in range(j)] + [(3, n - 1)]
    assert partner.tolist() == [-1] * BUCKET_KEPT + [UNCHECKED] * 8 + [3]


def test_dropped_rows_do_not_fill_a_bucket() -> None:
    n = 3 * BUCKET_KEPT
    one_bucket = band_groups(np.zeros(n, dtype=np.uint64), np.arange(n, dtype=np.int64))
    asked: list[tuple[int, int]] = []

    def copy_of_row_0(i: int, j: int) -> bool:
        asked.append((i, j))
        return i == 0

    partner = keep_first([(0, one_bucket)], n, copy_of_row_0)
    assert partner.tolist() == [-1] + [0] * (n - 1)
    assert asked == [(0, j) for j in range(1, n)]


@pytest.mark.parametrize("window_rows", [97, 1000])
def test_full_buckets_are_the_same_when_walked_in_windows(
    window_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = stories(1500)
    groups = groups_of(signatures(texts, SPEC), SPEC)
    sets = shingle_sets(texts, SPEC.ngram)

    def verify(i: int, j: int) -> bool:
        return jaccard_of(sets[i], sets[j]) >= SPEC.threshold

    whole = keep_first(groups, len(texts), verify)
    monkeypatch.setattr(minhash, "_WINDOW_ROWS", window_rows)
    monkeypatch.setattr(minhash, "_WINDOWS", 10**6)
    assert keep_first(groups, len(texts), verify).tolist() == whole.tolist()
    assert (whole == UNCHECKED).sum() > 1300


def test_a_repost_among_templates_is_still_found() -> None:
    texts = stories(2000)
    texts.append(texts[7].upper())  # the same shingles, not the same bytes

    def exact(i: int, j: int) -> bool:
        return jaccard(texts[i], texts[j], SPEC.ngram) >= SPEC.threshold

    partner = duplicate_of(signatures(texts, SPEC), SPEC, exact)
    assert partner[-1] == 7
    assert (partner >= 0).sum() == 1 and (partner == UNCHECKED).sum() > 1800


def test_the_shard_manifest_counts_the_unchecked_documents(tmp_path: Path) -> None:
    texts = stories(400)
    texts.append(texts[7].upper())
    source = tmp_path / "stories.jsonl"
    lines = [json.dumps({"id": f"s{k:04d}", "text": t}) for k, t in enumerate(texts)]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
        f'[[sources]]\nname = "s"\nkind = "jsonl"\npath = "{source}"\n'
        'id_field = "id"\nlicense = "cc0-1.0"\n',
        encoding="utf-8",
    )
    root = tmp_path / "root"
    run_stage("fetch", cfg, root)
    summary = run_stage("shard", cfg, root, workers=1)
    manifest = json.loads((root / summary["manifest"]).read_text(encoding="utf-8"))

    def exact(i: int, j: int) -> bool:
        return jaccard(texts[i], texts[j], SPEC.ngram) >= SPEC.threshold

    partner = duplicate_of(signatures(texts, SPEC), SPEC, exact)
    assert manifest["duplicates"] == {"exact": 0, "near": 1}
    assert manifest["near_unchecked"] == int((partner == UNCHECKED).sum()) > 300
    assert manifest["documents_out"] == 400
