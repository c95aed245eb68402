"""Partial copies: which paragraphs of a near copy are new text, and when there are none."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.core.text.minhash import jaccard
from corpus_assets.core.text.normalize import collapse
from corpus_assets.core.text.partial import MIN_NEW_WORDS, new_paragraphs, new_words, paragraphs

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


SCENE = (  # a kept document of several paragraphs, the kind a footer is appended to
    "HAMLET.\nWho's there?\n\n"
    "HORATIO.\nFriends to this ground, and liegemen to the Dane, who keep the watch tonight.\n\n"
    "MARCELLUS.\nPeace, break thee off; look where it comes again, in the same figure, like "
    "the King that's dead.\n\n"
    "BERNARDO.\nLooks it not like the King? Mark it, Horatio; it harrows me with fear and "
    "wonder, and I would speak to it."
)
FOOTERS = {
    "signature": "-- \nAlice Smith\nSenior Editor, The Valley Gazette",
    "share": "Share this: Twitter, Facebook, Email, Print",
    "mailing_list": "To unsubscribe from this list, send an email to list-leave@example.org.",
    "sent_from": "Sent from my iPhone",
}


@pytest.mark.parametrize("name", sorted(FOOTERS))
@pytest.mark.parametrize("joint", ["\n", "\n\n"])
def test_a_footer_appended_to_the_kept_document_is_no_new_text(name: str, joint: str) -> None:
    """Appended to the last paragraph, the rest would be that paragraph plus the footer; as a
    paragraph of its own, the footer alone: either way fewer than MIN_NEW_WORDS new words."""
    copy = SCENE + joint + FOOTERS[name]
    assert jaccard(SCENE, copy, 5) >= 0.6
    assert new_words(SCENE, copy) == len(FOOTERS[name].split()) < MIN_NEW_WORDS
    assert new_paragraphs(SCENE, copy, 5) is None


def test_a_new_paragraph_of_thirteen_words_is_kept_and_of_twelve_is_not() -> None:
    thirteen = " ".join(OTHER.split()[:13])
    assert new_paragraphs(SCENE, f"{SCENE}\n\n{thirteen}", 5) == thirteen
    twelve = " ".join(OTHER.split()[:12])
    assert new_paragraphs(SCENE, f"{SCENE}\n\n{twelve}", 5) is None
    # a new line after the original's last line: kept with it (only the new line's words count)
    assert new_words(SCENE, f"{SCENE}\n{OTHER}") == len(OTHER.split())
    kept = new_paragraphs(SCENE, f"{SCENE}\n{OTHER}", 5)
    assert kept == SCENE.split("\n\n")[-1] + "\n" + OTHER


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(WORD, min_size=6, max_size=20), min_size=2, max_size=6),
    st.lists(WORD, min_size=1, max_size=30),
    st.sampled_from(["\n", "\n\n"]),
)
def test_the_kept_document_plus_any_text_keeps_it_only_with_enough_new_words(
    paras: list[list[str]], added: list[str], joint: str
) -> None:
    kept = "\n\n".join(" ".join(p) for p in paras)
    extra = " ".join(added)
    rest = new_paragraphs(kept, kept + joint + extra, 5)
    if len(added) < MIN_NEW_WORDS or collapse(extra) in {collapse(x) for x in kept.split("\n")}:
        assert rest is None
    elif rest is not None:
        assert rest.endswith(extra) and new_words(kept, rest) == len(added)
