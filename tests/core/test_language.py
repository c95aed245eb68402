"""Language identification: hand-written documents kept or dropped with reason `language`, and
the model file's sha256 in the config identity only when the filter is on."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.core.config import (
    FilterSpec,
    language_model_file,
    language_model_sha256,
    sha256_hex,
    validate,
)
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.text.language import LANGUAGE, LanguageId, labels, language_id

HEAD = {"dataset": "t", "version": "v1", "tokenizer": {"id": "bytes"}}
DOCS = {
    "en": (
        "The river ran past the old mill, and the miller's daughter watched it from her window. "
        "Every morning she counted the boats that carried grain to the town below the hills."
    ),
    "fr": (
        "La rivière passait devant le vieux moulin, et la fille du meunier la regardait depuis "
        "sa fenêtre. Chaque matin, elle comptait les bateaux qui portaient le grain vers la ville."
    ),
    "de": (
        "Der Fluss floss an der alten Mühle vorbei, und die Tochter des Müllers sah ihm von ihrem "
        "Fenster aus zu. Jeden Morgen zählte sie die Boote, die Getreide in die Stadt brachten."
    ),
    "es": (
        "El río pasaba junto al viejo molino, y la hija del molinero lo miraba desde su ventana. "
        "Cada mañana contaba los barcos que llevaban el grano al pueblo bajo las colinas."
    ),
    "it": (
        "Il fiume scorreva accanto al vecchio mulino e la figlia del mugnaio lo guardava dalla "
        "sua finestra. Ogni mattina contava le barche che portavano il grano alla città."
    ),
    "nl": (
        "De rivier stroomde langs de oude molen en de dochter van de molenaar keek ernaar vanuit "
        "haar raam. Elke ochtend telde ze de boten die het graan naar de stad brachten."
    ),
    "ru": (
        "Река текла мимо старой мельницы, и дочь мельника смотрела на неё из своего окна. "
        "Каждое утро она считала лодки, которые везли зерно в город под холмами."
    ),
}


@pytest.mark.parametrize("code", sorted(DOCS))
def test_each_language_is_named_and_kept_only_when_asked_for(code: str) -> None:
    lang, score, reason = LanguageId(["en"], 0.65)(DOCS[code])
    assert lang == code and score > 0.65
    assert reason == (None if code == "en" else LANGUAGE)
    assert LanguageId([code, "en"], 0.65)(DOCS[code])[2] is None


def test_a_score_below_the_minimum_drops_the_document() -> None:
    mixed = "The cat sat on the mat. Le chat est assis sur le tapis."
    _lang, score, reason = LanguageId(["en", "fr"], 0.9)(mixed)
    assert score < 0.9 and reason == LANGUAGE
    assert LanguageId(["en", "fr"], 0.0)(mixed)[2] is None


def test_under_one_half_a_language_that_is_not_the_top_one_keeps_the_text() -> None:
    """Like datatrove: kept when any language asked for reaches the minimum score."""
    mixed = "The cat sat on the mat and then sur le tapis et regarde les oiseaux"
    lang, _score, _reason = LanguageId(["fr"], 0.01)(mixed)
    assert lang == "fr"  # en is second, at about 0.04
    assert LanguageId(["en"], 0.03)(mixed)[2] is None
    assert LanguageId(["en"], 0.6)(mixed)[2] == LANGUAGE


def test_line_breaks_do_not_change_the_answer() -> None:
    one = LanguageId(["de"], 0.5)(DOCS["de"])
    assert LanguageId(["de"], 0.5)(DOCS["de"].replace(" ", "\n")) == one


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.floats(min_value=0.0, max_value=1.0))
def test_any_text_gets_one_of_the_models_languages_and_a_probability(text: str, low: float) -> None:
    lang, score, reason = LanguageId(["en"], low)(text)
    assert lang in KNOWN and 0.0 <= score <= 1.0
    if lang == "en" and score >= low:
        assert reason is None
    if low > 0.5 and not (lang == "en" and score >= low):
        assert reason == LANGUAGE


KNOWN = set(labels())


def test_an_unknown_code_is_a_config_error_naming_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match=r"languages: xx not known to the model; allowed: af, "):
        LanguageId(["en", "xx"], 0.5)
    assert len(KNOWN) == 176


def test_the_filter_is_off_unless_languages_are_named() -> None:
    assert language_id(FilterSpec()) is None
    assert language_id(FilterSpec(languages=("en",), enabled=False)) is None
    assert isinstance(language_id(FilterSpec(languages=("en",))), LanguageId)
    with pytest.raises(
        ValueError, match="language <2 characters, not shown> is not a code like 'en'"
    ):
        FilterSpec(languages=("EN",))


# --- identity --------------------------------------------------------------------------------


def test_without_languages_the_config_is_hashed_as_written(tmp_path: Path) -> None:
    raw = {**HEAD, "filters": {"min_language_score": 0.5}}
    assert validate(raw, tmp_path).raw == raw


def test_with_languages_the_models_sha256_enters_the_identity(tmp_path: Path) -> None:
    raw = {**HEAD, "filters": {"languages": ["en"]}}
    cfg = validate(raw, tmp_path)
    model_sha = sha256_hex(language_model_file().read_bytes())
    assert model_sha == language_model_sha256()
    assert cfg.raw["filters"] == {"languages": ["en"], "language_model_sha256": model_sha}
    assert cfg.sha256 != sha256_hex(b"") and cfg.sha256 == validate(cfg.raw, tmp_path).sha256
    other = {**HEAD, "filters": {"languages": ["en"], "language_model_sha256": "0" * 64}}
    with pytest.raises(ConfigError, match=r"language_model_sha256 = '0000.*another model"):
        validate(other, tmp_path)
