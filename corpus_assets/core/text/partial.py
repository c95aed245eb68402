"""Partial copies: a near duplicate that holds an earlier kept document whole, plus new text.

Near dedup drops a document whose word n-grams match an earlier kept one (Jaccard at or above
the threshold). Some of those are not edited copies: they are the earlier document verbatim
with paragraphs from elsewhere added (a reply quoting the post it answers, a digest, a page
with a new section). Dropping them loses the new paragraphs; keeping them whole trains on the
earlier text twice. With `[dedup] partial = true` (the default) the shard stage cuts the
paragraphs such a document shares verbatim with the kept one and keeps the rest, when the rest
is new text:

- fewer than half of its n-grams occur in the kept document (the paragraphs of an edited copy
  differ from the originals by a word here and there, so most of their n-grams do), and
- its lines that are not lines of the kept document hold at least MIN_NEW_WORDS words (a copy
  with a footer, a signature or a "share this" line appended to its last paragraph leaves that
  paragraph as the rest: the original's last lines plus a few words of boilerplate), and
- it passes the quality filters (a cut-down footer of a few words does not), and
- it is not an exact copy of a document already kept.

Otherwise the document is dropped as a near duplicate. Paragraphs are separated by blank lines
and compared with whitespace collapsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from corpus_assets.core.text.minhash import shingles
from corpus_assets.core.text.normalize import collapse

MAX_SHARED_NGRAMS = 0.5
"""The new text may share at most this fraction of its n-grams with the kept document."""
MIN_NEW_WORDS = 13
"""The new text's lines not found in the kept document hold at least this many words."""

_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")


def paragraphs(text: str) -> list[str]:
    """The non-empty paragraphs of a text (separated by lines that hold only whitespace)."""
    return [p for p in (part.strip() for part in _PARAGRAPH_BREAK.split(text)) if p]


def has_paragraphs(text: str) -> bool:
    """Whether the text may hold two paragraphs (a line break): else `new_paragraphs` is None."""
    return "\n" in text


def new_paragraphs(
    kept: str,
    copy: str,
    ngram: int,
    kept_shingles: Callable[[], np.ndarray[Any, Any]] | None = None,
) -> str | None:
    """The paragraphs of `copy` not found verbatim in `kept`, when they are new text; else None.

    None means `copy` has no paragraph of `kept` in it (an edited copy, not a composition), or
    what remains after cutting those paragraphs is mostly `kept`'s n-grams again.
    `kept_shingles`: returns `shingles(kept, ngram)` when the caller can get them cheaper; it
    is called only when some paragraphs are cut.
    """
    if not has_paragraphs(copy):
        return None
    own = paragraphs(copy)
    if len(own) < 2:
        return None
    seen = {collapse(p) for p in paragraphs(kept)}
    rest = [p for p in own if collapse(p) not in seen]
    if not rest or len(rest) == len(own):
        return None
    text = "\n\n".join(rest)
    mine = shingles(text, ngram)
    theirs = shingles(kept, ngram) if kept_shingles is None else kept_shingles()
    shared = np.isin(mine, theirs, assume_unique=True).sum()
    if shared >= MAX_SHARED_NGRAMS * mine.size:
        return None
    return text if new_words(kept, text) >= MIN_NEW_WORDS else None


def new_words(kept: str, text: str) -> int:
    """The whitespace-separated words of the lines of `text` that are no line of `kept`
    (lines compared with whitespace collapsed)."""
    lines = {collapse(line) for line in kept.split("\n")}
    return sum(len(line.split()) for line in text.split("\n") if collapse(line) not in lines)
