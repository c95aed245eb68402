"""Word n-gram hashes for decontamination, vectorized over a batch of documents.

Words are compared normalized: Unicode NFKC, lowercase, every character that is not a letter or a
digit (punctuation, symbols, `_`, whitespace) a word boundary. An n-gram is `n` consecutive words
of one document; its 64-bit hash is a polynomial (mod 2**64) over the words' own 64-bit hashes,
mixed (splitmix64); a word's hash is its 8-byte blocks times fixed odd weights plus its length,
mixed. Everything runs in numpy over the concatenated bytes of a batch (as the MinHash shingles
do): one pass over the bytes to find the words, then a few passes per word; no Python call per
word.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

HASH_VERSION = 3  # changes whenever the hash of a word n-gram changes (eval indexes are rebuilt)
U64 = np.uint64
Array = np.ndarray[Any, Any]
_WORD_BASE = U64(0x9E3779B97F4A7C15 | 1)
_WORD_MIX = U64(0xD6E8FEB86659FD93)
_NON_WORD = re.compile(r"[\W_]+")
_WORD = re.compile(r"[^\W_]+")
_IS_WORD_BYTE = np.zeros(256, dtype=bool)
for _c in b"abcdefghijklmnopqrstuvwxyz0123456789":
    _IS_WORD_BYTE[_c] = True
_IS_WORD_BYTE[128:] = True  # only letters and digits are left outside ASCII (see `canonical`)


def canonical(text: str) -> bytes:
    """The text as its n-grams see it: NFKC, lowercase, non-word characters as spaces (UTF-8).

    ASCII text is only lowercased: its punctuation bytes are word boundaries in `_IS_WORD_BYTE`.
    """
    if text.isascii():
        return text.lower().encode("ascii")
    text = unicodedata.normalize("NFKC", text).lower()
    return _NON_WORD.sub(" ", text).encode("utf-8")


def words(text: str) -> list[str]:
    """The normalized words of `text` (for tests and messages; the hashes never build these)."""
    return canonical(text).decode("utf-8").translate(_ASCII_PUNCT).split()


_ASCII_PUNCT = {c: " " for c in range(128) if not _IS_WORD_BYTE[c]}


@dataclass(frozen=True)
class Ngrams:
    """The n-gram hashes of a batch: `hashes[i]` belongs to document `doc[i]` and starts at word
    `first[i]` (counted in the document's chunk: in the document itself when it is alone)."""

    hashes: Array
    doc: Array
    first: Array


def _mix(x: Array) -> Array:
    """splitmix64's finalizer, elementwise (uint64 arithmetic wraps)."""
    x = x ^ (x >> U64(30))
    x = x * U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> U64(27))
    x = x * U64(0x94D049BB133111EB)
    out: Array = x ^ (x >> U64(31))
    return out


_NONE = Ngrams(np.zeros(0, dtype=U64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
CHUNK_BYTES = 1 << 20  # documents are hashed in chunks of about this many bytes (cache-sized)
_POWERS: dict[int, tuple[Array, Array]] = {}


def _powers(base: np.uint64, count: int) -> tuple[Array, Array]:
    """`base**i` and `base**-i` modulo 2**64 for i < count; cached per base, grown by doubling."""
    cached = _POWERS.get(int(base))
    if cached is None or len(cached[0]) < count:
        size = max(count, 2 * len(cached[0]) if cached is not None else 1 << 16)
        out = np.full(size, base, dtype=U64)
        out[0] = 1
        inv = np.full(size, U64(pow(int(base), -1, 2**64)), dtype=U64)
        inv[0] = 1
        cached = (np.cumprod(out, dtype=U64), np.cumprod(inv, dtype=U64))
        _POWERS[int(base)] = cached
    return cached


def _word_hashes(b: Array, starts: Array, lengths: Array) -> Array:
    """A 64-bit hash of each word: its 8-byte blocks times per-block odd weights, plus its
    length, mixed (splitmix64). The blocks are read as uint64 windows of the buffer, so the
    work is per word and per 8 bytes, never per byte."""
    windows = np.ndarray((len(b) - 7,), dtype="<u8", buffer=b.data, strides=(1,))
    weights = _block_weights(int(lengths.max()) // 8 + 1)
    summed = (windows[starts] & _LOW_BYTES[np.minimum(lengths, 8)]) * weights[0]
    longer = np.flatnonzero(lengths > 8)
    if len(longer):
        blocks = (lengths[longer] - 1) // 8  # blocks after the first
        first = np.cumsum(blocks) - blocks
        block = np.arange(1, int(blocks.sum()) + 1) - np.repeat(first, blocks)
        at = np.repeat(starts[longer], blocks) + 8 * block
        left = np.minimum(np.repeat(lengths[longer], blocks) - 8 * block, 8)
        summed[longer] += np.add.reduceat((windows[at] & _LOW_BYTES[left]) * weights[block], first)
    return _mix(summed + lengths.astype(U64) * _LENGTH_WEIGHT)


_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=U64)
_LENGTH_WEIGHT = U64(0xA0761D6478BD642F)
_WEIGHTS: list[Array] = [np.zeros(0, dtype=U64)]


def _block_weights(count: int) -> Array:
    """Odd pseudo-random 64-bit weights of a word's 8-byte blocks (splitmix64 of 1, 2, ...)."""
    if len(_WEIGHTS[0]) < count:
        size = max(count, 64)
        _WEIGHTS[0] = _mix(np.arange(1, size + 1, dtype=U64) * _WORD_MIX) | U64(1)
    return _WEIGHTS[0]


def hash_canonical(parts: list[bytes], n: int) -> Ngrams:
    """The word n-gram hashes of already `canonical` documents (see module docstring)."""
    out: list[Ngrams] = []
    chunk: list[bytes] = []
    size = first_doc = 0
    for i, part in enumerate(parts):
        chunk.append(part)
        size += len(part) + 1
        if size >= CHUNK_BYTES or i == len(parts) - 1:
            out.append(_hash_chunk(chunk, n, first_doc))
            first_doc, chunk, size = i + 1, [], 0
    if len(out) == 1:
        return out[0]
    if not out:
        return _NONE
    return Ngrams(
        np.concatenate([g.hashes for g in out]),
        np.concatenate([g.doc for g in out]),
        np.concatenate([g.first for g in out]),
    )


def _hash_chunk(parts: list[bytes], n: int, first_doc: int) -> Ngrams:
    """The n-grams of one chunk; `doc` counts from `first_doc`, `first` is the chunk's word."""
    data = b" ".join([b"", *parts, bytes(8)])  # a boundary each side; 8 bytes to read at the end
    b = np.frombuffer(data, dtype=np.uint8)
    edges = np.flatnonzero(np.diff(np.frombuffer(data.translate(_WORD_FLAG), dtype=np.int8))) + 1
    starts, ends = edges[0::2], edges[1::2]  # padded: boundaries alternate start, end
    words = len(starts)
    if words < n or n < 1:
        return _NONE
    word = _word_hashes(b, starts, ends - starts)
    wp, winv = _powers(_WORD_BASE, words + 1)
    wprefix = np.empty(words + 1, dtype=U64)
    wprefix[0] = 0
    np.cumsum(word * wp[:words], out=wprefix[1:])
    count = words - n + 1
    grams = _mix((wprefix[n:] - wprefix[:count]) * winv[:count])
    lengths = np.fromiter((len(p) + 1 for p in parts), np.int64, len(parts))
    per_doc = np.diff(np.searchsorted(starts, np.cumsum(lengths)), prepend=0)
    doc = np.repeat(np.arange(first_doc, first_doc + len(parts)), per_doc)
    same = np.flatnonzero(doc[:count] == doc[n - 1 :])
    return Ngrams(grams[same], doc[same], same)


def ngram_hashes(texts: list[str], n: int) -> Ngrams:
    """The word n-gram hashes of `texts` (documents shorter than `n` words have none)."""
    return hash_canonical([canonical(t) for t in texts], n)


def word_char_spans(text: str) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Canonical words of `text` with the character span each comes from (for cutting).

    Each letter/digit run is normalized on its own, so a word maps back to where it was written.
    """
    parts: list[bytes] = []
    spans: list[tuple[int, int]] = []
    for m in _WORD.finditer(text):
        for w in canonical(m.group()).split():
            for piece in w.translate(_ASCII_TABLE).split():
                parts.append(piece)
                spans.append(m.span())
    return parts, spans


_ASCII_TABLE = bytes(c if _IS_WORD_BYTE[c] else 32 for c in range(256))
_WORD_FLAG = bytes(1 if _IS_WORD_BYTE[c] else 0 for c in range(256))
