"""What a trained classifier's materialization shows, read from its published manifest."""

from __future__ import annotations

import json
from typing import Any

import dagster as dg

from corpus_assets.core.classifier_config import CLASSES

COUNTS = ("read", "empty", "kept", "train", "validation")


def classifier_metadata(manifest: dict[str, Any], folder: str) -> dict[str, dg.RawMetadataValue]:
    """The manifest as metadata: numbers as numbers (Dagster plots them across
    materializations), a short Markdown summary, the config as written (secrets masked)."""
    examples, validation = manifest["examples"], manifest["validation"]
    metadata: dict[str, dg.RawMetadataValue] = {
        "model_sha256": manifest["model"]["sha256"],
        "model_bytes": dg.MetadataValue.int(manifest["model"]["bytes"]),
        "path": dg.MetadataValue.path(folder),
        "positive_label": manifest["positive_label"],
    }
    for cls in CLASSES:
        for count in ("train", "validation"):
            metadata[f"{cls}_{count}_examples"] = dg.MetadataValue.int(examples[cls][count])
    for name in ("precision", "recall", "roc_auc"):
        value = validation.get(name)  # None: no validation example of a class
        metadata[f"validation_{name}"] = (
            dg.MetadataValue.float(float(value)) if value is not None else dg.MetadataValue.null()
        )
    metadata["summary"] = dg.MetadataValue.md(summary_markdown(manifest))
    metadata["config"] = dg.MetadataValue.md(
        "```json\n" + json.dumps(manifest["config"], indent=2, ensure_ascii=False) + "\n```"
    )
    return metadata


def summary_markdown(manifest: dict[str, Any]) -> str:
    """Examples per class, the validation scores, and the score histogram per class."""
    examples, validation = manifest["examples"], manifest["validation"]
    labels = {"positive": manifest["positive_label"], "negative": manifest["negative_label"]}
    lines = [
        f"**{manifest['partition_key']}**: labels {', '.join(manifest['labels'])}; corpus "
        f"filters keep by `{labels['positive']}` (lowercase: {manifest['lowercase']})",
        "",
        "| class | label | read | empty | kept | train | validation |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for cls in CLASSES:
        counts = " | ".join(f"{examples[cls][c]:,}" for c in COUNTS)
        lines.append(f"| {cls} | `{labels[cls]}` | {counts} |")
    scores = ", ".join(
        f"{shown} {_number(validation.get(name))}"
        for name, shown in (
            ("precision", "precision"),
            ("recall", "recall"),
            ("roc_auc", "ROC AUC"),
        )
    )
    lines += ["", f"Validation at threshold {validation['threshold']}: {scores}.", ""]
    bins = int(validation["histogram"]["bins"])
    lines += [
        f"`{labels['positive']}` score per class, {bins} bins over [0, 1]:",
        "",
        "| class | " + " | ".join(f"{i / bins:.2f}" for i in range(bins)) + " |",
        "|---|" + "---:|" * bins,
    ]
    for cls in CLASSES:
        counts = validation["histogram"][labels[cls]]
        lines.append(f"| `{labels[cls]}` | " + " | ".join(str(c) for c in counts) + " |")
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
