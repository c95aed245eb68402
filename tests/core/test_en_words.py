"""English tokens as spaCy's `blank("en")` makes them (datatrove's words for Gopher's alphabetic
rule): hand-written chunks, counts through the cache, and spaCy itself."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.english import english

from corpus_assets.core.text import en_words

# (chunk, spaCy 3.8's tokens), each checked against spacy.blank("en")
GOLDEN = [
    ("said.", ["said", "."]),
    ('"Hi,"', ['"', "Hi", ",", '"']),
    ("(yes)", ["(", "yes", ")"]),
    ("[Exit.]", ["[", "Exit", ".", "]"]),
    ("Don't", ["Do", "n't"]),
    ("can't.", ["ca", "n't", "."]),
    ("I'm", ["I", "'m"]),
    ("Tom's", ["Tom", "'s"]),
    ("kill'd", ["kill'd"]),
    ("o'er", ["o'er"]),
    ("'em", ["'em"]),
    ("'tis", ["'", "tis"]),
    ("cannot", ["can", "not"]),
    ("dont", ["do", "nt"]),
    ("gonna", ["gon", "na"]),
    ("wed.", ["we", "d."]),  # 'wed' is 'we' 'd'; then 'd' '.' spell the special case 'd.'
    ("10am", ["10", "am"]),
    ("Mr.", ["Mr."]),
    ("Mar.", ["Mar."]),
    ("Ham.", ["Ham", "."]),
    ("HAMLET.", ["HAMLET", "."]),
    ("I.", ["I."]),
    ("a.", ["a."]),
    ("U.S.", ["U.S."]),
    ("e.g.", ["e.g."]),
    ("3.14", ["3.14"]),
    ("1,000", ["1,000"]),
    ("$5", ["$", "5"]),
    ("5%", ["5", "%"]),
    ("well-known", ["well", "-", "known"]),
    ("sir--and", ["sir", "--", "and"]),
    ("you,--", ["you,--"]),
    ("1-2", ["1", "-", "2"]),
    ("end.Next", ["end", ".", "Next"]),
    ("a,b", ["a", ",", "b"]),
    ("x/y", ["x", "/", "y"]),
    ("9/11", ["9/11"]),
    ("...", ["..."]),
    ("wait…", ["wait", "…"]),
    ("!!!", ["!", "!", "!"]),
    ("###", ["#", "#", "#"]),
    ("@user", ["@user"]),
    ("a@b.com", ["a@b.com"]),
    ("http://x.com/a?b=1", ["http://x.com/a?b=1"]),
    ("''", ["''"]),
]


@pytest.mark.parametrize(("chunk", "expected"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_chunks_split_as_spacy_splits_them(chunk: str, expected: list[str]) -> None:
    assert en_words.tokens(chunk) == expected


def test_counts_are_tokens_and_tokens_with_a_letter() -> None:
    words = ['"Yes,"', "he", "said.", '"No!"']
    # " Yes , " he said . " No ! "  (11 tokens, 4 with a letter)
    assert en_words.alpha_token_counts(words) == (11, 4)
    assert en_words.alpha_token_counts([]) == (0, 0)
    assert en_words.alpha_token_counts(["3.14", "1,000", "--"]) == (3, 0)
    assert en_words.alpha_token_counts(["a,"] * 70_000) == (140_000, 70_000)  # packed apart


CHUNK = st.text(st.sampled_from(list("abcXYZ019'’.,;:!?\"()[]-—/$%#@…")), min_size=1, max_size=12)


@settings(max_examples=500, deadline=None)
@given(st.lists(CHUNK, max_size=20))
def test_tokens_cover_the_chunk_and_the_cache_counts_them(chunks: list[str]) -> None:
    for chunk in chunks:
        assert "".join(en_words.tokens(chunk)) == chunk
    found = [t for c in chunks for t in en_words.tokens(c)]
    alpha = sum(any(ch.isalpha() for ch in t) for t in found)
    assert en_words.alpha_token_counts(chunks) == (len(found), alpha)
    assert en_words.alpha_token_counts(chunks) == (len(found), alpha)  # from the cache


PIECES = [
    "the", "Cat", "said", "I", "a", "HAMLET", "Mr", "o", "er", "don", "t", "you", "ll", "s",
    "3", "14", "1990",
    ".", ",", ";", ":", "!", "?", '"', "'", "(", ")", "-", "--", "...", "…", "$", "%", "/", "@",
]  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6))
def test_tokens_equal_spacys(pieces: list[str]) -> None:
    """Chunk by chunk (spaCy also merges special cases across whitespace: in "' ''" the second
    chunk's "''" stays two tokens; not copied here)."""
    chunk = "".join(pieces)
    assert en_words.tokens(chunk) == [t.text for t in english()(chunk)]
