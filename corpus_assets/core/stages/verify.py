"""Verify a published output: the manifest (or _SOURCE.json) and every file it names."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corpus_assets.core.stages.classifier_verify import MANIFEST_FILE as CLASSIFIER_MANIFEST
from corpus_assets.core.stages.classifier_verify import verify_classifier
from corpus_assets.core.stages.export_verify import verify_export
from corpus_assets.core.stages.mixture_verify import verify_mixture
from corpus_assets.core.stages.shard_verify import verify_shards
from corpus_assets.core.stages.tokenize_verify import verify_tokens
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.digests import verify_files

SOURCE_FILE = "_SOURCE.json"


def _load(path: Path) -> tuple[dict[str, Any] | None, list[str]]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), []
    except FileNotFoundError:
        return None, [f"{path}: missing"]
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, [f"{path}: not valid JSON: {exc}"]


def verify_path(path: Path) -> list[str]:
    """Every problem found with the output at `path` (a manifest file or its folder)."""
    if path.is_dir():
        path = path / (SOURCE_FILE if (path / SOURCE_FILE).exists() else MANIFEST)
        if not path.exists() and (path.parent / CLASSIFIER_MANIFEST).exists():
            path = path.parent / CLASSIFIER_MANIFEST
    doc, problems = _load(path)
    if doc is None:
        return problems
    if not isinstance(doc, dict):
        return [f"{path}: a manifest must be a JSON object, got {type(doc).__name__}"]
    kind = doc.get("kind") if path.name in (MANIFEST, CLASSIFIER_MANIFEST) else "raw"
    verifier = VERIFIERS.get(str(kind))
    if verifier is None:
        return [f"{path}: unknown manifest kind {kind!r}; allowed: {', '.join(VERIFIERS)}"]
    try:
        return verifier(path, doc)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        return [f"{path}: malformed {kind} manifest ({type(exc).__name__}: {exc})"]


def _verify_raw(path: Path, doc: dict[str, Any]) -> list[str]:
    problems = verify_files(path.parent, doc.get("files", []))
    rows = sum(f["rows"] for f in doc.get("files", []))
    if rows != doc.get("documents"):
        problems.append(f"{path}: files hold {rows} rows, record says {doc.get('documents')}")
    return problems


VERIFIERS: dict[str, Callable[[Path, dict[str, Any]], list[str]]] = {
    "raw": _verify_raw,
    "shards": verify_shards,
    "tokens": verify_tokens,
    "classifier": verify_classifier,
    "mixture": verify_mixture,
    "token_export": verify_export,
}
