"""Quality filters: every drop names its reason; real prose is kept, generated junk is not."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from corpus_assets.core.config import FilterSpec
from corpus_assets.core.text import filters as f

DEFAULT = f.make_filter(FilterSpec())
LONG_WORDS = (
    "internationalization incomprehensibilities counterrevolutionaries "
    "uncharacteristically electroencephalographic institutionalization "
    "telecommunications misunderstandings representativeness disproportionately"
)
LONG_LINE = (
    "This one sentence is long enough that repeating it a few times dominates the text. " * 2
)
CHAR_REPEATS = "\n".join(
    [LONG_LINE, *(f"Short line number {n} is here." for n in range(8)), LONG_LINE, LONG_LINE]
)

# (text failing exactly one check under the defaults, its reason, the fields that turn it off)
ONE_FAILURE = [
    ("The cat sat on the mat and ate its food.", f.TOO_FEW_CHARS, ("min_chars",)),
    ("abcdefghi " * 100_001, f.TOO_MANY_CHARS, ("max_chars",)),
    (
        "Supercalifragilisticexpialidocious is quite a wonderful word",
        f.TOO_FEW_WORDS,
        ("min_words",),
    ),
    ("abc " * 200_001, f.TOO_MANY_WORDS, ("max_words",)),
    (
        "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c",
        f.MEAN_WORD_LENGTH,
        ("min_mean_word_length",),
    ),
    (LONG_WORDS, f.MEAN_WORD_LENGTH, ("max_mean_word_length",)),
    (
        "Great day at the beach today with friends #sun #sea #fun",
        f.SYMBOL_WORD_RATIO,
        ("max_symbol_word_ratio",),
    ),
    (
        " ".join(["#$%&*", "@!{}[", "]<>|~"] * 10),
        f.SYMBOL_WORD_RATIO,
        ("max_symbol_word_ratio", "max_non_alpha_word_ratio"),
    ),
    (
        "\n".join(["Subscribe to our newsletter for more news"] * 30),
        f.DUPLICATE_LINES,
        ("max_duplicate_line_fraction", "max_duplicate_line_char_fraction"),
    ),
    (CHAR_REPEATS, f.DUPLICATE_LINES, ("max_duplicate_line_char_fraction",)),
    (
        "Results 1234 5678 9012 3456 7890 2345 6789 0123 4567 8901 were recorded today",
        f.NON_ALPHA_WORDS,
        ("max_non_alpha_word_ratio",),
    ),
]


IDS = [f"{reason}-{i}" for i, (_, reason, _) in enumerate(ONE_FAILURE)]


def _spec(**changes: Any) -> FilterSpec:
    return FilterSpec(**changes)


@pytest.mark.parametrize(("text", "reason", "fields"), ONE_FAILURE, ids=IDS)
def test_each_check_names_its_reason(text: str, reason: str, fields: tuple[str, ...]) -> None:
    assert DEFAULT(text) == reason


@pytest.mark.parametrize(("text", "reason", "fields"), ONE_FAILURE, ids=IDS)
def test_a_null_threshold_turns_its_check_off(
    text: str, reason: str, fields: tuple[str, ...]
) -> None:
    assert f.make_filter(_spec(**dict.fromkeys(fields)))(text) is None


def test_every_threshold_null_keeps_everything() -> None:
    nulls = {name: None for name in FilterSpec.model_fields if name != "enabled"}
    keep = f.make_filter(_spec(**nulls))
    assert [keep(text) for text, _, _ in ONE_FAILURE] == [None] * len(ONE_FAILURE)
    assert keep("") is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("ok", f.TOO_FEW_CHARS),
        ("Click here.", f.TOO_FEW_CHARS),
        ("lol", f.TOO_FEW_CHARS),
        ("Page 3 of 7", f.TOO_FEW_CHARS),
        ("", f.TOO_FEW_CHARS),
        ("#$%&*@!{}[]<>|~^" * 20, f.TOO_FEW_WORDS),
        ("\n".join(["HAMLET."] * 40), f.DUPLICATE_LINES),
        ("\n".join(["  And so, good night."] * 30), f.DUPLICATE_LINES),
    ],
)
def test_generated_junk_is_dropped_for_its_reason(text: str, reason: str) -> None:
    assert DEFAULT(text) == reason


def test_the_first_failing_check_names_the_reason() -> None:
    soup = "#$%&*@!{}[]<>|~^" * 20
    assert DEFAULT(soup) == f.TOO_FEW_WORDS
    assert f.make_filter(_spec(min_words=None))(soup) == f.MEAN_WORD_LENGTH
    no_length = _spec(min_words=None, max_mean_word_length=None)
    assert f.make_filter(no_length)(soup) == f.SYMBOL_WORD_RATIO
    assert len(set(f.REASONS)) == len(f.REASONS)


def test_disabled_filters_keep_everything() -> None:
    keep = f.make_filter(_spec(enabled=False, min_chars=10**9))
    assert [keep(t) for t in ("", "ok", "#$%&" * 100, "spam\n" * 100)] == [None] * 4


def test_thresholds_are_inclusive() -> None:
    text = "one two three four five six seven eight nine ten"
    assert f.make_filter(_spec(min_chars=len(text), min_words=10, max_words=10))(text) is None
    assert f.make_filter(_spec(min_chars=len(text) + 1))(text) == f.TOO_FEW_CHARS
    assert f.make_filter(_spec(min_chars=None, max_words=9))(text) == f.TOO_MANY_WORDS


@pytest.mark.parametrize(
    ("text", "ratio"),
    [
        ("a 1 b 2", 0.5),
        ("\x1c12\x1dab\tc3 _ -- a_b", 0.5),
        ("hello, world! 42 ... 3.14 x", 0.5),
        ("日本 語 ١٢٣ 456 “—” école", 0.5),
        ("", 0.0),
    ],
)
def test_non_alpha_word_ratio(text: str, ratio: float) -> None:
    assert f.non_alpha_word_ratio(text, text.split()) == pytest.approx(ratio)


def test_ascii_fast_path_agrees_with_the_regex(shakespeare_scenes: list[str]) -> None:
    samples = [s for s in shakespeare_scenes[:300] if s.isascii()]
    samples += ["1 2 3", " a1 _ 2b ", "x\x1f9\x0b--\x0c.", "(555) 123-4567 or 10.0.0.1"]
    for text in samples:
        assert f._ascii_words_with_letter(text) == f._words_with_letter(text.split()), text


def test_duplicate_line_fractions_skip_empty_lines() -> None:
    assert f.duplicate_line_fractions("a\n\n\nb\n\nc") == (0.0, 0.0)
    assert f.duplicate_line_fractions("ab\nab\n\nab\ncd") == (0.5, pytest.approx(4 / 12))


# --- real data -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def make_corpus(make_corpus_script: Path) -> ModuleType:
    """The benchmark generator, imported to split the texts exactly as it does."""
    spec = importlib.util.spec_from_file_location("make_corpus", make_corpus_script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tinystories(make_corpus: ModuleType) -> list[str]:
    text = make_corpus.TINY.read_text(encoding="utf-8")
    return [s.strip() for s in text.split("<|endoftext|>")[:-1] if s.strip()]


@pytest.fixture(scope="module")
def shakespeare_scenes(make_corpus: ModuleType, tinystories: list[str]) -> list[str]:
    docs: list[str] = make_corpus.base_documents()
    return docs[len(tinystories) :]


def test_every_tinystories_story_is_kept(tinystories: list[str]) -> None:
    assert len(tinystories) == 1727
    assert {s: DEFAULT(s) for s in tinystories if DEFAULT(s)} == {}


def test_shakespeare_scenes_are_kept(shakespeare_scenes: list[str]) -> None:
    dropped = {s[:80]: DEFAULT(s) for s in shakespeare_scenes if DEFAULT(s)}
    assert len(shakespeare_scenes) == 641  # eight plays in two editions, scenes of >= 3 kB
    assert len(dropped) <= len(shakespeare_scenes) // 100, dropped


def test_verse_with_repeated_speaker_names_is_kept() -> None:
    speeches = [
        "GONZALO.\nSir, you may be sure of it.",
        "SEBASTIAN.\nOne: tell.",
        "GONZALO.\nWhen every grief is entertain'd that's offer'd,\nComes to the entertainer.",
        "SEBASTIAN.\nA dollar.",
        "GONZALO.\nDolour comes to him, indeed: you have spoken truer than you purposed.",
        "SEBASTIAN.\nYou have taken it wiselier than I meant you should.",
    ]
    assert DEFAULT("\n\n".join(speeches)) is None


def test_generated_corpus_scores(tmp_path: Path, make_corpus: ModuleType) -> None:
    out = tmp_path / "bench"
    subprocess.run(
        [sys.executable, make_corpus.__file__, "--out", str(out), "--mb", "1"],
        check=True,
        capture_output=True,
    )
    junk = json.loads((out / "truth.json").read_text(encoding="utf-8"))["junk"]
    reasons: dict[str, str | None] = {}
    for part in sorted(out.glob("part-*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            reasons[doc["id"]] = DEFAULT(doc["text"])
    kept_junk = [i for i in junk if reasons[i] is None]
    dropped_good = {i: r for i, r in reasons.items() if i not in junk and r is not None}
    assert len(junk) >= 5
    assert len(kept_junk) <= len(junk) // 100, kept_junk
    assert len(dropped_good) <= (len(reasons) - len(junk)) * 0.005, dropped_good
    assert set(reasons[i] for i in junk) <= set(f.REASONS)
