"""Partial copies: which paragraphs of a near copy are new text, and when there are none."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from corpus_assets.core.text.minhash import jaccard
from corpus_assets.core.text.partial import new_paragraphs, paragraphs

DATA = Path(__file__).resolve().parents[2] / "data"
TINY = DATA / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"
SPEECH = (
    "LORENZO.\nLeave holloaing, man. Here! The moon shines bright: in such a night as this,\n"
    "When the sweet wind did gently kiss the trees and they did make no noise."
)
OTHER = (
    "The committee met on Tuesday to review the budget for the new library wing, and after a "
    "long debate it voted to postpone the decision until the spring."
)


@pytest.fixture(scope="module")
def story() -> str:
    """A long real TinyStories story: one paragraph (its lines are separated by single breaks)."""
    stories = [s.strip() for s in TINY.read_text(encoding="utf-8").split("<|endoftext|>")]
    return max(stories, key=len)


def edited(text: str, seed: int = 0) -> str:
    """About 2% of the words changed: an edited copy, the kind near dedup exists for."""
    rng = random.Random(seed)
    words = text.split(" ")
    for i in rng.sample(range(len(words)), max(1, len(words) // 50)):
        words[i] = rng.choice(["the", "a", "very", "then"])
    return " ".join(words)


def test_paragraphs_are_separated_by_blank_lines() -> None:
    text = "one\ntwo\n\n  three  \n \t\n\nfour\n\n\n"
    assert paragraphs(text) == ["one\ntwo", "three", "four"]
    assert paragraphs("") == [] and paragraphs("\n\n\n") == []


def test_a_kept_document_plus_new_paragraphs_keeps_only_the_new_ones(story: str) -> None:
    composed = f"{story}\n\n{SPEECH}\n\n{OTHER}"
    assert jaccard(story, composed, 5) >= 0.8  # near dedup alone would drop it whole
    assert new_paragraphs(story, composed, 5) == f"{SPEECH}\n\n{OTHER}"
    # the shared paragraph may be anywhere, and spaced differently
    respaced = f"{SPEECH}\n \n{story.replace(chr(10), '  ' + chr(10))}"
    assert new_paragraphs(story, respaced, 5) == SPEECH


def test_an_edited_copy_has_no_new_paragraphs(story: str) -> None:
    copy = "Reposted: " + edited(story)
    assert jaccard(story, copy, 5) >= 0.8
    assert new_paragraphs(story, copy, 5) is None  # nothing of the kept text in it verbatim
    assert new_paragraphs(story, f"{copy}\n\n{SPEECH}", 5) is None


def test_edited_paragraphs_left_after_the_cut_are_not_new(story: str) -> None:
    lines = story.split("\n")
    kept = "\n\n".join(lines)  # the story as many paragraphs
    half = len(lines) // 2
    copy = "\n\n".join(lines[:half] + [edited(line, n) for n, line in enumerate(lines[half:])])
    assert new_paragraphs(kept, copy, 5) is None


def test_a_copy_of_the_kept_document_only_has_nothing_new(story: str) -> None:
    assert new_paragraphs(story, story, 5) is None
    assert new_paragraphs(f"{story}\n\n{SPEECH}", story, 5) is None
