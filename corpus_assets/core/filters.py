"""Gopher/C4-style quality filters: each document is kept (None) or dropped with a named reason."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from functools import cached_property

from corpus_assets.core.config import FilterSpec

TOO_FEW_CHARS = "too_few_chars"
TOO_MANY_CHARS = "too_many_chars"
TOO_FEW_WORDS = "too_few_words"
TOO_MANY_WORDS = "too_many_words"
MEAN_WORD_LENGTH = "mean_word_length"
SYMBOL_WORD_RATIO = "symbol_word_ratio"
DUPLICATE_LINES = "duplicate_lines"
NON_ALPHA_WORDS = "non_alpha_words"
REASONS = (
    TOO_FEW_CHARS,
    TOO_MANY_CHARS,
    TOO_FEW_WORDS,
    TOO_MANY_WORDS,
    MEAN_WORD_LENGTH,
    SYMBOL_WORD_RATIO,
    DUPLICATE_LINES,
    NON_ALPHA_WORDS,
)
"""Every drop reason, in the order the checks run."""

# Gopher counts '#', '...' and '…'; runs of 3+ symbol characters catch "symbol soup". The run
# pattern starts with a plain character class so the regex engine can scan for it quickly.
_SYMBOL = "[#$%&*@!{}\\[\\]<>|~^\\\\]"
_SYMBOL_RUN = re.compile(f"{_SYMBOL}{_SYMBOL}+{_SYMBOL}")
# A word (in words joined by single spaces) with no letter: only digits, '_' or non-word chars.
_NON_ALPHA_WORD = re.compile(r" (?:[^\w ]|[\d_])+(?= )")

Check = Callable[["Doc"], str | None]
Filter = Callable[[str], str | None]


class Doc:
    """One text with its whitespace-separated words, and their space-joined form on demand."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.words = text.split()

    @cached_property
    def joined(self) -> str:
        return " ".join(self.words)


def make_filter(spec: FilterSpec) -> Filter:
    """A function of one text: None to keep it, or the reason of the first check it fails."""
    if not spec.enabled:
        return _keep_all
    checks = _checks(spec)

    def check(text: str) -> str | None:
        doc = Doc(text)
        for run in checks:
            reason = run(doc)
            if reason is not None:
                return reason
        return None

    return check


def _keep_all(text: str) -> str | None:
    return None


def _checks(spec: FilterSpec) -> list[Check]:
    """The enabled checks, cheapest first; a threshold of None leaves its check out."""
    checks: list[Check] = []
    _bounded(checks, _n_chars, spec.min_chars, spec.max_chars, TOO_FEW_CHARS, TOO_MANY_CHARS)
    _bounded(checks, _n_words, spec.min_words, spec.max_words, TOO_FEW_WORDS, TOO_MANY_WORDS)
    low, high = spec.min_mean_word_length, spec.max_mean_word_length
    _bounded(checks, mean_word_length, low, high, MEAN_WORD_LENGTH, MEAN_WORD_LENGTH)
    _bounded(checks, symbol_word_ratio, None, spec.max_symbol_word_ratio, "", SYMBOL_WORD_RATIO)
    lines, chars = spec.max_duplicate_line_fraction, spec.max_duplicate_line_char_fraction
    if lines is not None or chars is not None:
        checks.append(_duplicate_check(lines, chars))
    _bounded(checks, non_alpha_word_ratio, None, spec.max_non_alpha_word_ratio, "", NON_ALPHA_WORDS)
    return checks


def _bounded(
    checks: list[Check],
    measure: Callable[[Doc], float],
    low: float | None,
    high: float | None,
    below: str,
    above: str,
) -> None:
    """Append a check that `measure` lies within [low, high] (either side may be None)."""
    if low is None and high is None:
        return

    def check(doc: Doc) -> str | None:
        value = measure(doc)
        if low is not None and value < low:
            return below
        if high is not None and value > high:
            return above
        return None

    checks.append(check)


def _duplicate_check(max_lines: float | None, max_chars: float | None) -> Check:
    """Drop when too many lines, or too many characters, are repeats of earlier lines."""

    def check(doc: Doc) -> str | None:
        line_fraction, char_fraction = duplicate_line_fractions(doc.text)
        if max_lines is not None and line_fraction > max_lines:
            return DUPLICATE_LINES
        if max_chars is not None and char_fraction > max_chars:
            return DUPLICATE_LINES
        return None

    return check


def _n_chars(doc: Doc) -> float:
    return len(doc.text)


def _n_words(doc: Doc) -> float:
    return len(doc.words)


def mean_word_length(doc: Doc) -> float:
    """Mean length of whitespace-separated words (0 for no words)."""
    n = len(doc.words)
    return (len(doc.joined) - n + 1) / n if n else 0.0


def symbol_word_ratio(doc: Doc) -> float:
    """Symbols per word: each '#', '...', '…' and each run of 3+ symbol characters counts."""
    text = doc.text
    symbols = text.count("#") + text.count("...") + text.count("…")
    return (symbols + len(_SYMBOL_RUN.findall(text))) / max(len(doc.words), 1)


def non_alpha_word_ratio(doc: Doc) -> float:
    """Fraction of words without a single letter (of any script)."""
    if not doc.words:
        return 0.0
    return len(_NON_ALPHA_WORD.findall(f" {doc.joined} ")) / len(doc.words)


def duplicate_line_fractions(text: str) -> tuple[float, float]:
    """Fractions of non-blank lines, and of their characters, that repeat an earlier line."""
    lines = chars = repeated_lines = repeated_chars = 0
    for line, n in Counter(text.splitlines()).items():
        if line and not line.isspace():
            lines += n
            chars += n * len(line)
            if n > 1:
                repeated_lines += n - 1
                repeated_chars += (n - 1) * len(line)
    return repeated_lines / max(lines, 1), repeated_chars / max(chars, 1)
