"""Screening inside a shard task: exclusion by id or exact key, eval-set decontamination.

Every document screened out gets an audit record (id, source, reason, the eval set and item or
the exclusion list) and a count under `<reason>/<set or list>`; a document cut (mode `cut`) is
kept with its matches removed, recorded and counted under `cut/<set>`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corpus_assets.core.config import canon
from corpus_assets.core.stages.screen_index import (
    Screens,
    id_hashes,
    load_eval_index,
    load_exclude,
)
from corpus_assets.core.text.contamination import cut, find
from corpus_assets.core.text.ngrams import ngram_hashes

CONTAMINATED = "contaminated"
EXCLUDED = "excluded"
Array = np.ndarray[Any, Any]


@dataclass
class Screening:
    """What a task screened out: counts by `<reason>/<name>` and the audit records."""

    counts: Counter[str] = field(default_factory=Counter)
    records: list[dict[str, Any]] = field(default_factory=list)

    def jsonl(self) -> bytes:
        """The records as JSON lines (canonical: sorted keys)."""
        return b"".join(canon(r) + b"\n" for r in self.records)

    def drop(self, reason: str, name: str, doc: dict[str, Any], **detail: Any) -> None:
        self.counts[f"{reason}/{name}"] += 1
        self.records.append(
            {**doc, "reason": reason, "list" if reason == EXCLUDED else "set": name, **detail}
        )


def excluded_by_id(screens: Screens, ids: list[str]) -> dict[int, str]:
    """Rows whose id is on an exclusion list: the first list (config order) that has it."""
    out: dict[int, str] = {}
    if not screens.lists or not ids:
        return out
    hashes = id_hashes(ids)
    for info in screens.lists:
        listed, _keys = load_exclude(info)
        for row in np.flatnonzero(_member(listed, hashes)).tolist():
            out.setdefault(row, info.name)
    return out


def excluded_by_key(screens: Screens, keys: Array) -> dict[int, str]:
    """Rows whose 128-bit exact-dedup key is in an earlier build (the first that has it)."""
    out: dict[int, str] = {}
    if not len(keys):
        return out
    probe = np.ascontiguousarray(keys).view("S16").ravel()
    for info in screens.lists:
        _ids, known = load_exclude(info)
        if known is not None:
            for row in np.flatnonzero(_member(known, probe)).tolist():
                out.setdefault(row, info.name)
    return out


def _member(sorted_values: Array, probe: Array) -> Array:
    if not len(sorted_values):
        return np.zeros(len(probe), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_values, probe), len(sorted_values) - 1)
    return np.asarray(sorted_values[at] == probe)


def decontaminate(
    screens: Screens,
    texts: list[str],
    docs: Callable[[int], dict[str, Any]],
    keeps: Callable[[str], bool],
    screening: Screening,
) -> dict[int, str | None]:
    """Positions of `texts` that match an eval set: None to drop, else the cut text to keep."""
    if not screens.sets or not texts:
        return {}
    grams = ngram_hashes(texts, screens.ngram)
    indexes = [load_eval_index(info) for info in screens.sets]
    out: dict[int, str | None] = {}
    for info, index in zip(screens.sets, indexes, strict=True):
        for pos, hit in find(grams, index).items():
            if pos in out:
                continue
            rest = _cut(screens, texts[pos], indexes, keeps) if screens.mode == "cut" else None
            detail = {"item": index.ids[hit.item], "ngrams": hit.ngrams, "mode": screens.mode}
            if rest is None:
                screening.drop(CONTAMINATED, info.name, docs(pos), **detail)
            else:
                screening.counts[f"cut/{info.name}"] += 1
                screening.records.append({**docs(pos), "reason": "cut", "set": info.name, **detail})
            out[pos] = rest
    return out


def _cut(
    screens: Screens, text: str, indexes: list[Any], keeps: Callable[[str], bool]
) -> str | None:
    """The cut text when it is usable: passes the filters and matches no eval set any more."""
    rest = cut(text, indexes, screens.ngram, screens.cut)
    if rest is None or not keeps(rest):
        return None
    again = ngram_hashes([rest], screens.ngram).hashes
    if any((index.lookup(again) >= 0).any() for index in indexes):
        return None
    return rest
