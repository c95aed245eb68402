"""Eval-set contamination: an index of the eval items' word n-grams, lookups, and cutting.

`NgramIndex` holds the sorted unique n-gram hashes of one eval set and, for each, the first item
that has it. Lookups first test a bitmap of the hashes' top bits (one gather per n-gram), then
binary-search the few candidates. `cut` removes the matching spans with a window of characters
around each, as GPT-3's decontamination did, and says what is left.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corpus_assets.core.text.ngrams import Ngrams, hash_canonical, ngram_hashes, word_char_spans

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class NgramIndex:
    """The n-grams of one eval set: sorted unique hashes, the item of each, the item ids."""

    hashes: Array
    items: Array
    ids: tuple[str, ...]
    _bitmap: Array = field(init=False, repr=False, compare=False)
    _shift: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bits = int(min(26, max(12, np.ceil(np.log2(max(len(self.hashes), 1) * 16)))))
        bitmap = np.zeros(1 << bits, dtype=bool)
        bitmap[(self.hashes >> np.uint64(64 - bits)).astype(np.int64)] = True
        object.__setattr__(self, "_bitmap", bitmap)
        object.__setattr__(self, "_shift", 64 - bits)

    def lookup(self, hashes: Array) -> Array:
        """For each hash, the index of the first eval item that has it, else -1."""
        out = np.full(len(hashes), -1, dtype=np.int64)
        if not len(self.hashes) or not len(hashes):
            return out
        maybe = np.flatnonzero(self._bitmap[(hashes >> np.uint64(self._shift)).astype(np.int64)])
        if not len(maybe):
            return out
        probe = hashes[maybe]
        at = np.minimum(np.searchsorted(self.hashes, probe), len(self.hashes) - 1)
        found = self.hashes[at] == probe
        out[maybe[found]] = self.items[at[found]]
        return out


def build_index(items: Iterable[tuple[str, list[str]]], n: int) -> tuple[NgramIndex, int]:
    """The index of `(item id, texts)` pairs, and how many items had no n-gram (too short)."""
    ids: list[str] = []
    hashes: list[Array] = []
    owners: list[Array] = []
    short = 0
    for item_id, texts in items:
        grams = ngram_hashes(texts, n).hashes
        if not len(grams):
            short += 1
        hashes.append(grams)
        owners.append(np.full(len(grams), len(ids), dtype=np.int32))
        ids.append(item_id)
    all_hashes = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.uint64)
    all_owners = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int32)
    order = np.lexsort((all_owners, all_hashes))  # by hash, then the first item
    all_hashes, all_owners = all_hashes[order], all_owners[order]
    first = np.ones(len(all_hashes), dtype=bool)
    first[1:] = all_hashes[1:] != all_hashes[:-1]
    return NgramIndex(all_hashes[first], all_owners[first], tuple(ids)), short


@dataclass(frozen=True)
class Hit:
    """A document's first match in one eval set: the item's index and the matching n-grams."""

    item: int
    ngrams: int


def find(grams: Ngrams, index: NgramIndex) -> dict[int, Hit]:
    """Documents of a batch (by position) that share an n-gram with the index."""
    item = index.lookup(grams.hashes)
    hit = np.flatnonzero(item >= 0)
    if not len(hit):
        return {}
    docs, first, counts = np.unique(grams.doc[hit], return_index=True, return_counts=True)
    return {
        int(d): Hit(int(item[hit[f]]), int(c))
        for d, f, c in zip(docs.tolist(), first.tolist(), counts.tolist(), strict=True)
    }


@dataclass(frozen=True)
class CutSpec:
    """GPT-3's cut: `window` characters each side of a match; pieces under `min_chars` go;
    more than `max_pieces` pieces and the document goes whole."""

    window: int = 200
    min_chars: int = 200
    max_pieces: int = 10


def cut(text: str, indexes: list[NgramIndex], n: int, spec: CutSpec) -> str | None:
    """`text` without its matching spans and their windows; None when nothing usable is left."""
    parts, spans = word_char_spans(text)
    grams = hash_canonical([b" ".join(parts)], n)
    matched = np.zeros(len(grams.hashes), dtype=bool)
    for index in indexes:
        matched |= index.lookup(grams.hashes) >= 0
    if not matched.any():
        return None  # detected on the whole text, not found word by word: drop, never keep
    ranges: list[list[int]] = []
    for k in np.flatnonzero(matched).tolist():
        first, last = int(grams.first[k]), int(grams.first[k]) + n - 1
        start = max(0, spans[first][0] - spec.window)
        end = min(len(text), spans[last][1] + spec.window)
        if ranges and start <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], end)
        else:
            ranges.append([start, end])
    pieces, at = [], 0
    for start, end in ranges:
        pieces.append(text[at:start].strip())
        at = end
    pieces.append(text[at:].strip())
    pieces = [p for p in pieces if p]
    if len(pieces) > spec.max_pieces:
        return None
    kept = [p for p in pieces if len(p) >= spec.min_chars]
    return "\n\n".join(kept) if kept else None
