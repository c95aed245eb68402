"""Gopher's word n-gram statistics (top and duplicate n-gram characters) of many texts at once.

An n-gram is a 64-bit polynomial hash of its words' hashes, so equal n-grams have equal keys
and unequal ones differ but for a collision (about m**2 / 2**64 for a text of m words); n-grams
are compared within their own text only. An n-gram repeats only where the (n-1)-grams at its
place and at the next one repeat, so n = 2 sorts the keys of every place and each larger n
only the places still in the running (on prose a few percent of them by n = 5). The texts of
a batch are counted together, one numpy pass per n for all of them: a text of a few hundred
words costs numpy's per-call overhead many times over what its counting does.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np

_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it mod 2**64 loses nothing

Ints = np.ndarray[Any, np.dtype[np.int64]]


class _Level:
    """The n-grams of a batch that repeat within their text: their places (global, ascending),
    a label per n-gram (equal within a text for equal n-grams); per text, where its repeats
    start in those (and the last text's end) and its top n-gram's characters times its count."""

    def __init__(self, places: Ints, labels: Ints, bounds: list[int], top: list[int]) -> None:
        self.places, self.labels, self.bounds, self.top = places, labels, bounds, top


class NGramBatch:
    """The n-gram statistics of a batch of texts' words, each n counted on first use."""

    def __init__(self, texts: Sequence[list[str]]) -> None:
        self.count = count = len(texts)
        sizes = np.fromiter(map(len, texts), dtype=np.int64, count=count)
        total = int(sizes.sum())
        words = list(chain.from_iterable(texts))
        # str's hash is SipHash: equal words, equal hashes; unequal ones collide at 2**-64
        self._hashes = np.fromiter(map(hash, words), dtype=np.int64, count=total).view(np.uint64)
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=total)
        self._cum = np.zeros(total + 1, dtype=np.int64)
        np.cumsum(lengths, out=self._cum[1:])
        self.sizes = sizes
        self.starts = np.cumsum(sizes) - sizes
        self._ends = self.starts + sizes
        self._doc_of = np.repeat(np.arange(count, dtype=np.int64), sizes)
        self._levels: list[_Level] = []
        self._keys: np.ndarray[Any, Any] = self._hashes  # the last level's repeats' keys

    def level(self, n: int) -> _Level:
        """The repeated n-grams (n >= 2), every smaller n counted first."""
        while len(self._levels) < n - 1:
            self._levels.append(self._next(len(self._levels) + 2))
        return self._levels[n - 2]

    def chars(self, places: Ints, n: int) -> Ints:
        """Characters of the words of the n-grams at `places` (no separators)."""
        return self._cum[places + n] - self._cum[places]

    def _next(self, n: int) -> _Level:
        hashes, doc_of = self._hashes, self._doc_of
        if n == 2:  # every place of a word followed by one in its text
            ok = np.ones(len(hashes), dtype=bool)
            ok[self._ends[self.sizes > 0] - 1] = False
            places = np.flatnonzero(ok).astype(np.int64, copy=False)
            keys = hashes[places] * _MIX + hashes[places + 1]
        else:  # the places of a repeated (n-1)-gram followed by one, in the same text
            before = self._levels[-1].places
            repeats = np.zeros(len(hashes) + 1, dtype=bool)
            repeats[before] = True
            ok = repeats[before + 1]
            ok &= before + (n - 1) < self._ends[doc_of[before]]
            places = before[ok]
            keys = self._keys[ok] * _MIX + hashes[places + (n - 1)]
        docs = doc_of[places]
        if len(places):
            places, labels, docs, counts, self._keys = self._repeats(places, keys, docs)
        else:
            labels = counts = self._keys = places
        return self._level(n, places, labels, docs, counts)

    def _repeats(self, places: Ints, keys: Any, docs: Ints) -> tuple[Ints, Ints, Ints, Ints, Any]:
        """Of n-grams at `places` (their keys, their texts): the places of those that repeat
        within their text, a label per n-gram, their texts, counts and keys."""
        # sorted by key, then (stable) by text: equal n-grams of a text are next to each other
        order = keys.argsort()
        if self.count > 1:
            small = np.uint16 if self.count <= 1 << 16 else np.int64  # uint16 sorts by radix
            order = order[docs[order].astype(small).argsort(kind="stable")]
        ordered, ordered_docs = keys[order], docs[order]
        starts = np.ones(len(order), dtype=bool)
        starts[1:] = (ordered[1:] != ordered[:-1]) | (ordered_docs[1:] != ordered_docs[:-1])
        labels = np.empty(len(order), dtype=np.int64)
        labels[order] = starts.cumsum()
        sizes = np.diff(np.append(np.flatnonzero(starts), len(order)))
        counts = sizes[labels - 1]
        repeated = counts > 1
        return places[repeated], labels[repeated], docs[repeated], counts[repeated], keys[repeated]

    def _level(self, n: int, places: Ints, labels: Ints, docs: Ints, counts: Ints) -> _Level:
        """The level of the repeated n-grams: per text, its top n-gram's characters times its
        count (of a text whose n-grams all differ: its first n-gram's) and where its repeats
        start."""
        top = np.ones(self.count, dtype=np.int64)
        first = self.starts.copy()
        if len(places):
            np.maximum.at(top, docs, counts)
            at_top = np.flatnonzero(counts == top[docs])  # ascending: in order of place
            lead = np.ones(len(at_top), dtype=bool)
            lead[1:] = docs[at_top[1:]] != docs[at_top[:-1]]
            first[docs[at_top[lead]]] = places[at_top[lead]]
        asked = self.sizes >= n  # a text of fewer than n words has no n-gram
        top_chars = np.zeros(self.count, dtype=np.int64)
        top_chars[asked] = (self.chars(first[asked], n) + n - 1) * top[asked]
        bounds = np.searchsorted(docs, np.arange(self.count + 1))
        return _Level(places, labels, bounds.tolist(), top_chars.tolist())


class NGrams:
    """One text's word n-gram statistics (read from its batch)."""

    def __init__(self, batch: NGramBatch, index: int) -> None:
        self._batch = batch
        self._index = index
        self.m = int(batch.sizes[index])

    def top_chars(self, n: int) -> int | None:
        """Characters of the most frequent n-gram (words joined by spaces) times its count; of
        equally frequent ones the first. None when the text has fewer than n words."""
        if n > self.m:
            return None
        return self._batch.level(n).top[self._index]

    def duplicate_chars(self, n: int) -> int:
        """Characters (separators not counted) of the n-grams that repeat an earlier one, read
        left to right; a repeat's n words are not looked at again."""
        if n > self.m:
            return 0
        batch, i = self._batch, self._index
        level = batch.level(n)
        lo, hi = level.bounds[i], level.bounds[i + 1]
        if lo == hi:
            return 0
        places = level.places[lo:hi]
        seen: set[int] = set()
        total = nxt = 0
        rows = zip(
            places.tolist(),
            level.labels[lo:hi].tolist(),
            batch.chars(places, n).tolist(),
            strict=True,
        )
        for p, key, size in rows:
            if p < nxt:
                continue
            if key in seen:
                total += size
                nxt = p + n
            else:
                seen.add(key)
                nxt = p + 1
        return total


def ngrams_of(texts: Sequence[list[str]]) -> list[NGrams]:
    """The n-gram statistics of each text's words, all counted as one batch."""
    batch = NGramBatch(texts)
    return [NGrams(batch, i) for i in range(len(texts))]
