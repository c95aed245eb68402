"""Which of the generator's "unique" documents are in fact near copies of an earlier document.

make_corpus.py, once its base documents run out, builds new ones by recombining paragraphs of
earlier ones. A TinyStories story is one paragraph, so a recombined document is often a whole
earlier story plus a line or two of Shakespeare: a near copy (word 5-gram Jaccard 0.8-0.95) that
truth.json counts as unique. This finds them with an exact Jaccard check (MinHash only proposes
the candidate pairs), so the bench can report how many truly unique documents were kept.
"""

from __future__ import annotations

import json
from pathlib import Path

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.text.minhash import duplicate_of, jaccard, signatures
from corpus_assets.core.text.normalize import normalize


def originals_that_are_near_copies(data: Path, truth: dict[str, object]) -> set[str]:
    """Ids of truth's unique documents whose exact Jaccard with an earlier one is >= 0.8."""
    skip = set(truth["exact"]) | set(truth["near"]) | set(truth["junk"])  # type: ignore[call-overload]
    ids: list[str] = []
    texts: list[str] = []
    for part in sorted(data.glob("part-*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            if doc["id"] not in skip:
                ids.append(doc["id"])
                texts.append(normalize(doc["text"]))
    spec = DedupSpec()
    match = duplicate_of(
        signatures(texts, spec),
        spec,
        lambda i, j: jaccard(texts[i], texts[j], spec.ngram) >= spec.threshold,
    )
    return {ids[k] for k in range(len(ids)) if match[k] >= 0}
