"""File digests, and checking files against the digests a manifest lists."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

READ_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(READ_CHUNK):
            h.update(chunk)
    return h.hexdigest()


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
