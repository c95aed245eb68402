"""MinHash-LSH near-duplicate detection over word n-grams (the near dedup of the shard stage).

Use
    Phase 1, in the workers: `signatures(texts, spec)` for each batch of (normalized) texts;
    save the uint32 arrays. Phase 2, in one process: concatenate every batch's signatures in
    the corpus's global order and call `near_duplicates(sigs, spec, confirm)` (or
    `duplicate_of` for the kept row each dropped one matched). With `spec.confirm`, pass
    `confirm=lambda i, j: jaccard(text(i), text(j), spec.ngram) >= spec.threshold`, where
    `text(k)` re-reads row k; `candidate_rows` lists the rows it can be asked about, so their
    texts can be fetched in one sequential pass. Phase 2 band by band: `band_keys` of the
    signatures, `band_groups` of each band's keys (or of each hash range of them, independently,
    anywhere), then `keep_first` over all the groups; the shard stage keeps the keys and
    signatures on disk (stages/shard_lsh.py), holds only the shared buckets and calls
    `keep_first_exact`: the same walk compiled (numba) with the test below built in, given
    a function that reads texts (it shingles them a batch at a time, in a bounded buffer).

Shingles
    A text is lowercased (`str.lower`) and UTF-8 encoded. A *word* is a maximal run of ASCII
    letters and digits and of non-ASCII characters other than the Latin-1 symbols
    (U+0080-U+00BF), General Punctuation (U+2000-U+207F) and CJK punctuation (U+3000-U+303F);
    everything else (spaces, ASCII punctuation, curly quotes, dashes) separates words. So case,
    punctuation and spacing do not matter, and callers may pass text that is not
    whitespace-collapsed; they should pass NFC text (the shard stage's `normalize`), or the same
    letter in two forms counts as two words. Each word gets a 64-bit hash (its 8-byte blocks
    times fixed pseudo-random weights, finalized by splitmix64), `ngram` consecutive word hashes
    are combined by an order-sensitive linear form, and the shingle is the top 32 bits of that
    (the seed does not enter here, so `jaccard` does not depend on it). A text with fewer
    than `ngram` words has one shingle made of all its words (the empty text: of none), so every
    text has a well-defined signature.

Signature
    `num_perm` hash functions h_i(x) = a_i * (x + c_i) mod 2^32, with odd a_i and c_i derived
    from `seed` by splitmix64; signature[i] = min over the text's shingles of h_i. Every step is
    numpy integer arithmetic on a whole batch at once (no Python `hash()`, no per-word Python
    objects), so a text's signature is the same in any process, on any machine, and in any batch.
    Signatures are `uint32`, shape (n, num_perm).

Candidates (LSH)
    The signature is cut into `bands` bands of `num_perm / bands` rows; each band of each row is
    hashed to a 64-bit bucket key, and two rows sharing a bucket in any band are candidates. The
    probability for a pair of Jaccard J is 1 - (1 - J^r)^b; the defaults (120 = 20 x 6) put the
    S-curve's midpoint near 0.6: a 0.75 pair becomes a candidate with p ~ 0.98, a 0.8 pair with
    p ~ 0.998, a 0.3 pair with p ~ 0.015.

Verification
    A candidate pair is a near duplicate when its Jaccard is >= `threshold`: by default estimated
    from the signatures (the fraction of equal minhash values); with a `confirm(i, j)` callback
    (used when `DedupSpec.confirm` is set) the callback decides, typically as
    `jaccard(text_i, text_j, spec.ngram) >= spec.threshold` on the re-read texts. Candidates whose
    estimate lies more than six standard errors below the threshold are rejected without a call.
    `keep_first_exact` decides as that: exact Jaccard of the shingle sets >= threshold and the
    estimate no more than six standard errors below it (or, without `confirm`, the estimate).

Which rows are dropped
    Rows are taken in the caller's global order. A row is dropped when it is a verified near
    duplicate of an earlier row that was KEPT; rows already dropped are not compared against.
    So every dropped row has a kept row within the threshold (its reason for being dropped stays
    in the output), no two kept rows are verified near duplicates of each other, and there is
    no chaining: in A, B, C where B is an edit of A and C an edit of B but C is far from A, only B
    is dropped (keep-first over connected candidate clusters would also drop C, a document that
    nothing in the output resembles). It also bounds the work: a row is verified only against the
    few kept rows of its buckets, never against a cluster's dropped copies.

Full buckets
    A bucket that already holds `BUCKET_KEPT` kept rows is *full*: later rows are not compared
    in it. Its kept rows share a band yet are no near duplicates of one another, which is what
    a template does ("Story 17: <the same sentence>", 10,000 times at Jaccard 0.75): the band
    value is boilerplate, and comparing every new row with every kept row would make the walk
    quadratic. So a row costs at most `bands x (BUCKET_KEPT - 1)` verifications, and a document
    of a corpus of templates about what any other does. A near copy is still found through a
    bucket that is not full (its own text's band values, which boilerplate rows do not share);
    one whose only buckets shared with a kept match are full is kept. Every row kept with a full
    bucket skipped is marked UNCHECKED rather than -1, so the skips can be counted. On the
    benchmark corpus (4 and 20 MB) a row meets at most 1 kept row in a bucket with the default
    bands, 8 with 40 bands at 0.5: nothing there is skipped.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import xxhash
from numpy.typing import NDArray

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.errors import ConfigError

U32 = NDArray[np.uint32]
U64 = NDArray[np.uint64]

_CHUNK = 8192  # shingles per (num_perm x chunk) block: stays within a core's L2 cache
_ENTRIES = 1 << 13  # (row, bucket) entries of keep_first turned into Python ints at a time
_WINDOW_ROWS = 1 << 22  # keep_first walks at least this many rows at a time...
_WINDOWS = 32  # ...and at most this many windows (each scans every shared bucket's members)
_SIGMAS = 6.0  # confirm is skipped for estimates this many standard errors below threshold

BUCKET_KEPT = 16
"""A bucket with this many kept rows is full: later rows are not compared in it."""
UNCHECKED = -2
"""The partner of a row kept without being compared in one of its full buckets."""

# Word bytes: ASCII letters and digits, and every byte of a non-ASCII character (see below).
_WORD_BYTE = np.zeros(256, dtype=bool)
for _lo, _hi in ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), (0x80, 0xFF)):
    _WORD_BYTE[_lo : _hi + 1] = True
# Non-ASCII punctuation and spaces: (lead byte, second byte range, character length in bytes).
_PUNCT_SEQUENCES = ((0xC2, 0x80, 0xBF, 2), (0xE2, 0x80, 0x81, 3), (0xE3, 0x80, 0x80, 3))
# The low k bytes of a uint64, for k = 0..8.
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)


def signatures(texts: Sequence[str], spec: DedupSpec) -> U32:
    """MinHash signatures of a batch of texts: uint32, shape (len(texts), num_perm)."""
    a, b = _permutations(spec)
    out = np.full((spec.num_perm, len(texts)), np.iinfo(np.uint32).max, dtype=np.uint32)
    for hashes, owner in _shingle_parts(texts, spec.ngram):
        _min_into(out, (hashes >> np.uint64(32)).astype(np.uint32), owner, a, b)
    return np.ascontiguousarray(out.T)


def shingles(text: str, ngram: int) -> U64:
    """The sorted distinct 64-bit shingle hashes of one text (the set its signature samples)."""
    return shingle_sets([text], ngram)[0]


def shingle_sets(texts: Sequence[str], ngram: int) -> list[U64]:
    """`shingles` of each text of a batch, in one pass (a text costs ~6 us in a batch of 64
    short ones, ~65 us alone); the arrays are views of one buffer."""
    hashes, cuts = _shingle_flat(texts, ngram)
    return [hashes[a:b] for a, b in pairwise(cuts.tolist())]  # np.split costs ~3 us a piece


def _shingle_flat(texts: Sequence[str], ngram: int) -> tuple[U64, NDArray[np.intp]]:
    """`shingle_sets` as one array: text k's set is hashes[cuts[k]:cuts[k + 1]]."""
    parts = _shingle_parts(texts, ngram)
    hashes = np.concatenate([h for h, _ in parts])
    owner = np.concatenate([o for _, o in parts])
    if len(texts) <= 1 << 16:  # by hash, then by owner: a radix sort (np.lexsort: 4x the time)
        by_hash = np.argsort(hashes)
        order = by_hash[np.argsort(owner[by_hash].astype(np.uint16), kind="stable")]
    else:
        order = np.lexsort((hashes, owner))
    hashes, owner = hashes[order], owner[order]
    fresh = np.ones(len(hashes), dtype=bool)
    fresh[1:] = (hashes[1:] != hashes[:-1]) | (owner[1:] != owner[:-1])
    hashes, owner = hashes[fresh], owner[fresh]
    cuts = np.zeros(len(texts) + 1, dtype=np.intp)
    cuts[1:-1] = np.searchsorted(owner, np.arange(1, len(texts)))
    cuts[-1] = len(hashes)
    return hashes, cuts


def jaccard(a: str, b: str, ngram: int) -> float:
    """Exact Jaccard similarity of the word n-gram sets of two texts (shingled as signatures)."""
    return jaccard_of(shingles(a, ngram), shingles(b, ngram))


def jaccard_of(sa: U64, sb: U64) -> float:
    """Exact Jaccard similarity of two shingle sets (as `shingles` returns them: sorted, distinct).

    The smaller set is looked up in the larger by binary search (np.intersect1d sorts both
    again: 1.5 times slower on the short sets of a confirmation)."""
    small, large = (sa, sb) if sa.size <= sb.size else (sb, sa)
    common = int(np.count_nonzero(large.take(large.searchsorted(small), mode="clip") == small))
    return common / (sa.size + sb.size - common)


def estimate(sigs: U32, i: int, j: int) -> float:
    """The Jaccard estimate of rows i and j: the fraction of equal minhash values."""
    return int(np.count_nonzero(sigs[i] == sigs[j])) / int(sigs.shape[1])


def near_duplicates(
    sigs: U32, spec: DedupSpec, confirm: Callable[[int, int], bool] | None = None
) -> NDArray[np.bool_]:
    """Rows that are near duplicates of an earlier kept row (see the module docstring)."""
    return duplicate_of(sigs, spec, confirm) >= 0


def duplicate_of(
    sigs: U32, spec: DedupSpec, confirm: Callable[[int, int], bool] | None = None
) -> NDArray[np.int64]:
    """Per row, the earlier kept row it near-duplicates, or -1 (or UNCHECKED) for a kept row."""
    _check_shape(sigs, spec)
    keys = band_keys(sigs, spec)
    rows = np.arange(sigs.shape[0], dtype=np.int64)
    groups = [(band, band_groups(keys[band], rows)) for band in range(spec.bands)]
    return keep_first(groups, sigs.shape[0], _verifier(sigs, spec, confirm))


def candidate_rows(sigs: U32, spec: DedupSpec) -> NDArray[np.intp]:
    """Rows sharing an LSH bucket with another row: the only rows `confirm` may be asked about."""
    _check_shape(sigs, spec)
    keys = band_keys(sigs, spec)
    rows = np.arange(sigs.shape[0], dtype=np.int64)
    members = [band_groups(keys[band], rows).members for band in range(spec.bands)]
    return np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *members])).astype(np.intp)


@dataclass(frozen=True)
class BandGroups:
    """The shared buckets of one band (or of one hash range of a band): rows with equal keys."""

    members: NDArray[np.int64]
    """Rows, bucket after bucket, ascending within a bucket; only buckets of two rows or more."""
    starts: NDArray[np.int64]
    """Bucket k holds members[starts[k]:starts[k + 1]] (one more entry than buckets)."""


def band_keys(sigs: U32, spec: DedupSpec) -> U64:
    """The 64-bit LSH bucket key of every row in every band: shape (bands, rows)."""
    rows = spec.num_perm // spec.bands
    out = np.empty((spec.bands, sigs.shape[0]), dtype=np.uint64)
    for band in range(spec.bands):
        out[band] = _band_keys(sigs[:, band * rows : (band + 1) * rows])
    return out


def band_groups(keys: U64, rows: NDArray[np.int64]) -> BandGroups:
    """Group `rows` (ascending) by their key in one band; keep the keys shared by two or more.

    Independent of every other band and of every other key: a band can be split by key
    (hash ranges) and its parts grouped separately, in any process.
    """
    n = len(keys)
    order = np.argsort(keys)  # not stable (a SIMD sort, ~7 times the stable one's speed)...
    ordered = keys[order]
    fresh = np.ones(n, dtype=bool)
    fresh[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(fresh) - 1
    sizes = np.bincount(group)
    shared = sizes[group] > 1
    starts = np.zeros(int((sizes > 1).sum()) + 1, dtype=np.int64)
    np.cumsum(sizes[sizes > 1], out=starts[1:])
    picked, of = order[shared].astype(np.int64), group[shared].astype(np.int64)
    # ...so rows are put back in ascending order in each bucket: sorted by (bucket, row)
    picked = np.sort(of * n + picked) % n if n < 2**31 else picked[np.lexsort((picked, of))]
    return BandGroups(rows[picked].astype(np.int64), starts)


def keep_first(
    groups: Sequence[tuple[int, BandGroups]], n: int, verify: Callable[[int, int], bool]
) -> NDArray[np.int64]:
    """Per row, the first earlier KEPT row of its buckets that verifies as its near duplicate.

    `groups` holds (band, groups of that band or of one hash range of it). Rows are taken in
    ascending order; row j is compared with the kept rows before it in each of its buckets that
    is not full (see the module docstring), band after band and ascending within a bucket, each
    row once: the first that verifies is its partner and j is dropped, else j is kept (-1, or
    UNCHECKED when a full bucket was skipped). The rows are walked a window at a time (at most
    _WINDOWS windows, each scanning the groups for its rows). Memory: the groups, 9 bytes per
    row, about 30 bytes per (row, bucket) with an earlier row in the bucket, of one window, up
    to BUCKET_KEPT kept rows of each bucket of more than BUCKET_KEPT rows until it is full, then
    8 bytes for it.
    """
    partner = np.full(n, -1, dtype=np.int64)
    if not groups:
        return partner
    kept = bytearray(b"\x01") * n
    members = [g.members for _, g in groups]
    bands = np.array([band for band, _ in groups], dtype=np.int64)
    small = np.int32 if max(n, len(groups)) < 2**31 else np.int64  # rows and offsets fit
    window = max(_WINDOW_ROWS, -(-n // _WINDOWS))
    large: dict[tuple[int, int], _KeptSoFar] = {}
    full = np.zeros(0, dtype=np.int64)  # the full buckets (see _walk)
    for lo in range(0, n, window):
        entries = _window_entries(groups, bands, lo, min(lo + window, n), small)
        full = _walk(entries, members, kept, partner, verify, large, full)
    return partner


def _window_entries(
    groups: Sequence[tuple[int, BandGroups]],
    bands: NDArray[np.int64],
    lo: int,
    hi: int,
    small: type[np.integer[Any]],
    bucket_base: NDArray[np.int64] | None = None,
) -> list[NDArray[Any]]:
    """(row, source, first, count) of every member of a bucket with rows lo..hi-1 that has an
    earlier member, ordered by row then band: row's bucket in `groups[source]` has its `count`
    earlier members at `members[first:first + count]`. With `bucket_base`, `first` is instead
    the bucket's number, its index in groups[source].starts plus bucket_base[source]."""
    rows, sources, firsts, counts = [], [], [], []
    for source, (_, g) in enumerate(groups):
        at = np.flatnonzero((g.members >= lo) & (g.members < hi))
        bucket = np.searchsorted(g.starts, at, side="right") - 1
        first = g.starts[bucket]
        position = at - first
        later = position > 0  # the first row of a bucket has nothing before it to compare
        if bucket_base is not None:
            first = bucket + bucket_base[source]
        rows.append(g.members[at[later]].astype(small))
        sources.append(np.full(int(later.sum()), source, dtype=small))
        firsts.append(first[later].astype(small))
        counts.append(position[later].astype(small))
    row_all, source_all = np.concatenate(rows), np.concatenate(sources)
    band_all, n_sources = bands[source_all], len(groups)
    span = int(bands.max(initial=0)) + 1
    if (hi + 1) * span * n_sources < 2**62:  # by row, then band (then source: a unique key)
        order = np.argsort((row_all.astype(np.int64) * span + band_all) * n_sources + source_all)
    else:
        order = np.lexsort((source_all, band_all, row_all))
    return [
        row_all[order],
        source_all[order],
        np.concatenate(firsts)[order],
        np.concatenate(counts)[order],
    ]


@dataclass
class _KeptSoFar:
    """The kept rows (at most BUCKET_KEPT) among the first `scanned` members of a large bucket."""

    scanned: int = 0
    kept: list[int] = field(default_factory=list)


def _walk(
    entries: list[NDArray[Any]],
    members: list[NDArray[np.int64]],
    kept: bytearray,
    partner: NDArray[np.int64],
    verify: Callable[[int, int], bool],
    large: dict[tuple[int, int], _KeptSoFar],
    full: NDArray[np.int64],
) -> NDArray[np.int64]:
    """Decide the rows of one window's entries, in order (see keep_first); the full buckets.

    `full`: the buckets found full so far, as first * len(members) + source, sorted. A bucket
    full once is full for every later row (its kept rows stay kept), so the entries of a slice
    in a bucket already full are dropped at once, in numpy: a row left without entries is kept
    UNCHECKED, the others are marked as having skipped one. Slices end at a row's last entry.
    """
    current, found, tried, skipped = -1, -1, set[int](), False
    sources, total = len(members), len(entries[0])
    lo = 0
    while lo < total:  # a slice at a time as Python ints
        hi = min(lo + _ENTRIES, total)
        if hi < total:
            hi = int(entries[0].searchsorted(entries[0][hi - 1], side="right"))
        part, skipping = _without_full([e[lo:hi] for e in entries], full, sources, partner)
        lo = hi
        new_full: set[int] = set()
        for j, source, first, count in zip(*(e.tolist() for e in part), strict=True):
            if j != current:
                if skipped and found < 0:
                    partner[current] = UNCHECKED
                current, found, tried, skipped = j, -1, set(), j in skipping
            elif found >= 0:
                continue
            bucket = first * sources + source
            if bucket in new_full:
                skipped = True
                continue
            if count <= BUCKET_KEPT:
                earlier = members[source][first : first + count].tolist()
                is_full = count == BUCKET_KEPT and all(kept[i] for i in earlier)
            else:
                earlier = _kept_in_large(members[source], (source, first), count, kept, large)
                is_full = len(earlier) == BUCKET_KEPT
            if is_full:
                new_full.add(bucket)
                large.pop((source, first), None)
                skipped = True
                continue
            for i in earlier:
                if kept[i] and i not in tried:
                    tried.add(i)
                    if verify(i, j):
                        found, partner[j], kept[j] = i, i, 0
                        break
        if new_full:
            full = np.union1d(full, np.fromiter(new_full, dtype=np.int64, count=len(new_full)))
    if skipped and found < 0:
        partner[current] = UNCHECKED
    return full


def _without_full(
    part: list[NDArray[Any]], full: NDArray[np.int64], sources: int, partner: NDArray[np.int64]
) -> tuple[list[NDArray[Any]], set[int]]:
    """The entries of a slice not in a bucket of `full`, and the rows that had one there; a row
    left without entries is kept UNCHECKED here."""
    if not len(full):
        return part, set()
    rows = part[0]
    gone = np.isin(part[2].astype(np.int64) * sources + part[1], full)
    if not gone.any():
        return part, set()
    live = ~gone
    partner[np.setdiff1d(rows[gone], rows[live])] = UNCHECKED
    return [e[live] for e in part], set(rows[gone].tolist())


def _kept_in_large(
    band_members: NDArray[np.int64],
    key: tuple[int, int],
    count: int,
    kept: bytearray,
    large: dict[tuple[int, int], _KeptSoFar],
) -> list[int]:
    """The kept rows, at most BUCKET_KEPT, among the first `count` members of a bucket of more
    than BUCKET_KEPT: the one at `band_members[key[1]:]`, `key` being (source, first).

    The bucket is scanned once, incrementally, through `large` (its members before the current
    row are all decided), so a row costs O(1) in a bucket of any size instead of a pass over
    every earlier member.
    """
    so_far = large.get(key)
    if so_far is None:
        so_far = large[key] = _KeptSoFar()
    if len(so_far.kept) < BUCKET_KEPT and so_far.scanned < count:
        first = key[1]
        fresh = band_members[first + so_far.scanned : first + count].tolist()
        so_far.kept += [i for i in fresh if kept[i]][: BUCKET_KEPT - len(so_far.kept)]
        so_far.scanned = count
    return so_far.kept


# The compiled walk: keep_first with the near-duplicate test of the shard stage built in.

_NEED, _PAUSED, _DONE, _GROW = 0, 1, 2, 3  # why _walk_exact returned
_PAUSE_ENTRIES = 1 << 20  # _walk_exact hands back (for a heartbeat) after this many entries
_LARGE_SLOTS = 1 << 10  # kept-so-far lists of large buckets, at first (doubled when short)


def keep_first_exact(
    groups: Sequence[tuple[int, BandGroups]],
    n: int,
    sigs: U32,
    spec: DedupSpec,
    texts: Callable[[list[int]], list[str]] | None,
    cache_bytes: int,
    beat: Callable[[int], None] | None = None,
) -> NDArray[np.int64]:
    """`keep_first` with the shard stage's test of a candidate pair (i, j) compiled in: its
    signatures' estimate >= spec.threshold, or with `texts` (the texts of rows, for a list of
    rows), exact Jaccard >= spec.threshold and estimate >= confirm_floor(spec). The same
    partners as keep_first(groups, n, verify) with that test; on 100,000 templated documents
    (278,000 pairs tested) the walk takes ~0.1 s where keep_first and a Python test took ~3 s.

    The walk (plain Python while it is small, see PYTHON_WALK_ENTRIES; else numba, compiled
    on first use and cached on disk) hands back when it needs a row's shingles: they are
    computed for the pair it tests, then for the rows the next _ENTRIES entries may ask about
    (see `_asked_about`) while they fit, in one buffer of about `cache_bytes` (emptied when the
    pair does not fit: a row asked about again is shingled again). Memory: keep_first's (the
    groups' members in one array: `joined_groups` avoids a copy), 8 bytes a row (where its
    shingles are), 17 bytes a shared bucket (where it starts, full or not, its slot) and the
    buffer. `beat(row)` is called now and then.
    """
    partner = np.full(n, -1, dtype=np.int64)
    if not groups:
        return partner
    walk = _Walker(sum(len(g.members) for _, g in groups))
    kept = np.ones(n, dtype=np.uint8)
    members, bucket_first, bucket_base = _joined(groups)
    bands = np.array([band for band, _ in groups], dtype=np.int64)
    small = np.int32 if max(n, len(bucket_first)) < 2**31 else np.int64
    window = max(_WINDOW_ROWS, -(-n // _WINDOWS))
    full = np.zeros(len(bucket_first), dtype=np.uint8)
    slots = _Slots(len(bucket_first))
    state = np.array([-1, -1, 0, 0], dtype=np.int64)  # current row, its partner, skipped, tried
    tried = np.zeros(len(groups) * BUCKET_KEPT, dtype=np.int64)
    pool = _Pool(n, cache_bytes, spec.ngram, texts)
    floor = confirm_floor(spec)
    for lo in range(0, n, window):
        rows, _, buckets, counts = _window_entries(
            groups, bands, lo, min(lo + window, n), small, bucket_base
        )
        at, total = 0, len(rows)
        while at < total:
            stop = min(at + walk.entries, total)
            why, at, row = walk(
                rows, buckets, counts, at, stop, total, members, bucket_first, kept, partner,
                full, slots.of, slots.kept, slots.length, slots.scanned, slots.free, state,
                tried, sigs, texts is not None, spec.threshold, floor, pool.data, pool.where,
            )  # fmt: skip
            if why == _NEED:  # row's and the current row's shingles, and the next ones'
                part = slice(at, at + _ENTRIES)
                live = full[buckets[part]] == 0
                asked = _asked_about(
                    rows[part][live], buckets[part][live], counts[part][live], members, bucket_first
                )
                pool.add([row, int(state[0])], asked[kept[asked] != 0])
            elif why == _GROW:
                slots.grow()
            if beat is not None:
                beat(int(rows[min(at, total - 1)]))
    return partner


def _joined(
    groups: Sequence[tuple[int, BandGroups]],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Every group's members as one array (without a copy when they are consecutive views of
    one, as `joined_groups` makes them), where each bucket starts in it, and the number of
    each group's first bucket."""
    parts = [g.members for _, g in groups]
    sizes = np.array([len(m) for m in parts], dtype=np.int64)
    base = np.cumsum(sizes) - sizes
    members = parts[0].base if parts[0].base is not None else parts[0]
    views = (
        isinstance(members, np.ndarray)
        and members.dtype == np.int64
        and members.ndim == 1
        and len(members) == int(sizes.sum())
        and all(
            m.dtype == np.int64
            and m.__array_interface__["data"][0] == members.ctypes.data + 8 * int(b)
            for m, b in zip(parts, base.tolist(), strict=True)
        )
    )
    if not views:
        members = np.concatenate(parts).astype(np.int64, copy=False)
    firsts = [g.starts[:-1] + b for (_, g), b in zip(groups, base.tolist(), strict=True)]
    counts = np.array([len(f) for f in firsts], dtype=np.int64)
    return members, np.concatenate(firsts), np.cumsum(counts) - counts


def joined_groups(groups: list[tuple[int, BandGroups]]) -> list[tuple[int, BandGroups]]:
    """The same groups, their members views of one array (see keep_first_exact)."""
    members = np.concatenate([g.members for _, g in groups]).astype(np.int64, copy=False)
    out, at = [], 0
    for band, g in groups:
        out.append((band, BandGroups(members[at : at + len(g.members)], g.starts)))
        at += len(g.members)
    return out


def _asked_about(
    rows: NDArray[Any],
    buckets: NDArray[Any],
    counts: NDArray[Any],
    members: NDArray[np.int64],
    bucket_first: NDArray[np.int64],
) -> NDArray[np.int64]:
    """The rows of some entries (those not in a full bucket) and the earlier members of their
    buckets of at most BUCKET_KEPT rows: the rows _walk_exact may ask about (but for the kept
    rows of larger buckets, rows of entries before), sorted."""
    small = counts <= BUCKET_KEPT
    count = counts[small].astype(np.int64)
    offsets = np.cumsum(count) - count
    at = np.repeat(bucket_first[buckets[small]] - offsets, count) + np.arange(int(count.sum()))
    return _distinct(np.concatenate([rows.astype(np.int64), members[at]]))


def _distinct(values: NDArray[np.int64]) -> NDArray[np.int64]:
    """np.unique of int64 values (a sort and a mask: np.unique takes ~15 times as long)."""
    values = np.sort(values)
    fresh = np.ones(len(values), dtype=bool)
    fresh[1:] = values[1:] != values[:-1]
    return values[fresh]


class _Slots:
    """The kept-so-far lists of large buckets (see _KeptSoFar) as arrays, for _walk_exact:
    bucket b's is slot k = of[b] (-1: none yet), kept[k, :length[k]] among its first
    scanned[k] members; the free slots are free[:free[-1]]."""

    def __init__(self, buckets: int) -> None:
        self.of = np.full(buckets, -1, dtype=np.int64)
        size = _LARGE_SLOTS
        self.kept = np.zeros((size, BUCKET_KEPT), dtype=np.int64)
        self.length = np.zeros(size, dtype=np.int64)
        self.scanned = np.zeros(size, dtype=np.int64)
        self.free = np.append(np.arange(size, dtype=np.int64)[::-1], size)

    def grow(self) -> None:
        """Twice the slots (called when none is free)."""
        size = len(self.length)
        self.kept = np.concatenate([self.kept, np.zeros_like(self.kept)])
        self.length = np.concatenate([self.length, np.zeros_like(self.length)])
        self.scanned = np.concatenate([self.scanned, np.zeros_like(self.scanned)])
        self.free = np.zeros(2 * size + 1, dtype=np.int64)
        self.free[:size] = np.arange(size, 2 * size)[::-1]
        self.free[-1] = size


class _Pool:
    """Shingle sets of rows in one buffer, for _walk_exact: row r's set is data[w + 1:w + 1 +
    data[w]] where w = where[r] >= 0. The rows asked for are put first, emptying the buffer
    if they do not fit; then the rows likely to be asked about next, while they fit."""

    def __init__(
        self, n: int, cache_bytes: int, ngram: int, texts: Callable[[list[int]], list[str]] | None
    ) -> None:
        self.data = np.zeros(max(cache_bytes // 8, 1) if texts is not None else 0, np.uint64)
        self.where = np.full(n if texts is not None else 0, -1, dtype=np.int64)
        self.held: list[NDArray[np.int64]] = []  # the rows in the buffer, batch by batch
        self.used = 0
        self.emptied = 0
        self.ngram = ngram
        self.texts = texts

    def add(self, needed: list[int], likely: NDArray[np.int64]) -> None:
        """Shingle the rows of `needed` the buffer lacks, then those of `likely` (sorted), a
        batch of _POOL_BATCH texts at a time, while they fit."""
        assert self.texts is not None
        asked = _distinct(np.array(needed, dtype=np.int64))
        asked = asked[self.where[asked] < 0]
        if len(asked):
            self._put(asked, *_shingle_flat(self.texts(asked.tolist()), self.ngram))
        likely = likely[self.where[likely] < 0]
        for lo in range(0, len(likely), _POOL_BATCH):
            batch = likely[lo : lo + _POOL_BATCH]
            hashes, cuts = _shingle_flat(self.texts(batch.tolist()), self.ngram)
            if self.used + len(hashes) + len(batch) > len(self.data):
                return
            self._put(batch, hashes, cuts)

    def _put(self, rows: NDArray[np.int64], hashes: U64, cuts: NDArray[np.intp]) -> None:
        sizes = np.diff(cuts)
        need = len(hashes) + len(rows)
        if self.used + need > len(self.data):  # empty: rows are shingled again when asked about
            for held in self.held:
                self.where[held] = -1
            self.held, self.used = [], 0
            self.emptied += 1
            if need > len(self.data):  # larger than the buffer: a buffer of their size
                self.data = np.zeros(need, dtype=np.uint64)
        heads = self.used + np.cumsum(sizes + 1) - (sizes + 1)
        self.data[heads] = sizes.astype(np.uint64)
        at = np.repeat(heads + 1 - cuts[:-1], sizes) + np.arange(len(hashes))
        self.data[at] = hashes
        self.where[rows] = heads
        self.held.append(rows)
        self.used += need


_POOL_BATCH = 256  # texts shingled in one pass (~3 us a short text, ~65 us alone)


PYTHON_WALK_ENTRIES = 1 << 15
"""A walk of at most this many entries starts as plain Python (~6 us an entry)..."""
PYTHON_WALK_S = 0.1
"""...and goes on compiled once it has taken this long: numba's import and the load of the
compiled walk from its disk cache take ~0.25 s, longer than a small build's whole walk."""
_PYTHON_STEP = 1 << 10  # entries the plain-Python walk takes between looks at the clock


class _Walker:
    """_walk_exact, as plain Python or compiled (see PYTHON_WALK_ENTRIES). The walk stops at
    any entry and goes on from it as if it had not stopped, so where it changes from one to
    the other changes nothing but its speed."""

    def __init__(self, entries: int) -> None:
        self._compiled = _compiled() if entries > PYTHON_WALK_ENTRIES else None
        self._spent = 0.0

    @property
    def entries(self) -> int:
        """How many entries to hand it at a time."""
        return _PAUSE_ENTRIES if self._compiled is not None else _PYTHON_STEP

    def __call__(self, *args: Any) -> tuple[int, int, int]:
        if self._compiled is not None:
            return self._compiled(*args)
        start = time.perf_counter()
        out = _walk_exact(*args)
        self._spent += time.perf_counter() - start
        if self._spent > PYTHON_WALK_S:
            self._compiled = _compiled()
        return out


@functools.cache
def _compiled() -> Callable[..., tuple[int, int, int]]:
    """_walk_exact compiled by numba (cached on disk: compiled once per install; imported
    here: the phase 1 workers never need it)."""
    import numba

    walk: Callable[..., tuple[int, int, int]] = numba.njit(cache=True, nogil=True)(_walk_exact)
    return walk


def _walk_exact(
    rows: NDArray[Any],
    buckets: NDArray[Any],
    counts: NDArray[Any],
    at: int,
    stop: int,
    total: int,
    members: NDArray[np.int64],
    bucket_first: NDArray[np.int64],
    kept: NDArray[np.uint8],
    partner: NDArray[np.int64],
    full: NDArray[np.uint8],
    slot_of: NDArray[np.int64],
    large_kept: NDArray[np.int64],
    large_length: NDArray[np.int64],
    large_scanned: NDArray[np.int64],
    free: NDArray[np.int64],
    state: NDArray[np.int64],
    tried: NDArray[np.int64],
    sigs: U32,
    confirm: bool,
    threshold: float,
    floor: float,
    data: U64,
    where: NDArray[np.int64],
) -> tuple[int, int, int]:
    """_walk's loop over entries at..stop-1 with the test of keep_first_exact (compiled).

    Returns (_NEED, entry, row) when the entry needs row's shingles, (_GROW, entry, -1) when a
    large bucket needs a slot, (_PAUSED, stop, -1) or (_DONE, total, -1): the entry to go on
    from. The row being decided is in `state` (row, partner, skipped, how many in `tried`),
    so the walk goes on from an entry as if it had not stopped: an entry taken again verifies
    only the rows it did not try.
    """
    width = sigs.shape[1]
    current, found, skipped, n_tried = state[0], state[1], state[2], state[3]
    p = at
    why, need = _PAUSED, -1
    while p < stop:
        j, bucket, count = int(rows[p]), int(buckets[p]), int(counts[p])
        if j != current:
            if current >= 0 and skipped and found < 0:
                partner[current] = UNCHECKED
            current, found, skipped, n_tried = j, -1, 0, 0
        elif found >= 0:
            p += 1
            continue
        if full[bucket]:
            skipped = 1
            p += 1
            continue
        first = bucket_first[bucket]
        slot = -1
        if count <= BUCKET_KEPT:
            is_full = count == BUCKET_KEPT
            for k in range(first, first + count):
                if not kept[members[k]]:
                    is_full = False
                    break
        else:
            slot = slot_of[bucket]
            if slot < 0:
                if free[-1] == 0:
                    why = _GROW
                    break
                free[-1] -= 1
                slot = free[free[-1]]
                slot_of[bucket] = slot
                large_length[slot], large_scanned[slot] = 0, 0
            if large_length[slot] < BUCKET_KEPT and large_scanned[slot] < count:
                for k in range(first + large_scanned[slot], first + count):
                    i = members[k]
                    if kept[i]:
                        large_kept[slot, large_length[slot]] = i
                        large_length[slot] += 1
                        if large_length[slot] == BUCKET_KEPT:
                            break
                large_scanned[slot] = count
            is_full = large_length[slot] == BUCKET_KEPT
        if is_full:
            full[bucket] = 1
            if slot >= 0:
                slot_of[bucket] = -1
                free[free[-1]] = slot
                free[-1] += 1
            skipped = 1
            p += 1
            continue
        n_earlier = count if slot < 0 else large_length[slot]
        for k in range(n_earlier):
            i = members[first + k] if slot < 0 else large_kept[slot, k]
            if not kept[i]:
                continue
            seen = False
            for t in range(n_tried):
                if tried[t] == i:
                    seen = True
                    break
            if seen:
                continue
            same = 0
            for c in range(width):
                if sigs[i, c] == sigs[j, c]:
                    same += 1
            estimate = same / width
            if confirm and estimate >= floor:
                if where[i] < 0 or where[j] < 0:
                    need = i if where[i] < 0 else j
                    break
                x, y = where[i], where[j]  # exact Jaccard: merge the two sorted sets
                end_x, end_y = x + 1 + int(data[x]), y + 1 + int(data[y])
                size, common = int(data[x]) + int(data[y]), 0
                x, y = x + 1, y + 1
                while x < end_x and y < end_y:
                    if data[x] < data[y]:
                        x += 1
                    elif data[x] > data[y]:
                        y += 1
                    else:
                        common += 1
                        x += 1
                        y += 1
                near = common / (size - common) >= threshold
            else:
                near = estimate >= threshold and not confirm
            tried[n_tried] = i
            n_tried += 1
            if near:
                found = i
                partner[j] = i
                kept[j] = 0
                break
        if need >= 0:
            why = _NEED
            break
        p += 1
    if p == total and why == _PAUSED:
        if current >= 0 and skipped and found < 0:
            partner[current] = UNCHECKED
        current, found, skipped, n_tried = -1, -1, 0, 0
        why = _DONE
    state[0], state[1], state[2], state[3] = current, found, skipped, n_tried
    return why, p, need


# Phase 1: shingles and signatures.


def _shingle_parts(texts: Sequence[str], ngram: int) -> list[tuple[U64, NDArray[np.intp]]]:
    """Shingle hashes of a batch with the text each belongs to: n-grams, then short texts."""
    buf, text_starts = _encode(texts)
    word_starts, word_ends = _words(buf)
    words = _word_hashes(buf, word_starts, word_ends - word_starts)
    counts = np.diff(np.searchsorted(word_starts, text_starts), append=len(word_starts))
    owner = np.repeat(np.arange(len(texts)), counts)
    starts = np.flatnonzero(owner[: max(len(owner) - ngram + 1, 0)] == owner[ngram - 1 :])
    short = np.flatnonzero(counts < ngram)
    return [
        (_combine(words, ngram, starts), owner[starts]),
        (_short_shingles(words, counts, short, ngram), short),
    ]


def _encode(texts: Sequence[str]) -> tuple[NDArray[np.uint8], NDArray[np.intp]]:
    """Lowercased UTF-8 of the texts joined by spaces (plus 8 NULs), and where each starts."""
    parts = [t.lower().encode("utf-8", "surrogatepass") for t in texts]
    sizes = np.fromiter((len(p) + 1 for p in parts), dtype=np.intp, count=len(parts))
    starts = np.cumsum(sizes) - sizes
    parts.append(bytes(8))
    return np.frombuffer(b" ".join(parts), dtype=np.uint8), starts


def _words(buf: NDArray[np.uint8]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The start and end byte offset of every word in the buffer."""
    mask = np.zeros(len(buf) + 2, dtype=bool)
    mask[1:-1] = _WORD_BYTE[buf]
    leads = np.flatnonzero(buf >= 0xC2)
    for lead, lo, hi, width in _PUNCT_SEQUENCES if len(leads) else ():
        at = leads[buf[leads] == lead]
        at = at[(buf[at + 1] >= lo) & (buf[at + 1] <= hi)]
        for k in range(width):
            mask[at + k + 1] = False
    edges = np.flatnonzero(mask[1:] != mask[:-1])
    return edges[0::2], edges[1::2]


def _word_hashes(
    buf: NDArray[np.uint8], starts: NDArray[np.intp], lengths: NDArray[np.intp]
) -> U64:
    """A 64-bit hash of each word: its 8-byte blocks times per-block weights, then splitmix64."""
    windows = _windows(buf)
    weights = _constants(b"block", int(lengths.max(initial=0)) // 8 + 1)
    summed = (windows[starts] & _LOW_BYTES[np.minimum(lengths, 8)]) * weights[0]
    longer = np.flatnonzero(lengths > 8)
    if len(longer):
        blocks = (lengths[longer] - 1) // 8  # blocks after the first
        first = np.cumsum(blocks) - blocks
        block = np.arange(1, int(blocks.sum()) + 1) - np.repeat(first, blocks)
        at = np.repeat(starts[longer], blocks) + 8 * block
        left = np.minimum(np.repeat(lengths[longer], blocks) - 8 * block, 8)
        terms = (windows[at] & _LOW_BYTES[left]) * weights[block]
        summed[longer] += np.add.reduceat(terms, first)
    return _splitmix(summed + lengths.astype(np.uint64) * _constants(b"len", 1))


def _windows(buf: NDArray[np.uint8]) -> U64:
    """Every 8 consecutive bytes of the buffer as a little-endian uint64 (one per start byte)."""
    return np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))


def _combine(words: U64, ngram: int, starts: NDArray[np.intp]) -> U64:
    """n-gram hashes at the given start word positions: sum of word hash x position weight."""
    weights = _constants(b"ngram", ngram)
    width = max(len(words) - ngram + 1, 0)
    out = np.zeros(width, dtype=np.uint64)
    for k in range(ngram):
        out += words[k : k + width] * weights[k]
    return out[starts]


def _short_shingles(
    words: U64, counts: NDArray[np.intp], short: NDArray[np.intp], ngram: int
) -> U64:
    """The single shingle of each text with fewer than ngram words: all its words combined."""
    if not len(short):
        return np.zeros(0, dtype=np.uint64)
    weights = _constants(b"ngram", ngram)
    firsts = (np.cumsum(counts) - counts)[short]
    counts = counts[short]
    out = np.repeat(_constants(b"short", 1), len(short))
    for k in range(ngram - 1):
        has = counts > k
        out[has] += words[firsts[has] + k] * weights[k]
    return out


def _min_into(out: U32, shingles32: U32, owner: NDArray[np.intp], a: U32, c: U32) -> None:
    """Lower out[:, text] to the minimum of a * (x + c) mod 2^32 over each text's shingles."""
    block = np.empty((len(a), _CHUNK), dtype=np.uint32)
    col_a, col_c = a[:, None], c[:, None]
    for lo in range(0, len(shingles32), _CHUNK):
        x = shingles32[lo : lo + _CHUNK]
        who = owner[lo : lo + _CHUNK]
        segments = np.flatnonzero(np.diff(who, prepend=-1))
        work = block[:, : len(x)]
        np.add(col_c, x, out=work)
        np.multiply(work, col_a, out=work)
        texts = who[segments]
        out[:, texts] = np.minimum(out[:, texts], np.minimum.reduceat(work, segments, axis=1))


def _permutations(spec: DedupSpec) -> tuple[U32, U32]:
    """Multipliers (odd) and pre-offsets of the num_perm hash functions, from the seed."""
    seed = f"perm:{spec.seed}".encode()
    a = (_constants(seed + b":a", spec.num_perm) >> np.uint64(32)).astype(np.uint32)
    b = (_constants(seed + b":b", spec.num_perm) >> np.uint64(32)).astype(np.uint32)
    return a | np.uint32(1), b


@functools.lru_cache(maxsize=256)
def _constants(tag: bytes, count: int) -> U64:
    """`count` pseudo-random 64-bit constants for a tag: splitmix64 of a counter from its xxh3.

    Cached (per-text calls ask for the same ones again), so read-only.
    """
    start = np.uint64(xxhash.xxh3_64_intdigest(tag))
    out = _splitmix(np.arange(1, count + 1, dtype=np.uint64) + start)
    out.setflags(write=False)
    return out


def _splitmix(z: U64) -> U64:
    """The splitmix64 finalizer, elementwise (wrapping uint64 arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


# Phase 2: buckets, verification, keep-first.


def _check_shape(sigs: U32, spec: DedupSpec) -> None:
    """Fail on signatures that do not match the spec (wrong width, dtype or band split)."""
    if sigs.ndim != 2 or sigs.shape[1] != spec.num_perm or sigs.dtype != np.uint32:
        raise ConfigError(
            f"signatures of shape {sigs.shape} and dtype {sigs.dtype} do not match "
            f"num_perm = {spec.num_perm}; expected (rows, {spec.num_perm}) uint32"
        )
    if spec.num_perm % spec.bands:
        raise ConfigError(f"bands = {spec.bands} must divide num_perm = {spec.num_perm}")


def _band_keys(band: U32) -> U64:
    """A 64-bit key for each row of one band of the signatures."""
    if band.shape[1] % 2:
        band = np.concatenate([band, np.zeros((band.shape[0], 1), dtype=np.uint32)], axis=1)
    pairs = np.ascontiguousarray(band).view(np.uint64)
    weights = _constants(b"band", pairs.shape[1])
    keys = pairs[:, 0] * weights[0]
    for k in range(1, pairs.shape[1]):
        keys += pairs[:, k] * weights[k]
    return _splitmix(keys)


def _verifier(
    sigs: U32, spec: DedupSpec, confirm: Callable[[int, int], bool] | None
) -> Callable[[int, int], bool]:
    """The near-duplicate test for a candidate pair (i earlier than j)."""
    if confirm is None:
        return lambda i, j: estimate(sigs, i, j) >= spec.threshold
    floor = confirm_floor(spec)
    return lambda i, j: estimate(sigs, i, j) >= floor and confirm(i, j)


def confirm_floor(spec: DedupSpec) -> float:
    """The estimate below which a candidate is rejected without calling `confirm`."""
    t = spec.threshold
    return t - _SIGMAS * math.sqrt(t * (1.0 - t) / spec.num_perm)
