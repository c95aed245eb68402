"""REPORT.md of `corpus report`: title, config, counts, the plots and how to read each."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corpus_assets.core.stages.report_plots import QUALITY_PLOT, cut_label

IMAGE = re.compile(r"!\[([^\]]*)\]\(([A-Za-z0-9_.-]+\.png)\)")

HOW_TO_READ = {
    "report_lengths.png": (
        "Document length before and after filtering",
        "Characters per document (Unicode code points, the unit of `min_chars`/`max_chars`), "
        "on a log axis. *Before*: every document the shard stage read from the raw cache, "
        "normalized as the filters see it. *After*: the rows of the shards, after filters, "
        "dedup and PII scrubbing. Mass missing from the left or right of *after* is what the "
        "length filters cut; a lower curve of the same shape is what dedup removed.",
    ),
    "report_drops.png": (
        "Drops by filter reason",
        "Documents dropped by each quality filter (the manifest's `dropped`). Each document is "
        "counted once, under the first check it fails. A reason that dominates may mean a "
        "threshold is too strict for this source.",
    ),
    "report_duplicates.png": (
        "Duplicates",
        "*exact*: documents removed as copies of an earlier one (same normalized text); "
        "*near*: removed as MinHash near copies; *partial*: near copies kept with only their "
        "new paragraphs. Exact and near copies, with the filter drops, make up "
        "`documents_in` − `documents_out`; partial copies stay in the shards.",
    ),
    "report_pii.png": (
        "PII by kind",
        "Occurrences of emails, IP addresses and phone numbers replaced by placeholders in the "
        "documents that were kept.",
    ),
    "report_tokens.png": (
        "Tokens per document",
        "Tokens per document of the tokens build (EOS included), from the `.idx` offsets, on "
        "a log axis. The documents add up to the shards' rows, the tokens to the build's total.",
    ),
}


def human_bytes(n: int | None) -> str:
    """1536 -> '1.5 KiB'; None -> '–'."""
    if n is None:
        return "–"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _rows(numbers: Mapping[str, Any]) -> list[tuple[str, str]]:
    c = numbers["counts"]
    before, after = numbers["lengths"]["before"], numbers["lengths"]["after"]
    rows = [
        ("documents in (read from raw)", f"{c['documents_in']:,}"),
        ("documents out (in the shards)", f"{c['documents_out']:,}"),
        ("dropped by filters", f"{sum(numbers['dropped'].values()):,}"),
        ("exact / near duplicates removed", "{exact:,} / {near:,}".format(**numbers["duplicates"])),
        ("partial copies cut", f"{numbers['duplicates']['partial']:,}"),
        ("PII replaced", f"{sum(numbers['pii'].values()):,}"),
        ("text in", human_bytes(c["text_bytes_in"])),
        ("text out", human_bytes(c["text_bytes_out"])),
        ("shards", f"{c['shards']:,} files, {human_bytes(c['shard_bytes'])}"),
        ("mean characters before / after", f"{before['mean']} / {after['mean']}"),
    ]
    t = numbers["tokens"]
    if t is not None:
        rows += [
            ("tokenizer", f"`{t['tokenizer']}` (vocab {t['vocab_size']:,}, {t['dtype']})"),
            ("tokens", f"{t['tokens']:,} in {t['documents']:,} documents"),
            ("token files", human_bytes(t["file_bytes"])),
        ]
    return rows


QUALITY_HOW = {
    "min_score": (
        "Scores of every document the classifier scored (those that passed the rule filters, "
        "language ID and the classifiers before it), in 20 equal bins over [0, 1]. The dashed "
        "line is `min_score`: the documents scored under it were dropped with reason "
        "`{column}`; those at or over it went on to dedup and any later classifier."
    ),
    "keep_top": (
        "Scores of every document the classifier scored (those that passed the rule filters, "
        "language ID and the classifiers before it), in 20 equal bins over [0, 1]. The dashed "
        "line is the lowest score kept. The cut is made after dedup, keeping the top "
        "`keep_top` share of the documents still kept, so the bars also hold the documents a "
        "later classifier or dedup removed before it, and a document scored exactly at the line "
        "may be on either side (equal scores are kept in the documents' order)."
    ),
}


def _plot_text(name: str, numbers: Mapping[str, Any]) -> tuple[str, str]:
    """The heading and "how to read this" of plot `name`."""
    if not name.startswith(QUALITY_PLOT):
        return HOW_TO_READ[name]
    classifier = name.removeprefix(QUALITY_PLOT).removesuffix(".png")
    (entry,) = (c for c in numbers["classifiers"] if c["name"] == classifier)
    how = QUALITY_HOW[entry["rule"]].format(column=entry["column"])
    return f"Scores of classifier {classifier}", how


def _cell(text: str) -> str:
    """`text` as code in a table cell (a `|` escaped)."""
    return "`" + text.replace("|", "\\|") + "`"


def _classifiers(entries: list[Mapping[str, Any]]) -> list[str]:
    """The table of the quality classifiers: model, label, cut and what each kept."""
    lines = [
        "## Quality classifiers",
        "",
        "| classifier | model | label | cut | scored | kept | dropped | realized share |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for c in entries:
        share = "–" if c["realized_share"] is None else f"{c['realized_share']:.4f}"
        lines.append(
            f"| {c['name']} | {_cell(c['model'])} | {c['label']} | {cut_label(c)} "
            f"| {c['scored']:,} | {c['kept']:,} | {c['dropped']:,} | {share} |"
        )
    lines += [
        "",
        "*dropped* and *kept*: by this classifier (a `keep_top` one: of the documents left "
        "after dedup); *realized share*: kept / (kept + dropped).",
        "",
    ]
    return lines


def _table(title: str, counts: Mapping[str, int]) -> list[str]:
    lines = [f"| {title} | count |", "|---|---:|"]
    lines += [f"| {k} | {v:,} |" for k, v in counts.items()] or ["| (none) | 0 |"]
    return lines


def render(numbers: Mapping[str, Any], plots: list[str]) -> str:
    """The Markdown text of the report; plots embedded by their names (same folder)."""
    title = f"# Build report: {numbers['dataset']} {numbers['version']} ({numbers['build_id']})"
    config = json.dumps(numbers["config"], indent=2, sort_keys=True, ensure_ascii=False)
    lines = [
        title,
        "",
        f"Config sha256 `{numbers['config_sha256']}`; made from the shards manifest with "
        f"sha256 `{numbers['shards_manifest_sha256']}`. The numbers are in `report.json`.",
        "",
        "## Config",
        "",
        "```json",
        config,
        "```",
        "",
        "## Counts",
        "",
        "| | |",
        "|---|---:|",
        *[f"| {k} | {v} |" for k, v in _rows(numbers)],
        "",
        *_table("drop reason", numbers["dropped"]),
        "",
        *(
            [*_table("line removal reason", numbers["lines_removed"]), ""]
            if "lines_removed" in numbers
            else []
        ),
        *_table("duplicates", numbers["duplicates"]),
        "",
        *_table("PII kind", numbers["pii"]),
        "",
        *([*_table("language", numbers["languages"]), ""] if "languages" in numbers else []),
        *(_classifiers(numbers["classifiers"]) if "classifiers" in numbers else []),
        "## Plots",
    ]
    for name in plots:
        heading, how = _plot_text(name, numbers)
        lines += ["", f"### {heading}", "", f"![{heading}]({name})", "", f"How to read this: {how}"]
    if numbers["tokens"] is None:
        lines += ["", "No tokens build was found: run the tokenize stage for tokens per document."]
    return "\n".join(lines) + "\n"


def with_inline_images(text: str, folder: Path) -> str:
    """`text` with each `![title](name.png)` of `folder` as a `data:image/png;base64,` URI.

    The Dagster UI renders Markdown metadata in the browser, which cannot open the PNG files
    beside the manifest: inlined, the plots show on the asset page (about 100 KB per report)."""

    def inline(match: re.Match[str]) -> str:
        png = (folder / match.group(2)).read_bytes()
        return f"![{match.group(1)}](data:image/png;base64,{base64.b64encode(png).decode()})"

    return IMAGE.sub(inline, text)
