"""The reference pipelines' rules (datatrove's Gopher, C4, FineWeb): each names its reason, each
is off until set or named by a preset, and the presets carry the published thresholds."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.english import english

from corpus_assets.core.config import FILTER_PRESETS, FilterSpec, validate
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.text import filters as f
from corpus_assets.core.text import quality_rules as q
from corpus_assets.core.text.ngram_stats import ngrams_of

SET = ("short_line_length", "min_language_score", "boilerplate_min_words")  # used with another
# every threshold of the existing checks off: each test below turns on the one rule it tests
BARE = {name: None for name in FilterSpec.model_fields if name not in ("enabled", "preset", *SET)}
PROSE = (
    "The river ran past the old mill, and the miller's daughter watched it from her window. "
    "Every morning she counted the boats that carried grain to the town below the hills. "
    "Her father said that the water had been higher in his youth, before the dam was built. "
    "She did not believe him, yet she wrote his stories down with care in a small blue book. "
    "Years later those pages became the only record of how the valley had looked."
)


def only(**rules: Any) -> f.Filter:
    return f.make_filter(FilterSpec(**{**BARE, **rules}))


def clean(**rules: Any) -> f.Cleaner:
    return f.make_cleaner(FilterSpec(**{**BARE, **rules}))


def test_prose_passes_every_preset_and_the_new_rules_are_off_by_default() -> None:
    for name in FILTER_PRESETS:
        assert f.make_filter(FilterSpec(preset=name))(PROSE) is None, name
    assert f.make_filter(FilterSpec(preset=["gopher", "c4", "fineweb"]))(PROSE) is None
    defaults = FilterSpec()
    new = {k for group in FILTER_PRESETS.values() for k in group} - set(FilterSpec().model_dump())
    assert new == set()  # every preset key is a field
    added = list(FilterSpec.model_fields)[
        list(FilterSpec.model_fields).index("max_non_alpha_word_ratio") + 1 :
    ]
    assert [getattr(defaults, k) for k in added if k not in SET] == [None] * (len(added) - len(SET))
    assert f._rules(defaults) == [] and f._fineweb_rules(defaults) == []
    assert not f._c4_rules(defaults).active
    assert len(set(f.REASONS)) == len(f.REASONS)


# (one rule's settings, a text it keeps, a text it drops, the reason)
GOLDEN = [
    (
        {"max_duplicate_paragraph_fraction": 0.3},
        "one\n\ntwo\n\nthree\n\nfour\n\none",  # 1 of 5 repeats
        "one\n\ntwo\n\none\n\ntwo",  # 2 of 4
        f.DUPLICATE_PARAGRAPHS,
    ),
    (
        {"max_duplicate_paragraph_char_fraction": 0.2},
        "a short one\n\nand a much longer paragraph here\n\na short one",  # 11 / 58
        "a longer paragraph\n\nb\n\na longer paragraph",  # 18 / 41
        f.DUPLICATE_PARAGRAPH_CHARS,
    ),
    (
        {"max_top_2gram_char_fraction": 0.2},
        PROSE,
        "to be or not to be, to be is all",  # 'to be' x3 = 15 of 33
        f.TOP_NGRAM[2],
    ),
    (
        {"max_top_3gram_char_fraction": 0.18},
        PROSE,
        "one two six and one two six and more",  # 'one two six' x2 = 22 of 36
        f.TOP_NGRAM[3],
    ),
    (
        {"max_top_4gram_char_fraction": 0.16},
        PROSE,
        "a b c d and then a b c d",  # 'a b c d' x2 = 14 of 24
        f.TOP_NGRAM[4],
    ),
    *(
        (
            {f"max_duplicate_{n}gram_char_fraction": 0.1},
            PROSE,
            " ".join([*(f"w{i}" for i in range(n)), "mid", *(f"w{i}" for i in range(n))]),
            f.DUPLICATE_NGRAMS[n],
        )
        for n in range(5, 11)
    ),
    (
        {"max_bullet_line_ratio": 0.9},
        "- one\n- two\nthree",
        "- one\n  • two\n-three",
        f.BULLET_LINES,
    ),
    (
        {"max_ellipsis_line_ratio": 0.3},
        "one...\ntwo\nthree\nfour",  # 1 of 4
        "one...\ntwo…  \nthree",  # 2 of 3
        f.ELLIPSIS_LINES,
    ),
    (
        {"min_alpha_token_ratio": 0.8},
        "The cat sat on the mat.",  # 6 of 7 tokens hold a letter
        '"Yes," he said. "No!"',  # 4 of 11 tokens; every whitespace word holds one
        f.NON_ALPHA_TOKENS,
    ),
    (
        {"min_stop_words": 2},
        "the cat and the dog",
        "The cat, And dogs: the dog",
        f.TOO_FEW_STOP_WORDS,
    ),
    ({"c4_lorem_ipsum": True}, "Lorem dolor.", "It says Lorem Ipsum here.", f.LOREM_IPSUM),
    ({"c4_curly_bracket": True}, "No brackets (here).", "x = {1: 2}", f.CURLY_BRACKET),
    (
        {"c4_min_sentences": 5},
        "One. Two! Three? Four.\nFive",
        "One. Two! Three?\nFour",
        f.TOO_FEW_SENTENCES,
    ),
    (
        {"min_line_punctuation_ratio": 0.12},
        "a line.\nno end",
        "no end\nnor here",
        f.LINE_PUNCTUATION,
    ),
    (
        {"max_short_line_ratio": 0.67},
        "short\n" + "a line long enough to be well over thirty characters",
        "short\nshorter\nshortest\n" + "a line long enough to be well over thirty characters",
        f.SHORT_LINES,
    ),
    (
        {"max_char_duplicate_ratio": 0.01},
        PROSE,
        PROSE + "\n" + PROSE,
        f.CHAR_DUPLICATES,
    ),
    ({"max_newline_word_ratio": 0.3}, "one two three\nfour", "one\ntwo\nthree", f.LIST_RATIO),
    ({"max_newline_word_ratio": 0.3}, "words", "\n \n", f.NO_LINES),
]


@pytest.mark.parametrize(
    ("rule", "kept", "dropped", "reason"), GOLDEN, ids=[str(i) + g[3] for i, g in enumerate(GOLDEN)]
)
def test_each_rule_keeps_and_drops_with_its_reason(
    rule: dict[str, Any], kept: str, dropped: str, reason: str
) -> None:
    assert only(**rule)(kept) is None
    assert only(**rule)(dropped) == reason
    assert only()(dropped) is None  # off: a null threshold keeps it
    assert only(**dict.fromkeys(rule))(dropped) is None


def test_c4_line_rules_remove_lines_and_return_the_text() -> None:
    text = (
        "  The first line ends well.  \n"
        "no terminal punctuation here\n"
        "Too short.\n"
        "Please enable JavaScript to view this page.\n"
        "Read our Privacy Policy before you go.\n"
        "A citation is cut[1] from this line[edit].\n" + "x" * 1001 + " is a very long word.\n"
        "An ellipsis is no ending...\n"
        "\n"
        "The last line ends well too!"
    )
    keep = f.QualityFilter(FilterSpec(**{**BARE, **FILTER_PRESETS["c4"], "c4_min_sentences": 3}))
    assert keep(text) == (
        "The first line ends well.\n"
        "A citation is cut from this line.\n"
        "The last line ends well too!",
        None,
    )
    assert keep.lines_removed == Counter(
        {
            q.LINE_NO_TERMINAL_PUNCTUATION: 3,  # with the ellipsis and the empty line
            q.LINE_TOO_FEW_WORDS: 1,
            q.LINE_JAVASCRIPT: 1,
            q.LINE_POLICY: 1,
            q.LINE_LONG_WORD: 1,
        }
    )
    assert f.make_filter(FilterSpec(**{**BARE, **FILTER_PRESETS["c4"]}))(text) == (
        f.TOO_FEW_SENTENCES  # 3 sentences are left, of 5
    )


def test_c4_document_rules_see_only_the_lines_kept_so_far() -> None:
    """As in datatrove: 'lorem ipsum' in a line removed for its ending does not drop the text."""
    rules = {"c4_terminal_punctuation": True, "c4_lorem_ipsum": True, "c4_curly_bracket": True}
    assert clean(**rules)("lorem ipsum\nA line {here}") == ("", None)
    assert clean(**rules)("lorem ipsum.\nA line.") == ("lorem ipsum.\nA line.", f.LOREM_IPSUM)
    # document rules alone leave the text as it came
    assert clean(c4_lorem_ipsum=True)("  Text  \n\nhere ") == ("  Text  \n\nhere ", None)


def test_c4_then_fineweb_sees_the_cut_text() -> None:
    text = "Keep this line here.\n" + "cut me\n" * 5
    rules = {"c4_terminal_punctuation": True, "min_line_punctuation_ratio": 0.5}
    assert clean(**rules)(text) == ("Keep this line here.", None)
    assert only(min_line_punctuation_ratio=0.5)(text) == f.LINE_PUNCTUATION


@pytest.mark.parametrize(
    ("line", "n"),
    [("", 0), ("One.", 1), ("One. Two", 2), ('He said "no." Then left!', 2), ("3.14 is pi", 1)],
)
def test_sentences(line: str, n: int) -> None:
    assert q.sentences(line) == n


# datatrove's gopher_repetition_filter.py, verbatim but for names: the reference statistics
def dt_find_duplicates(x: list[str]) -> tuple[int, int]:
    unique_x: set[str] = set()
    duplicate_chars = duplicate_elements = 0
    for element in x:
        if element in unique_x:
            duplicate_chars += len(element)
            duplicate_elements += 1
        else:
            unique_x.add(element)
    return duplicate_elements, duplicate_chars


def dt_top(words: list[str], n: int) -> int | None:
    grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return None
    gram, count = Counter(grams).most_common(1)[0]
    return len(gram) * count


def dt_all_duplicate(words: list[str], n: int) -> int:
    unique: set[str] = set()
    repeated_chars, idx = 0, 0
    while idx < len(words) - n + 1:
        n_gram = "".join(words[idx : idx + n])
        if n_gram in unique:
            repeated_chars += len(n_gram)
            idx += n
        else:
            unique.add(n_gram)
            idx += 1
    return repeated_chars


# two-letter words from a small alphabet: many repeats, and "".join is one-to-one on them
WORDS = st.lists(st.sampled_from(["ab", "cd", "ef", "gh"]), max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=6), st.integers(2, 10))
def test_ngram_statistics_equal_datatroves(texts: list[list[str]], n: int) -> None:
    """Texts counted in one batch: each one's statistics as datatrove's of it alone."""
    for words, grams in zip(texts, ngrams_of(texts), strict=True):
        assert grams.top_chars(n) == dt_top(words, n)
        assert grams.duplicate_chars(n) == dt_all_duplicate(words, n)


# word characters, the joiners, points, other marks and every kind of whitespace
TOKEN_TEXT = st.text(
    st.sampled_from([*"ab_1é'’-.,!?\"()…", " ", "\n", "\t", "\xa0", "\x1c", "\u2028"]),
    max_size=80,
)


# the token pattern without its possessive quantifiers
TOKEN = re.compile(r"\w+(?:[-'’.,]\w+)*|\.\.\.|[^\w\s]")


@settings(max_examples=500, deadline=None)
@given(TOKEN_TEXT)
def test_tokens_are_the_tokens_of_each_chunk_in_turn(text: str) -> None:
    """Chunk by chunk, through the cache, the tokens the pattern finds in the whole text."""
    assert q.Split(text).tokens == TOKEN.findall(text)
    assert q.Split(text).token_count == len(TOKEN.findall(text))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "cc", "", "d d"]), max_size=30))
def test_duplicates_equal_datatroves(items: list[str]) -> None:
    assert q.duplicates(items) == dt_find_duplicates(items)


PARAGRAPH = st.text(st.characters(codec="utf-8", exclude_characters="\n"), min_size=1).filter(
    lambda t: t.strip() == t
)


@settings(max_examples=200, deadline=None)
@given(st.lists(PARAGRAPH, min_size=1, max_size=8))
def test_a_text_twice_has_half_its_paragraphs_repeated(paragraphs: list[str]) -> None:
    text = "\n\n".join(paragraphs)
    twice = q.paragraph_duplicates(q.Split(f"{text}\n\n{text}"))
    assert twice[0] >= 0.5
    assert twice[1] >= q.paragraph_duplicates(q.Split(text))[1] / 2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=["Zl", "Zp", "Cc"])),
        min_size=1,
        max_size=12,
    ),
    st.randoms(),
)
def test_line_statistics_ignore_line_order(lines: list[str], rng: random.Random) -> None:
    shuffled = lines[:]
    rng.shuffle(shuffled)
    # each line ends in a newline: splitlines() then finds exactly these lines, in any order
    a, b = q.Split("".join(f"{x}\n" for x in lines)), q.Split("".join(f"{x}\n" for x in shuffled))
    for measure in (
        q.bullet_line_ratio,
        q.ellipsis_line_ratio,
        q.line_punctuation_ratio,
        q.char_duplicate_ratio,
        q.newline_word_ratio,
        q.stop_words,
    ):
        assert measure(a) == pytest.approx(measure(b))
    assert q.short_line_ratio(a, 30) == pytest.approx(q.short_line_ratio(b, 30))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["the", "cat", "sat", "on", "mat", "."]), max_size=40),
    st.integers(2, 10),
)
def test_ngram_counts_ignore_the_whitespace_between_words(words: list[str], n: int) -> None:
    spaced, ragged = q.Split(" ".join(words)), q.Split("\t \n ".join(words))
    assert spaced.ngrams.top_chars(n) == ragged.ngrams.top_chars(n)
    assert spaced.ngrams.duplicate_chars(n) == ragged.ngrams.duplicate_chars(n)


def test_presets_set_the_published_thresholds() -> None:
    gopher = FilterSpec(preset="gopher")
    # datatrove's alphabetic rule on its tokens replaces the whitespace words' one
    assert (gopher.min_alpha_token_ratio, gopher.max_non_alpha_word_ratio) == (0.8, None)
    assert (FilterSpec().min_alpha_token_ratio, FilterSpec().max_non_alpha_word_ratio) == (
        None,
        0.2,
    )
    assert (gopher.min_words, gopher.max_words, gopher.min_stop_words) == (50, 100_000, 2)
    assert (gopher.max_bullet_line_ratio, gopher.max_ellipsis_line_ratio) == (0.9, 0.3)
    assert (gopher.max_duplicate_line_fraction, gopher.max_duplicate_paragraph_fraction) == (
        0.3,
        0.3,
    )
    assert (
        gopher.max_duplicate_line_char_fraction
        == gopher.max_duplicate_paragraph_char_fraction
        == 0.2
    )
    tops = [getattr(gopher, f"max_top_{n}gram_char_fraction") for n in (2, 3, 4)]
    dups = [getattr(gopher, f"max_duplicate_{n}gram_char_fraction") for n in range(5, 11)]
    assert (tops, dups) == ([0.2, 0.18, 0.16], [0.15, 0.14, 0.13, 0.12, 0.11, 0.10])
    c4 = FilterSpec(preset="c4")
    assert (c4.c4_min_sentences, c4.c4_min_words_per_line, c4.c4_max_word_length) == (5, 3, 1000)
    assert c4.c4_terminal_punctuation and c4.c4_lorem_ipsum and c4.c4_curly_bracket
    assert c4.c4_javascript and c4.c4_policy and c4.c4_remove_citations
    fw = FilterSpec(preset="fineweb")
    assert (fw.min_line_punctuation_ratio, fw.max_short_line_ratio, fw.short_line_length) == (
        0.12,
        0.67,
        30,
    )
    assert (fw.max_char_duplicate_ratio, fw.max_newline_word_ratio) == (0.01, 0.3)
    assert fw.min_words == FilterSpec().min_words  # a preset sets its own rules only


def test_written_keys_override_a_preset() -> None:
    spec = FilterSpec(preset="gopher", min_words=20, min_stop_words=None)
    assert (spec.min_words, spec.min_stop_words, spec.max_bullet_line_ratio) == (20, None, 0.9)


BASE = {"dataset": "d", "version": "v1", "tokenizer": {"id": "bytes"}}


def test_a_preset_is_part_of_the_config_identity() -> None:
    plain = validate({**BASE, "filters": {}}, Path("."))
    preset = validate({**BASE, "filters": {"preset": "gopher"}}, Path("."))
    spelled = validate({**BASE, "filters": dict(FILTER_PRESETS["gopher"])}, Path("."))
    assert len({plain.sha256, preset.sha256, spelled.sha256}) == 3
    assert preset.model.filters.model_dump(exclude={"preset"}) == spelled.model.filters.model_dump(
        exclude={"preset"}
    )


@pytest.mark.parametrize("preset", ["refinedweb", ["gopher", "dolma"], [], 3])
def test_an_unknown_preset_names_the_allowed_ones(preset: Any) -> None:
    with pytest.raises(ConfigError) as info:
        validate({**BASE, "filters": {"preset": preset}}, Path("."))
    assert "allowed: c4, fineweb, gopher" in str(info.value)


# datatrove's C4QualityFilter.filter and FineWebQualityFilter.filter at their defaults, verbatim
# but for the sentence splitter and the words (ours for both: NLTK's punkt is not installed)
DT_POLICY = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)


def dt_c4(text: str) -> tuple[str, str | None]:
    num_sentences = 0
    kept_lines = []
    for line in text.splitlines():
        line = line.strip()
        words = line.split()
        if any(len(word) > 1000 for word in words):
            continue
        line = q._CITATION.sub("", line)
        if not line.endswith((".", "?", "!", '"', "'")) or line.endswith("..."):
            continue
        if len(words) < 3:
            continue
        line_l = line.lower()
        if "lorem ipsum" in line_l:
            return text, "lorem_ipsum"
        if "javascript" in line_l:
            continue
        if "{" in line:
            return text, "curly_bracket"
        if any(p in line_l for p in DT_POLICY):
            continue
        num_sentences += q.sentences(line)
        kept_lines.append(line)
    if num_sentences < 5:
        return text, "too_few_sentences"
    return "\n".join(kept_lines).strip(), None


def dt_fineweb(text: str) -> str | None:
    lines = [line for line in text.split("\n") if line.strip() != ""]
    if len(lines) == 0:
        return "no_lines"
    ends = tuple(q.TERMINAL_PUNCTUATION)
    if sum(1 for line in lines if line.endswith(ends)) / len(lines) < 0.12:
        return "line_punctuation"
    if sum(1 for line in lines if len(line) <= 30) / len(lines) > 0.67:
        return "short_lines"
    if dt_find_duplicates(lines)[1] / len(text.replace("\n", "")) > 0.01:
        return "char_duplicates"
    if text.count("\n") / len(q.Split(text).tokens) > 0.3:
        return "list_ratio"
    return None


FRAGMENTS = [
    "The first of these lines ends well.",
    "Is this one a question, then?",
    "no ending on this line",
    "Lorem ipsum dolor sit amet.",
    "Please enable JavaScript to continue.",
    "We use cookies on this site.",
    "Read the terms of use first.",
    "A line with {braces} in it.",
    "Two words.",
    "A citation[12] and [edit] cut.",
    "Turn on Java[2]Script, then reload.",
    "Lorem[edit] ipsum dolor sit amet.",
    "Read our privacy[3] policy today.",
    "  Spaced out but fine here!  ",
    "It trails off into an ellipsis...",
    "x" * 1001 + " is long indeed.",
    "",
    " ",
    "Short!",
    "“Quoted sentence,” she said in the shop.",
]
LINES = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=14)


@settings(max_examples=300, deadline=None)
@given(LINES, st.sampled_from(["\n", "\r\n", "\n\n"]))
def test_c4_equals_datatroves(lines: list[str], newline: str) -> None:
    text = newline.join(lines)
    assert clean(**FILTER_PRESETS["c4"])(text) == dt_c4(text)


@settings(max_examples=300, deadline=None)
@given(LINES, st.sampled_from(["\n", "\n\n", " \n"]))
def test_fineweb_equals_datatroves(lines: list[str], newline: str) -> None:
    text = newline.join(lines)
    assert only(**FILTER_PRESETS["fineweb"])(text) == dt_fineweb(text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["- a", "• b", "  - c", "d...", "e… ", "the f", "to be", ""]), min_size=1
    )
)
def test_gopher_line_and_stop_word_rules_equal_datatroves(lines: list[str]) -> None:
    text = "\n".join(lines)
    split, rows = q.Split(text), text.splitlines()
    bullets = sum(s.lstrip().startswith("•") or s.lstrip().startswith("-") for s in rows)
    ellipses = sum(s.rstrip().endswith("...") or s.rstrip().endswith("…") for s in rows)
    assert q.bullet_line_ratio(split) == (bullets / len(rows) if rows else 0.0)
    assert q.ellipsis_line_ratio(split) == (ellipses / len(rows) if rows else 0.0)
    assert q.stop_words(split) == len(set(q.STOP_WORDS).intersection(set(split.tokens)))


def test_the_token_rule_counts_punctuation_the_word_rule_does_not() -> None:
    text = '"Yes," he said. "No!"'
    assert only(max_non_alpha_word_ratio=0.2)(text) is None
    assert q.alpha_token_ratio(q.Split(text)) == pytest.approx(4 / 11)
    assert q.alpha_token_ratio(q.Split(" \n ")) == 1.0  # no token: nothing without a letter


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["The", "cat", "said", "Mr.", "don't", "3.14", "well-known", "I."])
        | st.sampled_from([".", ",", "!", "?", '"', "-", "--", "...", "(", ")", "$"]),
        min_size=1,
        max_size=40,
    ),
    st.lists(st.sampled_from([" ", "", "\n", "  "]), min_size=40, max_size=40),
)
def test_alpha_token_ratio_equals_datatroves(pieces: list[str], gaps: list[str]) -> None:
    """datatrove's GopherQualityFilter: tokens holding a letter over all its English words,
    which are `split_into_words`'s: spaCy's `blank("en")` tokens, stripped, the empty dropped."""
    text = "".join(p + g for p, g in zip(pieces, gaps, strict=False))
    words = [w.strip() for w in (t.text for t in english()(text)) if w.strip()]
    expected = sum(any(c.isalpha() for c in w) for w in words) / len(words) if words else 1.0
    assert q.alpha_token_ratio(q.Split(text)) == pytest.approx(expected)


SENTENCES = [f"{s}." for s in PROSE.removesuffix(".").split(". ")]
DOCUMENT = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=14).map("\n".join),
    # sentences of one paragraph, some repeated: the repetition rules near their thresholds
    st.lists(st.sampled_from(SENTENCES), min_size=3, max_size=12).map(" ".join),
    st.lists(st.sampled_from(SENTENCES), min_size=3, max_size=12).map("\n".join),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(DOCUMENT, max_size=12),
    st.sampled_from(["gopher", "c4", "fineweb", ("gopher", "c4", "fineweb")]),
    st.sampled_from([1, 200, 1 << 17]),
)
def test_many_texts_at_once_give_what_each_one_alone_gives(
    texts: list[str], preset: Any, batch_chars: int
) -> None:
    """`QualityFilter.many` (n-grams counted per batch, batches cut anywhere) against a call per
    text: the same texts, reasons and removed-line counts."""
    spec = FilterSpec(preset=list(preset) if isinstance(preset, tuple) else preset)
    alone = f.QualityFilter(spec)
    expected = [alone(text) for text in texts]
    together = f.QualityFilter(spec)
    saved = f.BATCH_CHARS
    f.BATCH_CHARS = batch_chars
    try:
        assert together.many(texts) == expected
    finally:
        f.BATCH_CHARS = saved
    assert together.lines_removed == alone.lines_removed


@settings(max_examples=300, deadline=None)
@given(LINES, st.sampled_from(["\n", "\r\n", "\n\n"]))
def test_the_token_count_after_c4s_cut_is_the_cut_texts(lines: list[str], newline: str) -> None:
    """FineWeb's list ratio after C4's pass counts the cut text's tokens from the lines C4
    removed or edited; it is the count of the cut text's own tokens."""
    text = newline.join(lines)
    rules = f._c4_rules(FilterSpec(preset="c4"))
    changed: list[tuple[str, str]] = []
    split = q.Split(text)
    assert split.cut_token_count(changed) is None  # nothing counted yet: nothing to start from
    assert split.token_count == len(q.Split(text).tokens)
    cut, reason = q.c4_pass(text, rules, Counter(), changed)
    if reason is None:
        assert split.cut_token_count(changed) == len(q.Split(cut).tokens)
