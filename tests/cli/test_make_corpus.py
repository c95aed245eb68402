"""bench/make_corpus.py: its truth.json is right, checked with the project's own dedup tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.text.minhash import duplicate_of, jaccard, signatures
from corpus_assets.core.text.normalize import normalize
from corpus_assets.core.text.partial import paragraphs

MAKE_CORPUS = Path(__file__).resolve().parents[2] / "bench" / "make_corpus.py"
LABELS = ("exact", "near", "partial", "junk")
SPACED_FORMATS = {"na_spaced", "na_paren_spaced", "na_plus1_spaced", "uk_spaced"}
SPACED_FORMATS |= {"uk_plus44_spaced", "fr_spaced", "fr_plus33_spaced", "de_plus49_spaced"}


def make(out: Path, mb: str, seed: str = "0") -> tuple[dict[str, Any], dict[str, str]]:
    cmd = [sys.executable, str(MAKE_CORPUS), "--out", str(out), "--mb", mb, "--seed", seed]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    docs: dict[str, str] = {}
    for part in sorted(out.glob("part-*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            docs[doc["id"]] = doc["text"]
    return truth, docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, str]]:
    """A 3 MB corpus: real texts and generated ones (the real ones alone are ~3.5 MB)."""
    return make(tmp_path_factory.mktemp("corpus") / "c", "3")


def test_every_document_has_exactly_one_label(
    corpus: tuple[dict[str, Any], dict[str, str]],
) -> None:
    truth, docs = corpus
    labelled = [*truth["unique"], *(i for k in LABELS for i in truth[k])]
    assert sorted(labelled) == sorted(docs) and len(docs) == truth["documents"]
    assert truth["bytes"] == sum(len(t.encode()) for t in docs.values()) >= 3_000_000
    assert all(len(truth[k]) >= 10 for k in LABELS)
    assert set(truth["junk"].values()) == {"short", "symbols", "repeated_lines", "long_words"}


def test_no_unique_document_is_a_near_copy_of_another(
    corpus: tuple[dict[str, Any], dict[str, str]],
) -> None:
    truth, docs = corpus
    texts = [normalize(docs[i]) for i in truth["unique"]]
    spec = DedupSpec(threshold=0.7)
    match = duplicate_of(
        signatures(texts, spec), spec, lambda i, j: jaccard(texts[i], texts[j], 5) >= 0.7
    )
    assert [(truth["unique"][k], int(m)) for k, m in enumerate(match) if m >= 0] == []
    seen: set[str] = set()
    for text in texts:  # nor holds an earlier one whole (the recombination flaw)
        assert not any(p in seen for p in [text, *paragraphs(text)])
        seen.add(text)


def test_copies_are_what_truth_says(corpus: tuple[dict[str, Any], dict[str, str]]) -> None:
    truth, docs = corpus
    unique = set(truth["unique"])
    for doc_id, of in truth["exact"].items():
        assert of in unique and of < doc_id and docs[doc_id] == docs[of]
    for doc_id, near in truth["near"].items():
        assert near["of"] in unique and near["of"] < doc_id
        assert docs[doc_id] != docs[near["of"]]
        assert jaccard(normalize(docs[doc_id]), normalize(docs[near["of"]]), 5) >= 0.8
    for doc_id, part in truth["partial"].items():
        original, text = normalize(docs[part["of"]]), normalize(docs[doc_id])
        assert part["of"] in unique and jaccard(original, text, 5) >= 0.8
        assert sorted(paragraphs(text)) == sorted([*paragraphs(original), part["new"]])


def test_pii_values_are_in_their_documents(corpus: tuple[dict[str, Any], dict[str, str]]) -> None:
    truth, docs = corpus
    items = [(i, p) for i, found in truth["pii"].items() for p in found]
    assert all(p["value"] in docs[i] for i, p in items)
    assert {p["kind"] for _, p in items} == {"email", "ip", "phone"}
    assert {p["format"] for _, p in items} >= {"email", "ipv4", "ipv6"} | SPACED_FORMATS
    unique = set(truth["unique"])
    assert sum(i in unique for i, _ in items) >= 50


def test_same_seed_same_bytes_other_seed_other_corpus(tmp_path: Path) -> None:
    first, again, other = (
        make(tmp_path / n, "0.3", s) for n, s in (("a", "0"), ("b", "0"), ("c", "1"))
    )
    assert first == again
    assert first[1] != other[1]
