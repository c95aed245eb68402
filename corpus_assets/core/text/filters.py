"""Gopher/C4-style quality filters: each document is kept (None) or dropped with a named reason."""

from __future__ import annotations

import re
from collections.abc import Callable

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

# Gopher counts '#', '...' and '…'; each 3 symbol characters in a row add one more ("symbol
# soup"). Counted on bytes mapped to 's' (symbol) or 'x' (anything else): C speed, no Python loop.
_SYMBOL_CHARS = b"#$%&*@!{}[]<>|~^\\"
_SYMBOL_TABLE = bytes(ord("s") if b in _SYMBOL_CHARS else ord("x") for b in range(256))
# ASCII text mapped to 'a' (letter) and ' ' (whitespace), all else deleted: one word with a letter
# is one run of 'a'. Other text takes the regex over its words joined by single spaces.
_ASCII = [chr(b) for b in range(128)]
_ALPHA_TABLE = bytes(
    ord("a") if c.isalpha() else ord(" ") if c.isspace() else b for b, c in enumerate(_ASCII)
) + bytes(range(128, 256))
_NOT_ALPHA_OR_SPACE = bytes(b for b, c in enumerate(_ASCII) if not (c.isalpha() or c.isspace()))
_NON_ALPHA_WORD = re.compile(r" (?:[^\w ]|[\d_])+(?= )")

Words = list[str]
Check = Callable[[str, Words], str | None]
Filter = Callable[[str], str | None]


def make_filter(spec: FilterSpec) -> Filter:
    """A function of one text: None to keep it, or the reason of the first check it fails."""
    if not spec.enabled:
        return _keep_all
    low, high = spec.min_chars, spec.max_chars
    checks = _checks(spec)

    def check(text: str) -> str | None:
        # characters first, before the words are split: a huge document costs no word list
        if low is not None and len(text) < low:
            return TOO_FEW_CHARS
        if high is not None and len(text) > high:
            return TOO_MANY_CHARS
        words = text.split()
        for run in checks:
            reason = run(text, words)
            if reason is not None:
                return reason
        return None

    return check


def _keep_all(text: str) -> str | None:
    return None


def _checks(spec: FilterSpec) -> list[Check]:
    """The enabled checks after the characters', cheapest first; a threshold of None leaves
    its check out."""
    checks: list[Check] = []
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
    measure: Callable[[str, Words], float],
    low: float | None,
    high: float | None,
    below: str,
    above: str,
) -> None:
    """Append a check that `measure` lies within [low, high] (either side may be None)."""
    if low is None and high is None:
        return

    def check(text: str, words: Words) -> str | None:
        value = measure(text, words)
        if low is not None and value < low:
            return below
        if high is not None and value > high:
            return above
        return None

    checks.append(check)


def _duplicate_check(max_lines: float | None, max_chars: float | None) -> Check:
    """Drop when too many lines, or too many characters, are repeats of earlier lines."""

    def check(text: str, words: Words) -> str | None:
        line_fraction, char_fraction = duplicate_line_fractions(text)
        if max_lines is not None and line_fraction > max_lines:
            return DUPLICATE_LINES
        if max_chars is not None and char_fraction > max_chars:
            return DUPLICATE_LINES
        return None

    return check


def _n_words(text: str, words: Words) -> float:
    return len(words)


def mean_word_length(text: str, words: Words) -> float:
    """Mean length of whitespace-separated words (0 for no words)."""
    return len("".join(words)) / len(words) if words else 0.0


def symbol_word_ratio(text: str, words: Words) -> float:
    """Symbols per word: each '#', '...', '…' and each 3 symbol characters in a row count one."""
    symbols = text.count("#") + text.count("...") + text.count("…")
    runs = text.encode("utf-8", "surrogatepass").translate(_SYMBOL_TABLE).count(b"sss")
    return (symbols + runs) / max(len(words), 1)


def non_alpha_word_ratio(text: str, words: Words) -> float:
    """Fraction of words without a single letter (of any script)."""
    if not words:
        return 0.0
    with_letter = _ascii_words_with_letter(text) if text.isascii() else _words_with_letter(words)
    return 1.0 - with_letter / len(words)


def _ascii_words_with_letter(text: str) -> int:
    """Words holding a letter in ASCII text: runs of 'a' once letters are 'a', spaces ' '."""
    marks = text.encode("ascii").translate(_ALPHA_TABLE, _NOT_ALPHA_OR_SPACE)
    return marks.count(b" a") + marks.startswith(b"a")


def _words_with_letter(words: Words) -> int:
    """Words holding a letter, in any text: all words less those the regex finds letterless."""
    return len(words) - len(_NON_ALPHA_WORD.findall(f" {' '.join(words)} "))


def duplicate_line_fractions(text: str) -> tuple[float, float]:
    """Fractions of non-empty lines, and of all characters, in lines that repeat an earlier one."""
    lines = text.split("\n")
    unique = set(lines)
    empty = lines.count("")
    repeated_lines = len(lines) - len(unique) - max(empty - 1, 0)
    repeated_chars = len(text) - (len(lines) - 1) - sum(map(len, unique))
    return repeated_lines / max(len(lines) - empty, 1), repeated_chars / max(len(text), 1)
