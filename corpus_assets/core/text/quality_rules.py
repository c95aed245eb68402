"""The statistics of datatrove's Gopher repetition/quality, C4 quality and FineWeb quality filters.

A text is split once (`Split`: its tokens, lines and word n-grams, each made on first use) and
every rule reads the pieces it needs; `filters.py` compares the statistics with the thresholds.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from corpus_assets.core.text import en_words

STOP_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))
# datatrove.utils.text.TERMINAL_PUNCTUATION (Unicode's Terminal_Punctuation sentence enders)
TERMINAL_PUNCTUATION = frozenset(
    "!.?\u0589\u061d\u061e\u061f\u06d4\u0700\u0701\u0702\u07f9\u0837\u0839\u083d\u083e\u0964"
    "\u0965\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4\u17d5\u17d6\u17d9\u17da\u1803"
    "\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b\u1b5e\u1b5f\u1b7d\u1b7e\u1c3b\u1c3c"
    "\u1c7e\u1c7f\u203c\u203d\u2047\u2048\u2049\u2e2e\u2e3c\u2e53\u2e54\u3002\ua4ff\ua60e\ua60f"
    "\ua6f3\ua6f7\ua876\ua877\ua8ce\ua8cf\ua92f\ua9c8\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb"
    "\ufe52\ufe56\ufe57\uff01\uff0e\uff1f\uff61\U00010a56\U00010a57\U00010f55\U00010f56"
    "\U00010f57\U00010f58\U00010f59\U00010f86\U00010f87\U00010f88\U00010f89\U00011047\U00011048"
    "\U000110be\U000110bf\U000110c0\U000110c1\U00011141\U00011142\U00011143\U000111c5\U000111c6"
    "\U000111cd\U000111de\U000111df\U00011238\U00011239\U0001123b\U0001123c\U000112a9\U0001144b"
    "\U0001144c\U000115c2\U000115c3\U000115c9\U000115ca\U000115cb\U000115cc\U000115cd\U000115ce"
    "\U000115cf\U000115d0\U000115d1\U000115d2\U000115d3\U000115d4\U000115d5\U000115d6\U000115d7"
    "\U00011641\U00011642\U0001173c\U0001173d\U0001173e\U00011944\U00011946\U00011a42\U00011a43"
    "\U00011a9b\U00011a9c\U00011c41\U00011c42\U00011ef7\U00011ef8\U00011f43\U00011f44\U00016a6e"
    "\U00016a6f\U00016af5\U00016b37\U00016b38\U00016b44\U00016e98\U0001bc9f\U0001da88"
)
# Words as NLTK's word_tokenize finds them, near enough: runs of word characters (joined by
# inner hyphens, apostrophes, points or commas: "well-known", "3.14", "1,000"), "...", and each
# other punctuation mark on its own.
_TOKEN = re.compile(r"\w+(?:[-'’.,]\w+)*|\.\.\.|[^\w\s]")
_PARAGRAPH_BREAK = re.compile(r"\n{2,}")
_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_POLICY = re.compile(
    "terms of use|privacy policy|cookie policy|uses cookies|use of cookies|use cookies"
)
_SENTENCE_END = re.compile(r"[.!?]+['\")\]]*(?=\s|$)")
_C4_END = (".", "?", "!", '"', "'")
_BULLETS = ("•", "-")
_ELLIPSES = ("...", "…")


class Split:
    """One text's pieces, each computed once on first use and shared by every rule."""

    def __init__(self, text: str, most_ngram: int = 10) -> None:
        self.text = text
        self.most_ngram = most_ngram

    @cached_property
    def tokens(self) -> list[str]:
        return _TOKEN.findall(self.text)

    @cached_property
    def words(self) -> list[str]:
        return self.text.split()

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @cached_property
    def ngrams(self) -> NGrams:
        return NGrams(self.tokens, self.most_ngram)

    @cached_property
    def filled_lines(self) -> list[str]:
        """Lines split at '\\n' that hold more than whitespace (FineWeb's lines)."""
        return [line for line in self.text.split("\n") if line and not line.isspace()]


def duplicates(items: list[str]) -> tuple[int, int]:
    """How many items, and how many of their characters, repeat an earlier item."""
    if len(set(items)) == len(items):
        return 0, 0
    seen: set[str] = set()
    count = chars = 0
    for item in items:
        if item in seen:
            count += 1
            chars += len(item)
        else:
            seen.add(item)
    return count, chars


def paragraph_duplicates(split: Split) -> tuple[float, float]:
    """Fractions of paragraphs (split at 2+ newlines), and of all characters, that repeat."""
    paragraphs = _PARAGRAPH_BREAK.split(split.text.strip())
    count, chars = duplicates(paragraphs)
    return count / len(paragraphs), chars / max(len(split.text), 1)


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it mod 2**64 loses nothing


class NGrams:
    """Word n-grams for n = 1..most, all at once: an n-gram is a 64-bit polynomial hash of its
    words' hashes, so equal n-grams have equal keys and unequal ones differ but for a collision
    (about m**2 / 2**64 for m words); one sort of all the keys counts every n-gram."""

    def __init__(self, words: list[str], most: int = 10) -> None:
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        self.cum: list[int] = [0, *np.cumsum(lengths).tolist()]
        self.m = m = len(words)
        self.most = most = min(most, m)
        if not m:
            return
        # str's hash is SipHash: equal words, equal hashes; unequal ones collide at 2**-64
        mixed = np.fromiter(map(hash, words), dtype=np.int64, count=m).view(np.uint64)
        keys = np.empty((most, m), dtype=np.uint64)
        keys[0] = mixed
        tail = ~np.arange(m, dtype=np.uint64)  # the missing n-grams at the end: all different
        for n in range(1, most):
            np.multiply(keys[n - 1, : m - n], _MIX, out=keys[n, : m - n])
            keys[n, : m - n] += mixed[n:]
            keys[n, m - n :] = tail[:n]
        order = (keys.argsort(axis=1) + (np.arange(most) * m)[:, None]).ravel()
        ordered = keys.ravel()[order].reshape(most, m)
        starts = np.ones((most, m), dtype=bool)
        np.not_equal(ordered[:, 1:], ordered[:, :-1], out=starts[:, 1:])
        ids = np.empty(most * m, dtype=np.int64)
        ids[order] = starts.ravel().cumsum()  # a number per n-gram, unique across the rows
        self.ids = ids.reshape(most, m)
        self.counts = np.bincount(ids)[self.ids]  # per position: its n-gram's count
        rows: Any = (self.counts > 1).any(axis=1)
        self.repeats: list[bool] = rows.tolist()

    def chars(self, i: int, n: int) -> int:
        """Characters of the words of the n-gram at position i (no separators)."""
        return self.cum[i + n] - self.cum[i]

    def top_chars(self, n: int) -> int | None:
        """Characters of the most frequent n-gram (words joined by spaces) times its count; of
        equally frequent ones the first. None when the text has fewer than n words."""
        if n > self.m:
            return None
        counts = self.counts[n - 1, : self.m - n + 1]
        top = int(counts.max())
        i = int(np.argmax(counts == top))  # the first place of the first of them
        return (self.chars(i, n) + n - 1) * top

    def duplicate_chars(self, n: int) -> int:
        """Characters (separators not counted) of the n-grams that repeat an earlier one, read
        left to right; a repeat's n words are not looked at again."""
        if n > self.m or not self.repeats[n - 1]:
            return 0
        counts = self.counts[n - 1, : self.m - n + 1]
        repeated = np.flatnonzero(counts > 1)  # an n-gram seen once never repeats
        if not len(repeated):
            return 0
        keys = self.ids[n - 1]
        seen: set[int] = set()
        total = nxt = 0
        for p, key in zip(repeated.tolist(), keys[repeated].tolist(), strict=True):
            if p < nxt:
                continue
            if key in seen:
                total += self.chars(p, n)
                nxt = p + n
            else:
                seen.add(key)
                nxt = p + 1
        return total


def stop_words(split: Split) -> int:
    """How many different stop words are tokens of the text (case as written)."""
    return len(STOP_WORDS.intersection(split.tokens))


def alpha_token_ratio(split: Split) -> float:
    """Fraction of the text's English tokens (spaCy's split, `en_words`) that hold a letter: a
    punctuation mark is a token without one; 1 for a text without tokens."""
    total, alpha = en_words.alpha_token_counts(split.words)
    return alpha / total if total else 1.0


def bullet_line_ratio(split: Split) -> float:
    """Fraction of lines that start, after whitespace, with '•' or '-'."""
    lines = split.lines
    return sum(line.lstrip().startswith(_BULLETS) for line in lines) / max(len(lines), 1)


def ellipsis_line_ratio(split: Split) -> float:
    """Fraction of lines that end, before whitespace, with '...' or '…'."""
    lines = split.lines
    return sum(line.rstrip().endswith(_ELLIPSES) for line in lines) / max(len(lines), 1)


def line_punctuation_ratio(split: Split) -> float:
    """Fraction of FineWeb's lines whose last character is terminal punctuation."""
    lines = split.filled_lines
    return sum(line[-1] in TERMINAL_PUNCTUATION for line in lines) / max(len(lines), 1)


def short_line_ratio(split: Split, length: int) -> float:
    """Fraction of FineWeb's lines of at most `length` characters."""
    lines = split.filled_lines
    return sum(len(line) <= length for line in lines) / max(len(lines), 1)


def char_duplicate_ratio(split: Split) -> float:
    """Characters in repeated FineWeb lines, per character that is not a newline."""
    text = split.text
    return duplicates(split.filled_lines)[1] / max(len(text) - text.count("\n"), 1)


def newline_word_ratio(split: Split) -> float:
    """Newlines per word (FineWeb's list ratio)."""
    return split.text.count("\n") / max(len(split.tokens), 1)


def sentences(line: str) -> int:
    """Sentences in a stripped line: runs of '.', '!', '?' (and closing quotes or brackets)
    before whitespace or the end, plus a last sentence left open."""
    if not line:
        return 0
    ends = _SENTENCE_END.findall(line)
    return len(ends) + (0 if ends and line.endswith(ends[-1]) else 1)


@dataclass(frozen=True)
class C4Rules:
    """C4's line rules (a line failing one is removed) and document rules (the text is dropped);
    None or False leaves a rule out."""

    max_word_length: int | None = None
    remove_citations: bool = False
    terminal_punctuation: bool = False
    min_words_per_line: int | None = None
    lorem_ipsum: bool = False
    javascript: bool = False
    curly_bracket: bool = False
    policy: bool = False
    min_sentences: int | None = None

    @property
    def edits_lines(self) -> bool:
        """Whether the text is rewritten: lines stripped, removed, their citations cut."""
        return (
            self.max_word_length is not None
            or self.remove_citations
            or self.terminal_punctuation
            or self.min_words_per_line is not None
            or self.javascript
            or self.policy
        )

    @property
    def active(self) -> bool:
        return (
            self.edits_lines
            or self.lorem_ipsum
            or self.curly_bracket
            or self.min_sentences is not None
        )


LINE_LONG_WORD = "long_word"
LINE_NO_TERMINAL_PUNCTUATION = "no_terminal_punctuation"
LINE_TOO_FEW_WORDS = "too_few_words"
LINE_JAVASCRIPT = "javascript"
LINE_POLICY = "policy"
LINE_REASONS = (
    LINE_LONG_WORD,
    LINE_NO_TERMINAL_PUNCTUATION,
    LINE_TOO_FEW_WORDS,
    LINE_JAVASCRIPT,
    LINE_POLICY,
)


def c4_pass(text: str, rules: C4Rules, removed: Counter[str]) -> tuple[str, str | None]:
    """(the text with C4's failing lines removed, None) or (text, the document rule it fails:
    'lorem_ipsum', 'curly_bracket', 'too_few_sentences'); removed lines counted by reason."""
    kept: list[str] = []
    found = 0
    lowered = rules.lorem_ipsum or rules.javascript or rules.policy
    longest, fewest = rules.max_word_length, rules.min_words_per_line
    cut: Counter[str] = Counter()
    for raw in text.splitlines():
        line = raw.strip()
        words = line.split()
        if longest is not None and len(line) > longest and max(map(len, words)) > longest:
            cut[LINE_LONG_WORD] += 1
            continue
        if rules.remove_citations:
            line = _CITATION.sub("", line)
        if rules.terminal_punctuation and (not line.endswith(_C4_END) or line.endswith("...")):
            cut[LINE_NO_TERMINAL_PUNCTUATION] += 1
            continue
        if fewest is not None and len(words) < fewest:
            cut[LINE_TOO_FEW_WORDS] += 1
            continue
        lower = line.lower() if lowered else line
        if rules.lorem_ipsum and "lorem ipsum" in lower:
            return text, "lorem_ipsum"
        if rules.javascript and "javascript" in lower:
            cut[LINE_JAVASCRIPT] += 1
            continue
        if rules.curly_bracket and "{" in line:
            return text, "curly_bracket"
        if rules.policy and _POLICY.search(lower):
            cut[LINE_POLICY] += 1
            continue
        if rules.min_sentences is not None:
            found += sentences(line)
        kept.append(line)
    if rules.min_sentences is not None and found < rules.min_sentences:
        return text, "too_few_sentences"
    removed.update(cut)
    return ("\n".join(kept).strip() if rules.edits_lines else text), None
