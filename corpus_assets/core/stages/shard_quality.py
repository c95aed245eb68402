"""Quality classifiers in the shard stage: `[[filters.classifiers]]`, `min_score`, `keep_top`.

Each classifier is a fastText model whose probability for `label` (quality.Scorer, on the text
`classifier_text` makes of a document) is a document's score, kept in the column
`quality_<name>` of the task files and shards. In phase 1 every document that passes the rule
filters and language ID is scored, classifiers in config order; one with `min_score` drops a
document scored under it (reason `quality_<name>`), so the next ones score only what is left.

One with `keep_top` cuts after dedup: of the documents still kept, exactly
k = ceil(keep_top * n) (in decimal arithmetic: a share of 0.3 of 10 is 3, not 4) with the
highest scores stay; equal scores are taken in the global row order (task order, then row),
which no worker count, backend or resume changes. Several `keep_top` classifiers cut in config
order, each over the documents the previous one kept. The cut reads only the score columns:
8 bytes a document, plus a row index while it sorts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from corpus_assets.core.config import (
    ClassifierFilter,
    LoadedConfig,
    classifier_model_file,
    model_file_sha256,
    model_kind,
)
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.store import remote
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text.quality import Scorer

BINS = 20
"""Histogram bins of the scores: equal bins over [0, 1]."""
CLASSIFIER_MANIFEST = "MANIFEST.json"
MODELS_CACHE = "_models"
"""The folder under the raw cache where model URLs are downloaded (no source key starts
with `_`)."""


@dataclass(frozen=True)
class Classifier:
    """One resolved `[[filters.classifiers]]` table: the model file and how it scores."""

    name: str
    path: Path
    label: str
    lowercase: bool
    min_score: float | None
    keep_top: float | None
    model_sha256: str
    model: str
    """The model as the manifest shows it: a partition key, a path, or a URL with no secrets."""

    @property
    def column(self) -> str:
        return f"quality_{self.name}"

    def scorer(self) -> Scorer:
        return Scorer(self.path, self.label, self.lowercase, self.name)


def classifiers(cfg: LoadedConfig, layout: Layout, note: Callable[[str], None]) -> list[Classifier]:
    """Every classifier of `cfg`, its model found, checked and loaded once (a ConfigError, one
    line, for a missing model, an unbuilt classifier, a changed file or a label it lacks)."""
    spec = cfg.model.filters
    if not spec.enabled:
        return []
    found = [_resolve(cfg, layout, c, i, note) for i, c in enumerate(spec.classifiers or ())]
    for c in found:
        c.scorer()  # loads the model (cached for the workers) and checks the label
    return found


def _resolve(
    cfg: LoadedConfig,
    layout: Layout,
    spec: ClassifierFilter,
    index: int,
    note: Callable[[str], None],
) -> Classifier:
    kind = model_kind(spec.model)
    if kind == "key":
        return from_partition(layout, spec)
    pinned = str(cfg.raw["filters"]["classifiers"][index]["model_sha256"])  # the config's
    if kind == "url":
        path, shown = _download(layout, spec, pinned, note), remote.shown(spec.model)
    else:
        path, shown = classifier_model_file(spec, cfg.base_dir), spec.model
        _same(spec.name, path, model_file_sha256(path, spec.name), pinned)
    assert spec.label is not None  # the config requires it for a model file
    return Classifier(
        name=spec.name,
        path=path,
        label=spec.label,
        lowercase=bool(spec.lowercase),
        min_score=spec.min_score,
        keep_top=spec.keep_top,
        model_sha256=pinned,
        model=shown,
    )


def _same(name: str, path: Path, actual: str, pinned: str) -> None:
    if actual != pinned:
        raise ConfigError(
            f"classifier {name!r}: {path} has sha256 {actual!r}, not the pinned {pinned!r}: "
            "the model changed; restore it or remove the pin (a new build)"
        )


def from_partition(layout: Layout, spec: ClassifierFilter) -> Classifier:
    """A classifier trained here: its folder's model, label and `lowercase` from its manifest."""
    folder = layout.classifier(spec.model)
    record = _classifier_manifest(spec, folder / CLASSIFIER_MANIFEST)
    path = folder / record["model"]["name"]
    _same(spec.name, path, model_file_sha256(path, spec.name), record["model"]["sha256"])
    if spec.model_sha256 is not None and spec.model_sha256 != record["model"]["sha256"]:
        raise ConfigError(
            f"classifier {spec.name!r}: model_sha256 = {spec.model_sha256!r}, but classifier "
            f"{spec.model} has model sha256 {record['model']['sha256']!r}"
        )
    if spec.lowercase is not None and spec.lowercase != record["lowercase"]:
        raise ConfigError(
            f"classifier {spec.name!r}: lowercase = {str(spec.lowercase).lower()}, but "
            f"{spec.model} was trained with lowercase = {str(record['lowercase']).lower()}; "
            "remove the key or make it agree"
        )
    label = spec.label or record.get("positive_label")
    if not isinstance(label, str) or not label:
        raise ConfigError(
            f"classifier {spec.name!r}: {spec.model} names no positive_label; set label "
            f"(one of: {', '.join(map(str, record.get('labels', [])))})"
        )
    return Classifier(
        name=spec.name,
        path=path,
        label=label,
        lowercase=record["lowercase"],
        min_score=spec.min_score,
        keep_top=spec.keep_top,
        model_sha256=record["model"]["sha256"],
        model=spec.model,
    )


def _classifier_manifest(spec: ClassifierFilter, path: Path) -> dict[str, Any]:
    """The manifest of a built classifier, with the keys the shard stage reads."""
    where = f"classifier {spec.name!r}: {spec.model}"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{where} is not built (no {path}); materialize that quality_model partition first"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: unreadable manifest {path}: {exc}") from None
    ok = (
        isinstance(record, dict)
        and record.get("kind") == "classifier"
        and record.get("partition_key") == spec.model
        and isinstance(record.get("model"), dict)
        and isinstance(record["model"].get("name"), str)
        and "/" not in record["model"]["name"]
        and isinstance(record["model"].get("sha256"), str)
        and isinstance(record.get("lowercase"), bool)
    )
    if not ok:
        raise ConfigError(
            f"{where}: {path} is not a classifier manifest of that key (kind, partition_key, "
            "model name and sha256, lowercase); build the classifier again"
        )
    return dict(record)


def _download(
    layout: Layout, spec: ClassifierFilter, pinned: str, note: Callable[[str], None]
) -> Path:
    """A model URL's file in the raw cache (downloaded once, as sources are), sha256 checked."""
    who = f"classifier {spec.name}"
    remote.check_url(who, spec.model)
    suffix = Path(remote.shown(spec.model)).suffix or ".bin"
    dest = layout.raw / MODELS_CACHE / f"{pinned}{suffix}"
    if dest.is_file() and model_file_sha256(dest, spec.name) == pinned:
        return dest
    (item,) = remote.list_files(who, spec.model, note)
    note(f"classifier {spec.name}: downloading {remote.shown(spec.model)}")
    remote.download(who, item, dest, note)
    actual = model_file_sha256(dest, spec.name)
    if actual != pinned:
        remote.discard(dest)
        raise ConfigError(
            f"classifier {spec.name!r}: {remote.shown(spec.model)} serves a file with sha256 "
            f"{actual!r}, not the pinned model_sha256 {pinned!r}"
        )
    return dest


def histogram(scores: Sequence[float] | np.ndarray[Any, Any]) -> list[int]:
    """The counts of `scores` in BINS equal bins over [0, 1] (1.0 in the last)."""
    counts, _edges = np.histogram(np.asarray(scores, dtype=np.float64), BINS, (0.0, 1.0))
    return [int(n) for n in counts]


@dataclass
class Scored:
    """Phase 1's scores of one task's texts: per classifier, each text's score (NaN: not
    scored, dropped before), and each text's drop reason (None: kept)."""

    scores: dict[str, np.ndarray[Any, Any]]
    reasons: list[str | None]
    stats: dict[str, dict[str, Any]]
    """Per classifier: `histogram` of the texts it scored, `lowest_kept` of those it kept."""


def score_texts(found: Sequence[Classifier], texts: Sequence[str]) -> Scored:
    """Score `texts` with each classifier in order; a `min_score` one drops those under it."""
    reasons: list[str | None] = [None] * len(texts)
    scores: dict[str, np.ndarray[Any, Any]] = {}
    stats: dict[str, dict[str, Any]] = {}
    for c in found:
        live = [i for i, r in enumerate(reasons) if r is None]
        column = np.full(len(texts), np.nan)
        got = np.asarray(c.scorer().many([texts[i] for i in live]), dtype=np.float64)
        column[live] = got
        if c.min_score is not None:
            for i, s in zip(live, got.tolist(), strict=True):
                if s < c.min_score:
                    reasons[i] = c.column
        kept = got if c.min_score is None else got[got >= c.min_score]
        lowest = float(kept.min()) if len(kept) else None
        scores[c.name] = column
        stats[c.name] = {"histogram": histogram(got), "lowest_kept": lowest}
    return Scored(scores, reasons, stats)


def keep_count(share: float, n: int) -> int:
    """ceil(share * n) in decimal arithmetic, `share` as written (0.3 of 10 is 3)."""
    return int((Decimal(repr(share)) * n).to_integral_value(ROUND_CEILING))


def top(
    scores: np.ndarray[Any, Any], candidates: np.ndarray[Any, Any], k: int
) -> np.ndarray[Any, Any]:
    """A mask of the `k` candidates with the highest scores, equal scores in row order."""
    rows = np.flatnonzero(candidates)
    order = np.argsort(-scores[rows], kind="stable")  # stable: equal scores keep row order
    keep = np.zeros(len(scores), dtype=bool)
    keep[rows[order[:k]]] = True
    return keep


@dataclass(frozen=True)
class Cut:
    """What one `keep_top` classifier did after dedup."""

    candidates: int
    kept: int
    score_at_cut: float | None
    """The lowest score kept (None when none was)."""


def keep_top(
    found: Sequence[Classifier],
    kept_rows: Sequence[tuple[int, int]],
    task_file: Callable[[int], Path],
    drop: np.ndarray[Any, Any],
    progress: Progress,
) -> tuple[np.ndarray[Any, Any], dict[str, Cut]]:
    """`drop` with the documents each `keep_top` classifier cuts added; what each cut.

    `kept_rows` are (task index, rows in its file) in task order: the rows of `drop`."""
    cutting = [c for c in found if c.keep_top is not None]
    if not cutting:
        return drop, {}
    columns = [c.column for c in cutting]
    parts: list[list[np.ndarray[Any, Any]]] = [[] for _ in cutting]
    for n, (index, rows) in enumerate(kept_rows):
        progress.beat(f"reading quality scores: task {n:,} of {len(kept_rows):,}")
        if not rows:
            continue
        table = pq.read_table(task_file(index), columns=columns)
        for part, name in zip(parts, columns, strict=True):
            part.append(table.column(name).to_numpy())
    drop = drop.copy()
    cuts: dict[str, Cut] = {}
    for c, part in zip(cutting, parts, strict=True):
        scores = np.concatenate(part) if part else np.zeros(0)
        candidates = ~drop
        n = int(candidates.sum())
        assert c.keep_top is not None
        k = keep_count(c.keep_top, n)
        keep = top(scores, candidates, k)
        drop |= candidates & ~keep
        lowest = float(scores[keep].min()) if k else None
        cuts[c.name] = Cut(n, k, lowest)
        progress.note(f"classifier {c.name}: kept the top {k:,} of {n:,} documents")
    return drop, cuts


def manifest_entry(
    found: Sequence[Classifier],
    stats: Sequence[dict[str, dict[str, Any]]],
    dropped: dict[str, int],
    cuts: dict[str, Cut],
) -> dict[str, Any]:
    """The manifest's `classifiers` list: per classifier its model, cut and counts."""
    entries = []
    for c in found:
        bins = [0] * BINS
        lows = []
        for task in stats:
            got = task.get(c.name)
            if got is None:
                continue
            bins = [a + b for a, b in zip(bins, got["histogram"], strict=True)]
            if got["lowest_kept"] is not None:
                lows.append(got["lowest_kept"])
        scored = sum(bins)
        cut = cuts.get(c.name)
        if cut is None:
            out, kept, at = (
                dropped.get(c.column, 0),
                scored - dropped.get(c.column, 0),
                min(lows, default=None),
            )
        else:
            out, kept, at = cut.candidates - cut.kept, cut.kept, cut.score_at_cut
        rule = {"min_score": c.min_score} if c.keep_top is None else {"keep_top": c.keep_top}
        entries.append(
            {
                "name": c.name,
                "column": c.column,
                "model": c.model,
                "model_sha256": c.model_sha256,
                "label": c.label,
                "lowercase": c.lowercase,
                **rule,
                "scored": scored,
                "dropped": out,
                "kept": kept,
                "realized_share": kept / (kept + out) if kept + out else None,
                "score_at_cut": at,
                "histogram": bins,
            }
        )
    return {"classifiers": entries} if entries else {}
