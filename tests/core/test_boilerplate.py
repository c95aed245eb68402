"""Boilerplate across documents: lines held by more than N documents go from every document."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.core.config import FilterSpec
from corpus_assets.core.text import boilerplate as b

FOOTER = "Share this story with your friends!"
NAV = "Home | About | Contact"
SPEC = FilterSpec(boilerplate_max_documents=2)


def story(n: int) -> str:
    return f"Story number {n} begins here.\nIt is about a cat called Tom{n}.\n{FOOTER}"


def test_a_line_in_more_than_n_documents_goes_from_every_document(tmp_path: Path) -> None:
    docs = [story(n) for n in range(3)] + [f"{NAV}\nA page of its own, with words.\n{NAV}"]
    found = b.find(SPEC, [docs[:2], docs[2:]], tmp_path)
    assert found.tolist() == [b.line_key(FOOTER)]  # in 3 documents; NAV is in one (twice)
    strip = b.stripper(SPEC, tmp_path)
    assert strip is not None
    assert strip(docs[0]) == ("Story number 0 begins here.\nIt is about a cat called Tom0.", 1)
    assert strip(docs[3]) == (docs[3], 0)
    assert strip("  Share  this story with\tyour friends!  \nMore.") == ("More.", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [b.BOILERPLATE]


def test_n_documents_are_not_more_than_n(tmp_path: Path) -> None:
    assert b.find(SPEC, [[story(0), story(1)]], tmp_path).size == 0


def test_short_lines_never_count(tmp_path: Path) -> None:
    docs = [f"HAMLET.\nLine {n} of a speech that is long enough." for n in range(5)]
    assert b.find(SPEC, [docs], tmp_path).size == 0
    loose = FilterSpec(boilerplate_max_documents=2, boilerplate_min_words=1)
    assert b.find(loose, [docs], tmp_path / "loose").tolist() == [b.line_key("HAMLET.")]


def test_off_by_default(tmp_path: Path) -> None:
    assert FilterSpec().boilerplate_max_documents is None
    assert b.stripper(FilterSpec(), tmp_path) is None
    assert b.stripper(FilterSpec(boilerplate_max_documents=2, enabled=False), tmp_path) is None


def test_a_found_file_is_reused(tmp_path: Path) -> None:
    first = b.find(SPEC, [[story(n) for n in range(3)]], tmp_path)
    assert b.find(SPEC, [["nothing like it"]], tmp_path).tolist() == first.tolist()


LINE = st.sampled_from([FOOTER, NAV, "Posted in Stories | Leave a comment", "x y z", "one two"])
DOC = st.lists(st.one_of(LINE, st.text("abc ", min_size=5, max_size=15)), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(st.lists(DOC, min_size=1, max_size=30), st.integers(1, 4), st.integers(0, 8))
def test_the_counts_do_not_depend_on_order_tasks_or_ranges(
    tmp_path_factory: pytest.TempPathFactory, docs: list[list[str]], limit: int, bits: int
) -> None:
    texts = ["\n".join(d) for d in docs]
    spec = FilterSpec(boilerplate_max_documents=limit)
    expected = sorted(
        {
            b.line_key(line)
            for t in texts
            for line in t.split("\n")
            if len(line.split()) >= 3
            and sum(b.line_key(line) in b.document_lines(u, 3) for u in texts) > limit
        }
    )
    folder = tmp_path_factory.mktemp("one")
    assert b.find(spec, [texts], folder).tolist() == expected
    old = b.RANGE_HASHES
    b.RANGE_HASHES = max(1, len(texts) >> bits)  # many hash ranges, counted one at a time
    try:
        split = [texts[::-1][k : k + 3] for k in range(0, len(texts), 3)]
        again = b.find(spec, split, tmp_path_factory.mktemp("many"))
    finally:
        b.RANGE_HASHES = old
    assert again.tolist() == expected and again.dtype == np.uint64
