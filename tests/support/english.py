"""spaCy's blank English pipeline, the reference for our English tokens (a dev dependency)."""

from __future__ import annotations

from typing import Any

from support.environment import unavailable

_ENGLISH: list[Any] = []


def english() -> Any:
    """`spacy.blank("en")`, loaded once; without spaCy a skip (a failure under CI)."""
    if not _ENGLISH:
        try:
            import spacy
        except ImportError:
            unavailable("spaCy is not installed: pip install -e '.[dev]'")
        _ENGLISH.append(spacy.blank("en"))
    return _ENGLISH[0]
