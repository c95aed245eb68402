"""Verify a published output: the manifest (or _SOURCE.json) and every file it names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corpus_assets.core.atomic import MANIFEST
from corpus_assets.core.sources import file_sha256

SOURCE_FILE = "_SOURCE.json"


def verify_files(folder: Path, files: list[dict[str, Any]]) -> list[str]:
    """Problems with files listed as {name, sha256, bytes}: missing, wrong size, wrong digest."""
    problems = []
    for entry in files:
        path = folder / entry["name"]
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.stat().st_size != entry["bytes"]:
            problems.append(f"{path}: {path.stat().st_size} bytes, manifest says {entry['bytes']}")
        elif file_sha256(path) != entry["sha256"]:
            problems.append(f"{path}: sha256 differs from the manifest")
    return problems


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
    doc, problems = _load(path)
    if doc is None:
        return problems
    if not isinstance(doc, dict):
        return [f"{path}: a manifest must be a JSON object, got {type(doc).__name__}"]
    kind = doc.get("kind") if path.name == MANIFEST else "raw"
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


def _verify_shards(path: Path, doc: dict[str, Any]) -> list[str]:
    from corpus_assets.core.shard import verify_shards

    return verify_shards(path, doc)


def _verify_tokens(path: Path, doc: dict[str, Any]) -> list[str]:
    from corpus_assets.core.tokenize import verify_tokens

    return verify_tokens(path, doc)


VERIFIERS = {"raw": _verify_raw, "shards": _verify_shards, "tokens": _verify_tokens}
