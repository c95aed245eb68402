"""The numbers behind `corpus report`: length histograms before and after filtering, tokens,
quality classifier scores.

Lengths are counted in **characters** (Unicode code points, Python's `len`), the unit of the
`min_chars`/`max_chars` filters:
- before filtering: every document the shard stage read from the raw cache for this build
  (the manifest's `sources`, planned into the same tasks and read by the same `read_task`),
  normalized as the stage normalizes it before the filters look at it;
- after filtering: the `text` of every row of the build's shards (after dedup and PII scrubbing).
Tokens per document are read from the `.idx` offsets of the tokens build, EOS included.

Histograms stream: their bins are fixed (0, then quarter-octaves up to 2**40), so counts add up
batch by batch without holding one length per document; they are trimmed to the bins in use.
The quality classifiers' score histograms are the shards manifest's own (every document a
classifier scored, also those it or a later step dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_assets.core.errors import DataError
from corpus_assets.core.secrets import mask_text
from corpus_assets.core.stages.shard_tasks import plan_tasks, read_task
from corpus_assets.core.store.digests import verify_files
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.text.normalize import normalize
from corpus_assets.core.text.tokenizer import IDX_DTYPE

EDGES = np.concatenate(
    [[0], np.unique(np.round(2.0 ** (np.arange(0, 40 * 4 + 1) / 4)).astype(np.int64))]
)
"""Bin edges: [0, 1), [1, 2), [2, 3) ... quarter-octave steps; the last bin is closed."""


@dataclass
class Histogram:
    """Counts of values in the fixed bins of EDGES, with their count, sum, min and max."""

    counts: np.ndarray[Any, np.dtype[np.int64]] = field(
        default_factory=lambda: np.zeros(len(EDGES) - 1, dtype=np.int64)
    )
    documents: int = 0
    total: int = 0
    smallest: int | None = None
    largest: int | None = None

    def add(self, values: np.ndarray[Any, Any]) -> None:
        if values.size == 0:
            return
        self.counts += np.histogram(values, bins=EDGES)[0]
        self.documents += int(values.size)
        self.total += int(values.sum())
        low, high = int(values.min()), int(values.max())
        self.smallest = low if self.smallest is None else min(self.smallest, low)
        self.largest = high if self.largest is None else max(self.largest, high)

    def used(self) -> tuple[int, int]:
        """The first and one past the last bin holding a value ((0, 0) when empty)."""
        nonzero = np.flatnonzero(self.counts)
        return (int(nonzero[0]), int(nonzero[-1]) + 1) if nonzero.size else (0, 0)

    def to_json(self, bins: tuple[int, int] | None = None) -> dict[str, Any]:
        """The trimmed histogram: `counts[i]` values in `[edges[i], edges[i+1])`."""
        lo, hi = bins or self.used()
        return {
            "edges": [int(e) for e in EDGES[lo : hi + 1]] if hi > lo else [],
            "counts": [int(c) for c in self.counts[lo:hi]],
            "documents": self.documents,
            "total": self.total,
            "min": self.smallest,
            "max": self.largest,
            "mean": round(self.total / self.documents, 3) if self.documents else None,
        }


def common_bins(*hists: Histogram) -> tuple[int, int]:
    """The bin range covering every histogram's values (so two can share one axis)."""
    ranges = [h.used() for h in hists if h.documents]
    if not ranges:
        return (0, 0)
    return (min(r[0] for r in ranges), max(r[1] for r in ranges))


def _raw_lengths(root: Path, sources: list[dict[str, Any]]) -> Histogram:
    layout = Layout(root)
    hist = Histogram()
    for task in plan_tasks(layout, sources):
        texts = read_task(task).column("text").to_pylist()
        hist.add(np.fromiter((len(normalize(t)) for t in texts), np.int64, len(texts)))
    return hist


def lengths_before(root: Path, manifest: dict[str, Any]) -> Histogram:
    """Characters of every raw document the shard stage read (normalized as it does)."""
    layout = Layout(root)
    for source in manifest["sources"]:
        problems = verify_files(layout.raw_source(source["source_key"]), source["files"])
        if problems:
            raise DataError(
                f"raw cache of source {source['name']!r} differs from the shards manifest: "
                f"{'; '.join(problems[:3])}; run the fetch stage again"
            )
    hist = _raw_lengths(root, manifest["sources"])
    if hist.documents != manifest["documents_in"]:
        raise DataError(
            f"the raw cache holds {hist.documents} documents for this build, "
            f"the shards manifest says documents_in {manifest['documents_in']}"
        )
    return hist


def lengths_after(folder: Path, manifest: dict[str, Any]) -> Histogram:
    """Characters of the `text` of every shard row, read batch by batch."""
    hist = Histogram()
    for entry in manifest["shards"]:
        for batch in pq.ParquetFile(folder / entry["name"]).iter_batches(columns=["text"]):
            hist.add(pc.utf8_length(batch.column(0)).to_numpy(zero_copy_only=False))
    return hist


def tokens_per_document(folder: Path, manifest: dict[str, Any]) -> Histogram:
    """Tokens of every document of a tokens build (EOS included), from the `.idx` offsets."""
    hist = Histogram()
    for entry in manifest["files"]:
        if entry["name"].endswith(".idx"):
            ends = np.fromfile(folder / entry["name"], dtype=IDX_DTYPE).astype(np.int64)
            hist.add(np.diff(ends, prepend=0))
    return hist


def classifier_numbers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Per quality classifier of the shards manifest: its model, label, cut, counts and the
    histogram of its scores (the manifest's equal bins over [0, 1], with their edges).

    `cut` is the score the classifier cuts at: its `min_score`, or for `keep_top` the lowest
    score it kept (`score_at_cut`; None when it kept none)."""
    out = []
    for c in manifest.get("classifiers", []):
        rule = "min_score" if "min_score" in c else "keep_top"
        counts = [int(n) for n in c["histogram"]]
        out.append(
            {
                "name": c["name"],
                "column": c["column"],
                "model": mask_text(c["model"]),  # the manifest shows none; masked all the same
                "model_sha256": c["model_sha256"],
                "label": c["label"],
                "lowercase": c["lowercase"],
                "rule": rule,
                rule: c[rule],
                "cut": c["min_score"] if rule == "min_score" else c["score_at_cut"],
                "score_at_cut": c["score_at_cut"],
                "scored": c["scored"],
                "kept": c["kept"],
                "dropped": c["dropped"],
                "realized_share": c["realized_share"],
                "histogram": {
                    "edges": [i / len(counts) for i in range(len(counts) + 1)],
                    "counts": counts,
                },
            }
        )
    return out
