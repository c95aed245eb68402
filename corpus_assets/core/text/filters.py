"""Gopher/C4/FineWeb-style quality filters: each document is kept or dropped with a named reason.

`make_cleaner` returns the text C4's line rules leave (they remove lines) with the reason of the
first failed rule, or None; `make_filter` returns that reason alone.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from corpus_assets.core.config import FilterSpec
from corpus_assets.core.text import quality_rules as q

TOO_FEW_CHARS = "too_few_chars"
TOO_MANY_CHARS = "too_many_chars"
TOO_FEW_WORDS = "too_few_words"
TOO_MANY_WORDS = "too_many_words"
MEAN_WORD_LENGTH = "mean_word_length"
SYMBOL_WORD_RATIO = "symbol_word_ratio"
DUPLICATE_LINES = "duplicate_lines"
NON_ALPHA_WORDS = "non_alpha_words"
DUPLICATE_PARAGRAPHS = "duplicate_paragraphs"
DUPLICATE_PARAGRAPH_CHARS = "duplicate_paragraph_chars"
TOP_NGRAM = {n: f"top_{n}gram" for n in (2, 3, 4)}
DUPLICATE_NGRAMS = {n: f"duplicate_{n}grams" for n in range(5, 11)}
BULLET_LINES = "bullet_lines"
ELLIPSIS_LINES = "ellipsis_lines"
NON_ALPHA_TOKENS = "non_alpha_tokens"
TOO_FEW_STOP_WORDS = "too_few_stop_words"
LOREM_IPSUM = "lorem_ipsum"
CURLY_BRACKET = "curly_bracket"
TOO_FEW_SENTENCES = "too_few_sentences"
NO_LINES = "no_lines"
LINE_PUNCTUATION = "line_punctuation"
SHORT_LINES = "short_lines"
CHAR_DUPLICATES = "char_duplicates"
LIST_RATIO = "list_ratio"
REASONS = (
    TOO_FEW_CHARS,
    TOO_MANY_CHARS,
    TOO_FEW_WORDS,
    TOO_MANY_WORDS,
    MEAN_WORD_LENGTH,
    SYMBOL_WORD_RATIO,
    DUPLICATE_LINES,
    NON_ALPHA_WORDS,
    DUPLICATE_PARAGRAPHS,
    DUPLICATE_PARAGRAPH_CHARS,
    *TOP_NGRAM.values(),
    *DUPLICATE_NGRAMS.values(),
    BULLET_LINES,
    ELLIPSIS_LINES,
    NON_ALPHA_TOKENS,
    TOO_FEW_STOP_WORDS,
    LOREM_IPSUM,
    CURLY_BRACKET,
    TOO_FEW_SENTENCES,
    NO_LINES,
    LINE_PUNCTUATION,
    SHORT_LINES,
    CHAR_DUPLICATES,
    LIST_RATIO,
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

_NGRAMS = {
    **{n: f"max_top_{n}gram_char_fraction" for n in TOP_NGRAM},
    **{n: f"max_duplicate_{n}gram_char_fraction" for n in DUPLICATE_NGRAMS},
}
Words = list[str]
Check = Callable[[str, Words], str | None]
Rule = Callable[[q.Split], str | None]
Filter = Callable[[str], str | None]
Cleaner = Callable[[str], tuple[str, str | None]]
Cleaned = list[tuple[str, str | None]]
BATCH_CHARS = 1 << 17
"""`many` takes its texts in batches of about this many characters (one text at least): their
n-grams are counted together, their tokens held meanwhile."""


class QualityFilter:
    """Called on a text: (the text C4's line rules leave, None to keep it or the reason of the
    first failed rule); `many` does the same for many texts, faster; `lines_removed` counts the
    lines those rules removed, by reason."""

    def __init__(self, spec: FilterSpec) -> None:
        self.lines_removed: Counter[str] = Counter()
        self.spec = spec
        self._cleaner = _Cleaner(spec, self.lines_removed)

    def __call__(self, text: str) -> tuple[str, str | None]:
        return self._cleaner.one(text)

    @property
    def edits_lines(self) -> bool:
        """Whether C4's line rules are on: lines may be removed (and counted)."""
        return self._cleaner.enabled and self._cleaner.c4.edits_lines

    def many(self, texts: Sequence[str]) -> Cleaned:
        """What each text's call gives, in order."""
        return self._cleaner.many(texts)


def make_cleaner(spec: FilterSpec) -> Cleaner:
    """A function of one text: (its text after C4's line rules, None or the drop reason)."""
    return _Cleaner(spec, Counter()).one


def make_filter(spec: FilterSpec) -> Filter:
    """A function of one text: None to keep it, or the reason of the first check it fails."""
    clean = _Cleaner(spec, Counter()).one

    def check(text: str) -> str | None:
        return clean(text)[1]

    return check


class _Cleaner:
    """The checks, then the reference rules (Gopher's, C4's line pass, FineWeb's), of a spec."""

    def __init__(self, spec: FilterSpec, lines_removed: Counter[str]) -> None:
        self.enabled = spec.enabled
        self.low, self.high = spec.min_chars, spec.max_chars
        self.checks = _checks(spec)
        self.before, self.c4, self.after = _rules(spec), _c4_rules(spec), _fineweb_rules(spec)
        self.more = bool(self.before or self.c4.active or self.after)  # none set, none run
        self.ngrams = any(getattr(spec, name) is not None for name in _NGRAMS.values())
        self.lines_removed = lines_removed

    def many(self, texts: Sequence[str]) -> Cleaned:
        """Each text's (text after C4's line rules, None or the drop reason), in batches of
        about BATCH_CHARS characters."""
        if not self.enabled:
            return [(text, None) for text in texts]
        out: Cleaned = []
        lo = chars = 0
        for hi, text in enumerate(texts, 1):
            chars += len(text)
            if chars >= BATCH_CHARS:
                out += self._batch(texts[lo:hi])
                lo, chars = hi, 0
        if lo < len(texts):
            out += self._batch(texts[lo:])
        return out

    def one(self, text: str) -> tuple[str, str | None]:
        """One text's (text after C4's line rules, None or the drop reason)."""
        if not self.enabled:
            return text, None
        reason, words = self._checked(text)
        if reason is not None or not self.more:
            return text, reason
        return self._rest(q.Split(text, words))

    def _batch(self, texts: Sequence[str]) -> Cleaned:
        if not self.ngrams:  # nothing to count together: each text through, its pieces let go
            return [self.one(text) for text in texts]
        out: Cleaned = []
        pending: list[tuple[int, q.Split]] = []
        for text in texts:
            reason, words = self._checked(text)
            if reason is None and self.more:
                pending.append((len(out), q.Split(text, words)))
            out.append((text, reason))
        if len(pending) > 1:  # the n-gram rules will ask: count them together
            q.count_ngrams([split for _, split in pending])
        for i, split in pending:
            out[i] = self._rest(split)
        return out

    def _checked(self, text: str) -> tuple[str | None, Words]:
        """The reason of the first check that fails, or None and the text's words."""
        # characters first, before the words are split: a huge document costs no word list
        if self.low is not None and len(text) < self.low:
            return TOO_FEW_CHARS, []
        if self.high is not None and len(text) > self.high:
            return TOO_MANY_CHARS, []
        words = text.split()
        for run in self.checks:
            reason = run(text, words)
            if reason is not None:
                return reason, []
        return None, words

    def _rest(self, split: q.Split) -> tuple[str, str | None]:
        """The reference rules, on a text that passed the checks."""
        text = split.text
        if self.before and (reason := _first(self.before, split)) is not None:
            return text, reason
        if self.c4.active:
            changed: list[tuple[str, str]] = []
            cut, reason = q.c4_pass(text, self.c4, self.lines_removed, changed)
            if reason is not None:
                return text, reason
            if cut != text:  # lines removed or stripped: the rules after see what is left
                text, split = cut, q.Split(cut, token_count=split.cut_token_count(changed))
        if self.after and (reason := _first(self.after, split)) is not None:
            return text, reason
        return text, None


def _first(rules: list[Rule], split: q.Split) -> str | None:
    for rule in rules:
        reason = rule(split)
        if reason is not None:
            return reason
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


def _rules(spec: FilterSpec) -> list[Rule]:
    """Gopher's repetition and remaining quality rules, on the text as it came."""
    rules: list[Rule] = []
    para, para_chars = (
        spec.max_duplicate_paragraph_fraction,
        spec.max_duplicate_paragraph_char_fraction,
    )
    if para is not None or para_chars is not None:
        rules.append(_paragraph_rule(para, para_chars))
    for n, reason in TOP_NGRAM.items():
        top = getattr(spec, _NGRAMS[n])
        if top is not None:
            rules.append(_top_ngram_rule(n, top, reason))
    for n, reason in DUPLICATE_NGRAMS.items():
        dup = getattr(spec, _NGRAMS[n])
        if dup is not None:
            rules.append(_duplicate_ngram_rule(n, dup, reason))
    _above(rules, q.bullet_line_ratio, spec.max_bullet_line_ratio, BULLET_LINES)
    _above(rules, q.ellipsis_line_ratio, spec.max_ellipsis_line_ratio, ELLIPSIS_LINES)
    if spec.min_alpha_token_ratio is not None:
        _below(rules, q.alpha_token_ratio, spec.min_alpha_token_ratio, NON_ALPHA_TOKENS)
    if spec.min_stop_words is not None:
        _below(rules, q.stop_words, spec.min_stop_words, TOO_FEW_STOP_WORDS)
    return rules


def _c4_rules(spec: FilterSpec) -> q.C4Rules:
    return q.C4Rules(
        max_word_length=spec.c4_max_word_length,
        remove_citations=bool(spec.c4_remove_citations),
        terminal_punctuation=bool(spec.c4_terminal_punctuation),
        min_words_per_line=spec.c4_min_words_per_line,
        lorem_ipsum=bool(spec.c4_lorem_ipsum),
        javascript=bool(spec.c4_javascript),
        curly_bracket=bool(spec.c4_curly_bracket),
        policy=bool(spec.c4_policy),
        min_sentences=spec.c4_min_sentences,
    )


def _fineweb_rules(spec: FilterSpec) -> list[Rule]:
    """FineWeb's rules, on the text C4's line rules leave; a text without a line is dropped."""
    rules: list[Rule] = []
    if spec.min_line_punctuation_ratio is not None:
        _below(rules, q.line_punctuation_ratio, spec.min_line_punctuation_ratio, LINE_PUNCTUATION)
    length = spec.short_line_length
    if length is not None:
        _above(
            rules, lambda s: q.short_line_ratio(s, length), spec.max_short_line_ratio, SHORT_LINES
        )
    _above(rules, q.char_duplicate_ratio, spec.max_char_duplicate_ratio, CHAR_DUPLICATES)
    _above(rules, q.newline_word_ratio, spec.max_newline_word_ratio, LIST_RATIO)
    if rules:
        rules.insert(0, _no_lines)
    return rules


def _no_lines(split: q.Split) -> str | None:
    return None if split.filled_lines else NO_LINES


def _above(
    rules: list[Rule], measure: Callable[[q.Split], float], high: float | None, reason: str
) -> None:
    """Append a rule dropping the text when `measure` exceeds `high` (None: no rule)."""
    if high is None:
        return

    def rule(split: q.Split) -> str | None:
        return reason if measure(split) > high else None

    rules.append(rule)


def _below(rules: list[Rule], measure: Callable[[q.Split], float], low: float, reason: str) -> None:
    """Append a rule dropping the text when `measure` is under `low`."""

    def rule(split: q.Split) -> str | None:
        return reason if measure(split) < low else None

    rules.append(rule)


def _paragraph_rule(max_paragraphs: float | None, max_chars: float | None) -> Rule:
    def rule(split: q.Split) -> str | None:
        paragraphs, chars = q.paragraph_duplicates(split)
        if max_paragraphs is not None and paragraphs > max_paragraphs:
            return DUPLICATE_PARAGRAPHS
        if max_chars is not None and chars > max_chars:
            return DUPLICATE_PARAGRAPH_CHARS
        return None

    return rule


def _top_ngram_rule(n: int, high: float, reason: str) -> Rule:
    def rule(split: q.Split) -> str | None:
        chars = split.ngrams.top_chars(n)
        return reason if chars is not None and chars / max(len(split.text), 1) > high else None

    return rule


def _duplicate_ngram_rule(n: int, high: float, reason: str) -> Rule:
    def rule(split: q.Split) -> str | None:
        return reason if split.ngrams.duplicate_chars(n) / max(len(split.text), 1) > high else None

    return rule


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
