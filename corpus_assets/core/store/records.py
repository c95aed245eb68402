"""The JSON records the stages read back (manifests, _SOURCE.json, ledger lines), checked.

A record that does not parse or lacks a field is bad data (exit 65, never retried) with a one-line
message naming the file, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import DataError

FILE_ENTRY: dict[str, type] = {"name": str, "sha256": str, "bytes": int}


def load_object(path: Path, what: str, fix: str = "") -> dict[str, Any]:
    """The JSON object in `path` (FileNotFoundError passes through; anything else is DataError)."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise DataError(f"{path}: corrupt {what}: a folder, not a file{_hint(fix)}") from None
    return parse_object(raw, str(path), what, fix)


def parse_object(raw: bytes, where: str, what: str, fix: str = "") -> dict[str, Any]:
    """`raw` as a JSON object; `where` names the file (and line) in the error."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{where}: corrupt {what}: not UTF-8 text{_hint(fix)}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: corrupt {what}: not valid JSON ({exc}){_hint(fix)}") from None
    if not isinstance(doc, dict):
        kind = type(doc).__name__
        raise DataError(f"{where}: corrupt {what}: a JSON object expected, got {kind}{_hint(fix)}")
    return doc


def require(
    doc: Mapping[str, Any], fields: Mapping[str, type], where: str, what: str, fix: str = ""
) -> None:
    """Every field present with its type (an int is never a bool), else DataError naming it."""
    for key, kind in fields.items():
        value = doc.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise DataError(
                f"{where}: corrupt {what}: {key!r} is missing or not {_type_name(kind)}{_hint(fix)}"
            )


def require_files(
    doc: Mapping[str, Any],
    key: str,
    where: str,
    what: str,
    fix: str = "",
    extra: Mapping[str, type] | None = None,
) -> list[dict[str, Any]]:
    """`doc[key]`: a list of file entries, each with name, sha256, bytes (and `extra`)."""
    entries = doc.get(key)
    if not isinstance(entries, list):
        raise DataError(f"{where}: corrupt {what}: {key!r} is missing or not a list{_hint(fix)}")
    fields = {**FILE_ENTRY, **(extra or {})}
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise DataError(f"{where}: corrupt {what}: {key}[{n}] is not an object{_hint(fix)}")
        require(entry, fields, where, f"{what} ({key}[{n}])", fix)
    return entries


def _type_name(kind: type) -> str:
    return {str: "a string", int: "an integer", list: "a list", dict: "an object"}.get(
        kind, kind.__name__
    )


def _hint(fix: str) -> str:
    return f"; {fix}" if fix else ""
