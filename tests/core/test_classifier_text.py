"""The text a quality classifier reads: fastText's separators collapsed, as its reader splits."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from corpus_assets.core.text.quality import SEPARATORS, classifier_text

RUNS = re.compile(f"[{re.escape(SEPARATORS)}]+")


def test_newlines_tabs_and_runs_become_one_space_and_the_ends_go() -> None:
    text = "  The cat\n\nsat\ton the\r\nmat.\x00\x0b\x0c "
    assert classifier_text(text) == "The cat sat on the mat."
    assert classifier_text("ÉCOLE Été", lowercase=True) == "école été"


def test_unicode_spaces_are_kept_as_fasttext_keeps_them_inside_words() -> None:
    assert classifier_text("a\u00a0b\u2003c d") == "a\u00a0b\u2003c d"


@given(st.text(alphabet=st.sampled_from([*SEPARATORS, "a", "B", "é", "\u00a0", "."])))
def test_it_is_one_space_per_run_of_separators_stripped(text: str) -> None:
    line = classifier_text(text)
    assert line == RUNS.sub(" ", text).strip(" ")
    assert "\n" not in line and "  " not in line
    assert line.split(" ") == [w for w in RUNS.split(text) if w] or line == ""
