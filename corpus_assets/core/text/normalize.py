"""Text normalization before filtering, and the key that exact dedup compares."""

from __future__ import annotations

import unicodedata

import xxhash


def normalize(text: str) -> str:
    """Unicode NFC, `\\r\\n`/`\\r` line endings to `\\n`, outer whitespace stripped."""
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


def collapse(text: str) -> str:
    """Every run of whitespace as one space: copies differing only in spacing compare equal."""
    return " ".join(text.split())


def exact_key(text: str) -> bytes:
    """A 128-bit digest of the collapsed text of an already normalized document."""
    return xxhash.xxh3_128_digest(collapse(text).encode("utf-8"))
