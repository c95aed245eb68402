"""Boilerplate across documents: lines that occur in more than N documents of a build.

Footers, navigation, "share this" lines and signatures repeat across many documents of a
crawl; each document alone looks fine. With `[filters] boilerplate_max_documents = N` the shard
stage first counts, for every line of at least `boilerplate_min_words` words (whitespace
collapsed), the documents that hold it, over every document it reads; a line held by more
than N documents is boilerplate and is removed from every document before the quality filters
see it (a document left too short is dropped by them, with their reason).

Counting works from disk in bounded memory, as the near-dedup index does: each task's distinct
line hashes (64-bit xxh3 of the collapsed line, once per document) go to a file; the counts
are then taken one hash range at a time, so memory holds one range's hashes, not the build's.
The result, the sorted hashes of the boilerplate lines, is one file that every task reads.
Counts do not depend on document order or on how the documents are split into tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from corpus_assets.core.config import FilterSpec
from corpus_assets.core.store.atomic import atomic_writer

BOILERPLATE = "boilerplate.npy"
"""The sorted hashes of the boilerplate lines, in the stage's task folder."""
RANGE_HASHES = 1 << 22
"""Hashes counted at a time (32 MB): the number of hash ranges follows from the total."""

U64 = np.ndarray[Any, np.dtype[np.uint64]]
_EMPTY: U64 = np.empty(0, dtype=np.uint64)


def line_key(line: str) -> int:
    """The 64-bit hash of a line with its whitespace collapsed."""
    return xxhash.xxh3_64_intdigest(" ".join(line.split()).encode("utf-8", "surrogatepass"))


def document_lines(text: str, min_words: int) -> set[int]:
    """The distinct hashes of the lines of `text` that have at least `min_words` words."""
    return {line_key(line) for line in text.split("\n") if len(line.split()) >= max(min_words, 1)}


def find(
    spec: FilterSpec,
    batches: Iterable[list[str]],
    folder: Path,
    beat: Callable[[str], None] = lambda _msg: None,
) -> U64:
    """Count the lines of every document (`batches`: the texts of one task at a time) and save
    the boilerplate lines' hashes to `folder / BOILERPLATE`; they are returned. An existing
    file (a resumed stage) is read instead."""
    done = folder / BOILERPLATE
    if done.exists():
        return np.asarray(np.load(done), dtype=np.uint64)
    folder.mkdir(parents=True, exist_ok=True)
    limit, min_words = spec.boilerplate_max_documents, spec.boilerplate_min_words or 1
    assert limit is not None
    parts: list[Path] = []
    for k, texts in enumerate(batches):
        beat(f"boilerplate: counting lines (task {k:,})")
        hashes = [h for text in texts for h in document_lines(text, min_words)]
        parts.append(folder / f"lines-{k:06d}.npy")
        _save(parts[-1], np.array(hashes, dtype=np.uint64))
    found = _count(parts, limit, beat)
    _save(done, found)
    for part in parts:
        part.unlink()
    return found


def _count(parts: list[Path], limit: int, beat: Callable[[str], None]) -> U64:
    """Hashes held by more than `limit` documents, counted one range of hash values at a time."""
    total = sum(int(np.load(p, mmap_mode="r").shape[0]) for p in parts)
    bits = max(0, int(np.ceil(np.log2(max(total, 1) / RANGE_HASHES))))
    found: list[U64] = []
    for r in range(1 << bits):
        beat(f"boilerplate: counting hash range {r + 1:,} of {1 << bits:,}")
        chunk = [_in_range(np.load(p, mmap_mode="r"), r, bits) for p in parts]
        values, counts = np.unique(np.concatenate([_EMPTY, *chunk]), return_counts=True)
        found.append(values[counts > limit])
    return np.sort(np.concatenate([_EMPTY, *found]))


def _in_range(hashes: U64, r: int, bits: int) -> U64:
    if bits == 0:
        return np.asarray(hashes)
    return np.asarray(hashes[(hashes >> np.uint64(64 - bits)) == np.uint64(r)])


def _save(path: Path, array: U64) -> None:
    with atomic_writer(path, sync_dir=False) as fh:
        np.save(fh, array, allow_pickle=False)


class Stripper:
    """Called on a text: (the text without its boilerplate lines, how many lines went)."""

    def __init__(self, hashes: U64, min_words: int) -> None:
        self.keys = {int(h) for h in hashes}
        self.min_words = max(min_words, 1)

    def __call__(self, text: str) -> tuple[str, int]:
        if not self.keys:
            return text, 0
        lines = text.split("\n")
        kept = [
            line
            for line in lines
            if len(line.split()) < self.min_words or line_key(line) not in self.keys
        ]
        if len(kept) == len(lines):
            return text, 0
        return "\n".join(kept), len(lines) - len(kept)


def stripper(spec: FilterSpec, folder: Path) -> Stripper | None:
    """The boilerplate remover of a build whose lines were counted into `folder`; None when
    `boilerplate_max_documents` is not set."""
    if not spec.enabled or spec.boilerplate_max_documents is None:
        return None
    return Stripper(np.load(folder / BOILERPLATE), spec.boilerplate_min_words or 1)
