"""The statistics of datatrove's Gopher repetition/quality, C4 quality and FineWeb quality filters.

A text is split once (`Split`: its tokens, lines and word n-grams, each made on first use) and
every rule reads the pieces it needs; `filters.py` compares the statistics with the thresholds.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, repeat
from operator import itemgetter

from corpus_assets.core.text import en_words
from corpus_assets.core.text.ngram_stats import NGrams, ngrams_of

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
_TOKEN = re.compile(r"\w++(?:[-'’.,]\w++)*+|\.\.\.|[^\w\s]")  # possessive: nothing to give back
_PARAGRAPH_BREAK = re.compile(r"\n{2,}")
_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_POLICY = re.compile(
    "terms of use|privacy policy|cookie policy|uses cookies|use of cookies|use cookies"
)
_SENTENCE_END = re.compile(r"[.!?]+['\")\]]*(?=\s|$)")
_C4_END = (".", "?", "!", '"', "'")
_BULLETS = ("•", "-")
_ELLIPSES = ("...", "…")


_CACHE_SIZE = 1 << 17
_CACHED_CHUNK = 64  # longer chunks (addresses, blobs) are tokenized each time, not kept


class _ChunkTokens(dict[str, tuple[str, ...]]):
    """A whitespace-free chunk -> its tokens, found on first sight. No token spans whitespace
    (`_TOKEN`'s \\s is str.split's whitespace), so a text's tokens are its chunks' in order: a
    common chunk costs one lookup, and its token strings, shared, keep their hashes."""

    def __missing__(self, chunk: str) -> tuple[str, ...]:
        found = tuple(_TOKEN.findall(chunk))
        if len(chunk) <= _CACHED_CHUNK:
            if len(self) >= _CACHE_SIZE:
                self.clear()
            self[chunk] = found
        return found


_CHUNK_TOKENS = _ChunkTokens()


def _count_tokens(line: str) -> int:
    return sum(map(len, map(_CHUNK_TOKENS.__getitem__, line.split())))


class Split:
    """One text's pieces, each computed once on first use and shared by every rule."""

    def __init__(
        self, text: str, words: list[str] | None = None, token_count: int | None = None
    ) -> None:
        self.text = text
        self._words = words
        self._token_count = token_count
        self._ngrams: NGrams | None = None

    @cached_property
    def tokens(self) -> list[str]:
        return list(chain.from_iterable(map(_CHUNK_TOKENS.__getitem__, self.words)))

    @property
    def token_count(self) -> int:
        """len(tokens) (given, when the caller knows it: see `cut_token_count`)."""
        if self._token_count is None:
            self._token_count = len(self.tokens)
        return self._token_count

    def cut_token_count(self, changed: list[tuple[str, str]]) -> int | None:
        """The tokens of this text with the lines of `changed` (a line as it was, as it is
        now: '' when removed) changed, or None when its own tokens were not counted yet.

        No token spans whitespace, a line break included: a text's tokens are its lines'."""
        if "tokens" not in self.__dict__ and self._token_count is None:
            return None
        count = self.token_count
        for before, after in changed:
            count += _count_tokens(after) - _count_tokens(before)
        return count

    @property
    def words(self) -> list[str]:
        """Whitespace-separated words (given, when the caller split the text already)."""
        if self._words is None:
            self._words = self.text.split()
        return self._words

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def ngrams(self) -> NGrams:
        """The statistics of the tokens' n-grams (counted with other texts' by `count_ngrams`)."""
        if self._ngrams is None:
            self._ngrams = ngrams_of([self.tokens])[0]
        return self._ngrams

    @cached_property
    def filled_lines(self) -> list[str]:
        """Lines split at '\\n' that hold more than whitespace (FineWeb's lines)."""
        return [line for line in self.text.split("\n") if line and not line.isspace()]


def count_ngrams(splits: Sequence[Split]) -> None:
    """Count the n-grams of many texts as one batch (their tokens held meanwhile): one numpy
    pass for all of them, where one a text costs far more."""
    for split, ngrams in zip(splits, ngrams_of([s.tokens for s in splits]), strict=True):
        split._ngrams = ngrams


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
    lines, text = split.lines, split.text
    if "-" not in text and "•" not in text:
        return 0.0
    return sum(map(str.startswith, map(str.lstrip, lines), repeat(_BULLETS))) / max(len(lines), 1)


def ellipsis_line_ratio(split: Split) -> float:
    """Fraction of lines that end, before whitespace, with '...' or '…'."""
    lines, text = split.lines, split.text
    if "..." not in text and "…" not in text:
        return 0.0
    return sum(map(str.endswith, map(str.rstrip, lines), repeat(_ELLIPSES))) / max(len(lines), 1)


def line_punctuation_ratio(split: Split) -> float:
    """Fraction of FineWeb's lines whose last character is terminal punctuation."""
    lines = split.filled_lines
    ends = map(TERMINAL_PUNCTUATION.__contains__, map(itemgetter(-1), lines))
    return sum(ends) / max(len(lines), 1)


def short_line_ratio(split: Split, length: int) -> float:
    """Fraction of FineWeb's lines of at most `length` characters."""
    lines = split.filled_lines
    return sum(map(length.__ge__, map(len, lines))) / max(len(lines), 1)


def char_duplicate_ratio(split: Split) -> float:
    """Characters in repeated FineWeb lines, per character that is not a newline."""
    text = split.text
    return duplicates(split.filled_lines)[1] / max(len(text) - text.count("\n"), 1)


def newline_word_ratio(split: Split) -> float:
    """Newlines per word (FineWeb's list ratio)."""
    return split.text.count("\n") / max(split.token_count, 1)


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


def c4_pass(
    text: str,
    rules: C4Rules,
    removed: Counter[str],
    changed: list[tuple[str, str]] | None = None,
) -> tuple[str, str | None]:
    """(the text with C4's failing lines removed, None) or (text, the document rule it fails:
    'lorem_ipsum', 'curly_bracket', 'too_few_sentences'); removed lines counted by reason,
    and given `changed`, each removed line and its '' and each line whose citations were cut
    and what is left appended to it (lines stripped).

    A phrase that no line holds is looked for in the whole text once, not line by line (a line
    holds it only if the text does); sentences are counted until there are enough."""
    kept: list[str] = []
    found = 0
    citations = rules.remove_citations and "[" in text
    whole = _CITATION.sub("", text) if citations else text  # a cut citation joins its sides
    lower_text = whole.lower() if rules.lorem_ipsum or rules.javascript or rules.policy else ""
    lorem = rules.lorem_ipsum and "lorem ipsum" in lower_text
    javascript = rules.javascript and "javascript" in lower_text
    policy = rules.policy and _POLICY.search(lower_text) is not None
    lowered = lorem or javascript or policy
    curly = rules.curly_bracket and "{" in text
    longest, fewest = rules.max_word_length, rules.min_words_per_line
    most = -1 if fewest is None else max(fewest - 1, 0)  # words to split off: len < fewest?
    enough = rules.min_sentences
    cut: Counter[str] = Counter()
    edits: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if longest is not None and len(line) > longest and max(map(len, line.split())) > longest:
            cut[LINE_LONG_WORD] += 1
            edits.append((line, ""))
            continue
        words = len(line.split(None, most)) if fewest is not None else 0
        stripped = line
        if citations:
            line = _CITATION.sub("", line)
        if rules.terminal_punctuation and (not line.endswith(_C4_END) or line.endswith("...")):
            cut[LINE_NO_TERMINAL_PUNCTUATION] += 1
            edits.append((stripped, ""))
            continue
        if fewest is not None and words < fewest:
            cut[LINE_TOO_FEW_WORDS] += 1
            edits.append((stripped, ""))
            continue
        lower = line.lower() if lowered else line
        if lorem and "lorem ipsum" in lower:
            return text, "lorem_ipsum"
        if javascript and "javascript" in lower:
            cut[LINE_JAVASCRIPT] += 1
            edits.append((stripped, ""))
            continue
        if curly and "{" in line:
            return text, "curly_bracket"
        if policy and _POLICY.search(lower):
            cut[LINE_POLICY] += 1
            edits.append((stripped, ""))
            continue
        if enough is not None and found < enough:
            found += sentences(line)
        if line is not stripped:
            edits.append((stripped, line))
        kept.append(line)
    if enough is not None and found < enough:
        return text, "too_few_sentences"
    removed.update(cut)
    if changed is not None:
        changed += edits
    return ("\n".join(kept).strip() if rules.edits_lines else text), None
