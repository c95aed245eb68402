"""Word n-gram hashes for decontamination, vectorized over a batch of documents.

Words are compared normalized: Unicode NFKC, lowercase, every character that is not a letter or a
digit (punctuation, symbols, `_`, whitespace) a word boundary. An n-gram is `n` consecutive words
of one document; its 64-bit hash is a polynomial over the words' own 64-bit hashes, each of
those a polynomial over the word's UTF-8 bytes, mixed (splitmix64). Everything runs in numpy over
the concatenated bytes of a batch: a few array passes per batch, no Python call per word.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

U64 = np.uint64
Array = np.ndarray[Any, Any]
_BYTE_BASE = U64(0x100000001B3)  # odd: invertible modulo 2**64
_WORD_BASE = U64(0x9E3779B97F4A7C15 | 1)
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
    """The n-gram hashes of a batch: `hashes[i]` belongs to document `doc[i]`, word `first[i]`."""

    hashes: Array
    doc: Array
    first: Array
    word_spans: Array | None = None  # (words, 2) byte offsets into the batch bytes


def _mix(x: Array) -> Array:
    """splitmix64's finalizer, elementwise (uint64 arithmetic wraps)."""
    x = x ^ (x >> U64(30))
    x = x * U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> U64(27))
    x = x * U64(0x94D049BB133111EB)
    out: Array = x ^ (x >> U64(31))
    return out


def _powers(base: np.uint64, count: int) -> Array:
    out = np.full(count, base, dtype=U64)
    out[0] = 1
    with np.errstate(over="ignore"):
        return np.cumprod(out, dtype=U64)


def _inverse(base: np.uint64) -> np.uint64:
    return U64(pow(int(base), -1, 2**64))


def hash_canonical(parts: list[bytes], n: int, keep_spans: bool = False) -> Ngrams:
    """The word n-gram hashes of already `canonical` documents (see module docstring)."""
    empty = np.zeros(0, dtype=U64)
    data = b" ".join(parts)
    if not data or n < 1:
        return Ngrams(empty, empty.astype(np.int64), empty.astype(np.int64))
    b = np.frombuffer(data, dtype=np.uint8)
    is_word = _IS_WORD_BYTE[b]
    edge = np.diff(is_word.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
    if len(starts) < n:
        return Ngrams(empty, empty.astype(np.int64), empty.astype(np.int64))
    with np.errstate(over="ignore"):
        pw = _powers(_BYTE_BASE, len(b) + 1)
        prefix = np.zeros(len(b) + 1, dtype=U64)
        np.cumsum(b.astype(U64) * pw[:-1], out=prefix[1:])
        inv = _powers(_inverse(_BYTE_BASE), len(b) + 1)
        word = _mix((prefix[ends] - prefix[starts]) * inv[starts] + U64(ends - starts))
        wp = _powers(_WORD_BASE, len(word) + 1)
        wprefix = np.zeros(len(word) + 1, dtype=U64)
        np.cumsum(word * wp[:-1], out=wprefix[1:])
        winv = _powers(_inverse(_WORD_BASE), len(word) + 1)
        k = np.arange(len(word) - n + 1)
        grams = _mix((wprefix[k + n] - wprefix[k]) * winv[k])
    offsets = np.cumsum([0] + [len(p) + 1 for p in parts[:-1]])
    doc_of_word = np.searchsorted(offsets, starts, side="right") - 1
    same = doc_of_word[k] == doc_of_word[k + n - 1]
    spans = np.stack([starts, ends], axis=1) if keep_spans else None
    return Ngrams(grams[same], doc_of_word[k[same]], k[same], spans)


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
