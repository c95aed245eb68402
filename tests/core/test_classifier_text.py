"""The text a quality classifier reads: fastText's words of the document, on one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.classifier import GOOD, train

from corpus_assets.core.text.quality import SEPARATORS, Scorer, classifier_text, load_model

RUNS = re.compile(f"[{re.escape(SEPARATORS)}]+")
PIECES = st.lists(st.sampled_from([*SEPARATORS, "\u00a0", "  ", "\n\n", *GOOD[:6], "Bright."]))


def test_newlines_become_spaces_and_lowercase_is_asked_for() -> None:
    assert classifier_text("The cat\n\nsat\ton the\r\nmat.") == "The cat  sat\ton the\r mat."
    assert classifier_text("ÉCOLE\nÉté", lowercase=True) == "école été"
    assert classifier_text("a\u00a0b\u2028c") == "a\u00a0b\u2028c"  # words to fastText


@given(PIECES.map("".join))
def test_the_line_holds_the_words_fasttext_reads_in_the_text(text: str) -> None:
    line = classifier_text(text)
    assert "\n" not in line
    assert [w for w in RUNS.split(line) if w] == [w for w in RUNS.split(text) if w]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tmp_path_factory.mktemp("classifier-text"))


@settings(max_examples=60, deadline=None)
@given(text=PIECES.map("".join))
def test_the_score_is_the_score_of_the_words_one_space_apart(model: Path, text: str) -> None:
    scorer = Scorer(model, "hq")
    spaced = " ".join(w for w in RUNS.split(text) if w)
    labels, probs = load_model(str(model)).predict(spaced, k=-1)
    assert scorer(text) == min(1.0, float(dict(zip(labels, probs, strict=True))["__label__hq"]))


def test_a_model_the_original_fasttext_trained_scores_as_a_classifier() -> None:
    """lid.176.ftz (bundled) was trained and quantized by Facebook's fastText: it loads and
    scores like a model trained here, its labels checked."""
    from corpus_assets.core.config import language_model_file
    from corpus_assets.core.errors import ConfigError

    english, french = Scorer(language_model_file(), "en"), Scorer(language_model_file(), "fr")
    texts = ["The cat sat on the mat and looked\nat the garden.", "Le chat dort sur le tapis."]
    assert [round(s, 2) > 0.5 for s in english.many(texts)] == [True, False]
    assert french(texts[1]) > 0.5
    with pytest.raises(ConfigError, match="label 'xx' is not one of the model's labels"):
        Scorer(language_model_file(), "xx")
