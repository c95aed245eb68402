"""MinHash-LSH near dedup: shingling, signatures (golden, deterministic), keep rule, quality."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.text.minhash import (
    _shingle_parts,
    candidate_rows,
    confirm_floor,
    duplicate_of,
    estimate,
    jaccard,
    jaccard_of,
    near_duplicates,
    shingle_sets,
    shingles,
    signatures,
)

REPO = Path(__file__).resolve().parents[2]
PLAYS = REPO / "data" / "shakespeare" / "plays.jsonl"
MAKE_CORPUS = REPO / "bench" / "make_corpus.py"

SPEC = DedupSpec(ngram=5, num_perm=120, bands=20, threshold=0.7, seed=1)
FOX = "The quick brown fox jumps over the lazy dog."
ODD_TEXTS = [
    FOX,
    "",
    "hi",
    "!!! ... ???",
    "Ünïcödé wörds, “curly quotes” — and a dash\u00a0with nbsp; 東京 is one word",
    "a" * 40 + " " + "b" * 9 + " " + "c" * 16 + " " + "d" * 17 + " end of the long words",
    "tab\tseparated\nlines\r\nand   spaces " * 20,
    "nul\x00inside and a lone surrogate \ud800 here, still hashed",
]


def prose(seed: int, words: int = 400) -> str:
    """Deterministic English-like text: a shuffle of a small vocabulary."""
    rng = random.Random(seed)
    vocab = [*FOX.lower().rstrip(".").split(), "a", "cat", "sat", "on", "mat", "then", "ran"]
    return " ".join(rng.choice(vocab) + rng.choice(["", "", "", ",", "."]) for _ in range(words))


def near_copy(text: str, seed: int) -> str:
    """bench/make_corpus.py's edit: about 2% of words replaced, and a 'Reposted: ' header."""
    rng = random.Random(seed)
    words = text.split(" ")
    for i in rng.sample(range(len(words)), max(1, len(words) // 50)):
        words[i] = rng.choice(["the", "a", "very", "and", "then", "so"])
    return "Reposted: " + " ".join(words)


# Shingling and exact Jaccard.


@pytest.mark.parametrize(
    ("a", "b", "ngram", "expected"),
    [
        ("a b c d", "a b c e", 2, 2 / 4),
        ("a b c d", "a b c e", 1, 3 / 5),
        ("a b c d", "d c b a", 2, 0.0),
        ("a a a a", "a a", 2, 1.0),
        ("a b", "a b", 5, 1.0),  # shorter than ngram: one shingle of all words
        ("a b", "a c", 5, 0.0),
        ("", "", 5, 1.0),
        ("", "a b c d e", 5, 0.0),
        ("“Hello,” — World!  foo\nbar", "hello world foo bar", 2, 1.0),
    ],
)
def test_jaccard_hand_examples(a: str, b: str, ngram: int, expected: float) -> None:
    assert jaccard(a, b, ngram) == pytest.approx(expected)


def test_shingle_sets_of_a_batch_are_each_texts_own_set() -> None:
    texts = [*ODD_TEXTS, prose(1), prose(2, words=3), FOX.upper()]
    for text, batched in zip(texts, shingle_sets(texts, 5), strict=True):
        alone = np.unique(np.concatenate([h for h, _ in _shingle_parts([text], 5)]))
        assert batched.tolist() == alone.tolist() == shingles(text, 5).tolist()


def test_jaccard_of_counts_the_common_shingles_as_intersect1d_does() -> None:
    rng = np.random.default_rng(3)
    for size_a, size_b in [(1, 1), (1, 50), (50, 1), (40, 60), (300, 7)]:
        a = np.unique(rng.integers(0, 100, size_a, dtype=np.uint64))
        b = np.unique(rng.integers(0, 100, size_b, dtype=np.uint64))
        common = np.intersect1d(a, b, assume_unique=True).size
        assert jaccard_of(a, b) == jaccard_of(b, a) == common / (a.size + b.size - common)
    big = np.arange(2**63, 2**63 + 10, dtype=np.uint64)  # past the last element: no match
    assert jaccard_of(big[:3], big[5:]) == 0.0 and jaccard_of(big, big) == 1.0


def test_shingles_ignore_case_punctuation_and_spacing() -> None:
    assert np.array_equal(
        shingles("One, TWO; three... four!", 2), shingles("one two three four", 2)
    )
    assert shingles("one two three four", 2).size == 3
    assert np.array_equal(shingles("don’t stop", 1), shingles("don't stop", 1))  # don, t, stop


# Signatures.


def test_signature_golden_values() -> None:
    sigs = signatures([FOX, ""], SPEC)
    assert sigs.dtype == np.uint32
    assert sigs.shape == (2, 120)
    assert sigs[0, :6].tolist() == [
        837398745,
        423415272,
        507206801,
        514743470,
        1565608943,
        1149635082,
    ]
    assert sigs[1, :4].tolist() == [427384083, 3318197655, 3053705415, 2560566201]
    unicode_and_long_words = signatures(ODD_TEXTS[4:6], SPEC)[:, :4].tolist()
    assert unicode_and_long_words == [
        [2097422148, 180225948, 823977853, 1640500797],
        [373508205, 1519896106, 1237153446, 398848156],
    ]


def test_signatures_do_not_depend_on_the_batch() -> None:
    together = signatures(ODD_TEXTS, SPEC)
    one_by_one = np.concatenate([signatures([t], SPEC) for t in ODD_TEXTS])
    reversed_batch = signatures(ODD_TEXTS[::-1], SPEC)[::-1]
    assert np.array_equal(together, one_by_one)
    assert np.array_equal(together, reversed_batch)
    assert np.array_equal(together[1], together[3])  # no words: both are the empty shingle
    assert len({row.tobytes() for row in together}) == len(ODD_TEXTS) - 1


def test_signatures_of_empty_batch_and_seed() -> None:
    assert signatures([], SPEC).shape == (0, 120)
    other_seed = signatures([FOX], SPEC.model_copy(update={"seed": 2}))
    assert not np.array_equal(signatures([FOX], SPEC), other_seed)


def test_signatures_same_in_fresh_processes() -> None:
    code = (
        "import json, sys\n"
        "from corpus_assets.core.config import DedupSpec\n"
        "from corpus_assets.core.text.minhash import signatures\n"
        "texts = json.loads(sys.stdin.read())\n"
        "spec = DedupSpec(ngram=5, num_perm=120, bands=20, threshold=0.7, seed=1)\n"
        "print(json.dumps(signatures(texts, spec).tolist()))\n"
    )
    texts = [t for t in ODD_TEXTS if "\ud800" not in t]  # JSON on stdin must be valid UTF-8
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1] == signatures(texts, SPEC).tolist()


def test_estimate_tracks_exact_jaccard() -> None:
    base = prose(1, 2000)
    pairs = [(base, near_copy(base, s)) for s in range(5)] + [(base, prose(2, 2000))]
    for a, b in pairs:
        sigs = signatures([a, b], SPEC)
        assert abs(estimate(sigs, 0, 1) - jaccard(a, b, 5)) < 0.15


# Phase 2: candidates, verification and the keep rule.


def test_near_copy_flagged_and_first_occurrence_kept() -> None:
    original, other = prose(1), prose(2)
    copy = near_copy(original, 7)
    assert 0.7 < jaccard(original, copy, 5) < 0.95
    texts = [other, original, prose(3), copy]
    assert near_duplicates(signatures(texts, SPEC), SPEC).tolist() == [False, False, False, True]
    assert duplicate_of(signatures(texts, SPEC), SPEC).tolist() == [-1, -1, -1, 1]
    swapped = [copy, other, original]
    assert near_duplicates(signatures(swapped, SPEC), SPEC).tolist() == [False, False, True]


def test_identical_input_gives_identical_output() -> None:
    texts = [prose(i % 7) if i % 3 else near_copy(prose(i % 7), i) for i in range(60)]
    sigs = signatures(texts, SPEC)
    first = duplicate_of(sigs, SPEC)
    assert first.tolist() == duplicate_of(sigs.copy(), SPEC).tolist()
    assert (first >= 0).sum() > 30


def test_hamlet_editions_are_not_near_duplicates() -> None:
    plays = [json.loads(line) for line in PLAYS.read_text(encoding="utf-8").splitlines()]
    hamlets = {p["edition"]: p["text"] for p in plays if p["title"] == "Hamlet"}
    assert set(hamlets) == {"gutenberg", "first_folio"}
    texts = [hamlets["first_folio"], hamlets["gutenberg"]]
    assert jaccard(texts[0], texts[1], 5) < 0.3
    sigs = signatures(texts, SPEC)
    assert not near_duplicates(sigs, SPEC).any()
    assert not near_duplicates(sigs, SPEC, confirm=lambda i, j: True).any()  # not candidates


def _chain() -> np.ndarray:
    """Rows A, B, C: B differs from A in bands 0-1, C from B in bands 2-3 (so C is 0.8 from A)."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, 120, dtype=np.uint32)
    b, c = a.copy(), a.copy()
    b[:12] = rng.integers(0, 2**32, 12, dtype=np.uint32)
    c[:12] = b[:12]
    c[12:24] = rng.integers(0, 2**32, 12, dtype=np.uint32)
    return np.stack([a, b, c])


def test_rows_are_compared_only_with_kept_rows() -> None:
    sigs = _chain()
    assert (estimate(sigs, 0, 1), estimate(sigs, 1, 2), estimate(sigs, 0, 2)) == (0.9, 0.9, 0.8)
    spec = SPEC.model_copy(update={"threshold": 0.85})
    # B is dropped as a copy of A; C resembles only the dropped B, so it is kept (no chaining).
    assert duplicate_of(sigs, spec).tolist() == [-1, 0, -1]


def test_confirm_decides_and_can_reject() -> None:
    text = prose(4)
    sigs = signatures([text, text, prose(5)], SPEC)
    calls: list[tuple[int, int]] = []

    def reject(i: int, j: int) -> bool:
        calls.append((i, j))
        return False

    assert near_duplicates(sigs, SPEC).tolist() == [False, True, False]
    assert near_duplicates(sigs, SPEC, confirm=reject).tolist() == [False, False, False]
    assert calls == [(0, 1)]
    assert near_duplicates(sigs, SPEC, confirm=lambda i, j: True).tolist() == [False, True, False]
    assert candidate_rows(sigs, SPEC).tolist() == [0, 1]


def test_confirm_not_called_far_below_threshold() -> None:
    sigs = _chain()[[0, 0]]
    sigs[1, 6:] = np.arange(114, dtype=np.uint32)  # shares only band 0 with row 0: estimate 0.05
    assert confirm_floor(SPEC) == pytest.approx(0.7 - 6 * (0.21 / 120) ** 0.5)
    calls: list[tuple[int, int]] = []

    def record(i: int, j: int) -> bool:
        calls.append((i, j))
        return True

    assert not near_duplicates(sigs, SPEC, confirm=record).any()
    assert calls == []
    low = SPEC.model_copy(update={"threshold": 0.05})  # a floor below 0: the candidate is asked
    assert near_duplicates(sigs, low, confirm=record).tolist() == [False, True]
    assert calls == [(0, 1)]


def test_bad_signatures_and_band_split_rejected() -> None:
    with pytest.raises(ConfigError, match="num_perm = 120"):
        near_duplicates(np.zeros((3, 64), dtype=np.uint32), SPEC)
    with pytest.raises(ConfigError, match="uint32"):
        near_duplicates(np.zeros((3, 120), dtype=np.uint64), SPEC)
    with pytest.raises(
        ValidationError, match="bands = 7 must divide num_perm = 120; allowed: 1, 2"
    ):
        DedupSpec(num_perm=120, bands=7)
    assert near_duplicates(np.zeros((0, 120), dtype=np.uint32), SPEC).shape == (0,)


# Quality on a generated corpus.


def test_quality_on_small_benchmark_corpus(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    subprocess.run(
        [sys.executable, str(MAKE_CORPUS), "--out", str(out), "--mb", "2"],
        check=True,
        capture_output=True,
    )
    truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    skip = set(truth["exact"]) | set(truth["junk"])  # what filters and exact dedup remove first
    lines = [ln for p in sorted(out.glob("part-*.jsonl")) for ln in p.read_text().splitlines()]
    docs = [json.loads(line) for line in lines]
    docs = [d for d in docs if d["id"] not in skip]
    ids, texts = [d["id"] for d in docs], [d["text"] for d in docs]
    sigs = np.concatenate([signatures(texts[i : i + 100], SPEC) for i in range(0, len(texts), 100)])

    def exact(i: int, j: int) -> bool:
        return jaccard(texts[i], texts[j], SPEC.ngram) >= SPEC.threshold

    near = set(truth["near"]) | set(truth["partial"])  # a partial copy is a near copy whole
    assert len(truth["near"]) >= 20 and len(truth["partial"]) >= 3
    for confirm in (None, exact):
        flagged = {ids[i] for i in np.flatnonzero(near_duplicates(sigs, SPEC, confirm))}
        assert len(flagged & near) / len(near) >= 0.95
        assert len(flagged - near) / (len(ids) - len(near)) <= 0.005
