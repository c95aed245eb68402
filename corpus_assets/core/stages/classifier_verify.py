"""A published classifier's folder, checked: `MANIFEST.json` and the `model.bin` it names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import DataError
from corpus_assets.core.store.digests import file_sha256, verify_files
from corpus_assets.core.store.records import require, require_files

MODEL_FILE = "model.bin"
MANIFEST_FILE = "MANIFEST.json"


def published(folder: Path) -> dict[str, Any] | None:
    """The manifest of the classifier in `folder` when its model file matches it, else None."""
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        model = manifest["model"]
        path = folder / model["name"]
        if path.stat().st_size == model["bytes"] and file_sha256(path) == model["sha256"]:
            return dict(manifest)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def verify_classifier(manifest_path: Path, doc: dict[str, Any]) -> list[str]:
    """`corpus verify` of a published classifier: its manifest's form and its model file."""
    where = str(manifest_path)
    try:
        require(doc, MANIFEST_FIELDS, where, "classifier manifest")
        model = require_files({"files": [doc["model"]]}, "files", where, "classifier manifest")
    except DataError as exc:
        return [str(exc)]
    if model[0]["name"] != MODEL_FILE:
        return [f"{manifest_path}: model {model[0]['name']!r} is not {MODEL_FILE!r}"]
    problems = verify_files(manifest_path.parent, model)
    if doc["partition_key"] != manifest_path.parent.name:
        problems.append(
            f"{manifest_path}: partition_key {doc['partition_key']!r} is not its folder's name"
        )
    return problems


MANIFEST_FIELDS: dict[str, type] = {
    "name": str,
    "partition_key": str,
    "config_sha256": str,
    "model": dict,
    "labels": list,
    "positive_label": str,
    "lowercase": bool,
    "examples": dict,
    "validation": dict,
}
