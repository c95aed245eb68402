"""Scoring a run against a benchmark corpus's truth.json (bench/make_corpus.py): what share of
the exact, near and partial copies, the junk and the unique documents ended where they should,
and which injected PII values are still in a kept text."""

from __future__ import annotations


def unique_ids(truth: dict[str, object]) -> list[str]:
    """Documents that truth.json calls unique: no copy of anything earlier, not junk."""
    return list(truth["unique"])


def score(truth: dict[str, object], kept: dict[str, str]) -> dict[str, object]:
    exact, near, junk, partial = truth["exact"], truth["near"], truth["junk"], truth["partial"]
    originals = unique_ids(truth)
    injected, residue, left_by_format = pii_left(truth["pii"], kept)
    new_kept = [i for i, p in partial.items() if kept.get(i, "").strip() == p["new"].strip()]
    footers = [i for i, n in near.items() if "footer" in n]  # near copies: `of` plus a footer
    return {
        "exact_removed": sum(i not in kept for i in exact) / max(1, len(exact)),
        "near_removed": sum(i not in kept for i in near) / max(1, len(near)),
        **({"footer_copies": len(footers)} if footers else {}),
        **(
            {"footer_copies_removed": sum(i not in kept for i in footers) / len(footers)}
            if footers
            else {}
        ),
        "partial_new_kept": len(new_kept) / max(1, len(partial)),
        "unique_kept": sum(i in kept for i in originals) / max(1, len(originals)),
        "junk_removed": sum(i not in kept for i in junk) / max(1, len(junk)),
        "pii_injected": injected,
        "pii_left": residue,
        "pii_left_by_format": left_by_format,
    }


def pii_left(
    pii: dict[str, list[dict[str, str]]], kept: dict[str, str]
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Values injected by kind, values still in a kept text by kind, and by format."""
    injected = {"email": 0, "ip": 0, "phone": 0}
    residue = dict.fromkeys(injected, 0)
    by_format: dict[str, int] = {}
    for doc_id, found in pii.items():
        for item in found:
            injected[item["kind"]] += 1
            if doc_id in kept and item["value"] in kept[doc_id]:
                residue[item["kind"]] += 1
                by_format[item["format"]] = by_format.get(item["format"], 0) + 1
    return injected, residue, by_format
