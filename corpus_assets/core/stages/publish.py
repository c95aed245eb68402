"""Publish a verified build to object storage (`corpus publish PATH URL`) and verify it there
(`corpus verify URL`).

What is published: a shards or tokens build (its `_MANIFEST.json` and every file the manifest
lists: the shards and the screening audit, or the token files) or a task snapshot (its
`manifest.json` and the files it lists), under URL (`s3://BUCKET/PREFIX` or any fsspec URL; a
local folder works too). The caller verifies the build on disk first.

Order: every data file is uploaded (skipped when the object is already there with the listed
size and sha256), then every one is read back, streaming, and its size and sha256 compared with
the manifest's (a wrong one is uploaded again, once); only then the manifest is uploaded, last,
and read back. So a reader that sees the manifest sees a complete build, and a publish that was
interrupted, rerun, uploads only what is missing or wrong. A URL that already holds a different
manifest is refused (exit 65): one prefix, one build.

Verifying in place reads the manifest and streams every listed object once: missing, wrong
size or wrong sha256 is a problem naming the object. (The deeper checks of `corpus verify PATH`,
Parquet row counts and token file structure, read files on disk.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.remote import filesystem, retrying, shown, store_errors

TASK_MANIFEST = "manifest.json"
READ_BLOCK = 8 << 20


@dataclass(frozen=True)
class Listed:
    name: str
    sha256: str
    bytes: int


def manifest_of(path: Path) -> Path:
    """The manifest of a build folder (or the manifest itself)."""
    if path.is_file():
        return path
    for name in (MANIFEST, TASK_MANIFEST):
        if (path / name).is_file():
            return path / name
    raise ConfigError(f"{path}: no {MANIFEST} or {TASK_MANIFEST}: not a published build")


def listed_files(manifest_name: str, doc: dict[str, Any], where: str) -> list[Listed]:
    """The files a manifest lists, with their sha256 and size, whatever the build's kind."""
    try:
        if manifest_name == TASK_MANIFEST:
            entries = [{"name": k, **v} for k, v in doc["files"].items()]
        elif doc.get("kind") == "shards":
            entries = list(doc["shards"]) + (
                [doc["audit"]] if isinstance(doc.get("audit"), dict) else []
            )
        elif doc.get("kind") == "tokens":
            entries = list(doc["files"])
        else:
            raise DataError(f"{where}: kind {doc.get('kind')!r} is not a shards or tokens build")
        return [Listed(str(e["name"]), str(e["sha256"]), int(e["bytes"])) for e in entries]
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise DataError(f"{where}: malformed manifest ({type(exc).__name__}: {exc})") from None


def check_destination(url: str) -> None:
    """A URL a build can be published to: one fsspec reads, with no user or password in it
    (credentials come from the environment); ConfigError otherwise."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"publish: {shown(url)} has a user or password in it; credentials come from the "
            "environment (AWS_ACCESS_KEY_ID, ~/.aws, HF_TOKEN)"
        )
    filesystem(url, "publish")


def publish(path: Path, url: str, note: Callable[[str], None]) -> dict[str, Any]:
    """Upload the verified build at `path` to `url`, data files first, manifest last."""
    check_destination(url)
    manifest = manifest_of(path)
    folder = manifest.parent
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    files = listed_files(manifest.name, doc, str(manifest))
    fs, base = filesystem(url, "publish")
    remote_manifest = f"{base.rstrip('/')}/{manifest.name}"
    existing = _read_bytes(fs, remote_manifest, url)
    if existing is not None and existing != manifest.read_bytes():
        raise DataError(
            f"publish: {shown(url)} already holds another build's {manifest.name}; "
            "publish to a new prefix (one prefix holds one build)"
        )
    uploaded: list[Listed] = []
    for item in files:  # an object already there with the listed digest was just read back
        if not _matches(fs, f"{base.rstrip('/')}/{item.name}", item, url):
            note(f"publish: uploading {item.name} ({item.bytes:,} bytes)")
            _put(fs, folder / item.name, f"{base.rstrip('/')}/{item.name}", url)
            uploaded.append(item)
    for item in uploaded:  # read back what went up before the manifest makes the build visible
        target = f"{base.rstrip('/')}/{item.name}"
        if not _matches(fs, target, item, url):
            note(f"publish: {item.name} read back wrong; uploading it again")
            _put(fs, folder / item.name, target, url)
            if not _matches(fs, target, item, url):
                raise DataError(f"publish: {shown(url)}/{item.name} reads back wrong twice")
    own = Listed(manifest.name, file_sha256(manifest), manifest.stat().st_size)
    if existing is None:
        _put(fs, manifest, remote_manifest, url)
    if not _matches(fs, remote_manifest, own, url):
        raise DataError(f"publish: {shown(url)}/{manifest.name} reads back wrong")
    return {
        "url": shown(url),
        "manifest": manifest.name,
        "files": len(files),
        "uploaded": len(uploaded) + (existing is None),
        "skipped": len(files) - len(uploaded),
        "bytes": sum(f.bytes for f in files),
    }


def verify_published(url: str) -> list[str]:
    """Every problem of the build published at `url`: each listed object's size and sha256."""
    fs, base = filesystem(url, "verify")
    base = base.rstrip("/")
    for name in (MANIFEST, TASK_MANIFEST):
        data = _read_bytes(fs, f"{base}/{name}", url)
        if data is not None:
            break
    else:
        return [f"{shown(url)}: no {MANIFEST} or {TASK_MANIFEST}"]
    where = f"{shown(url)}/{name}"
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return [f"{where}: not valid JSON: {exc}"]
    if not isinstance(doc, dict):
        return [f"{where}: a manifest must be a JSON object"]
    problems = []
    for item in listed_files(name, doc, where):
        found = _digest(fs, f"{base}/{item.name}", url)
        if found is None:
            problems.append(f"{shown(url)}/{item.name}: missing")
        elif found[1] != item.bytes:
            problems.append(
                f"{shown(url)}/{item.name}: {found[1]} bytes, manifest says {item.bytes}"
            )
        elif found[0] != item.sha256:
            problems.append(f"{shown(url)}/{item.name}: sha256 differs from the manifest")
    return problems


def _matches(fs: Any, target: str, item: Listed, url: str) -> bool:
    found = _digest(fs, target, url)
    return found is not None and found == (item.sha256, item.bytes)


def _digest(fs: Any, target: str, url: str) -> tuple[str, int] | None:
    """sha256 and size of an object, streamed; None when it does not exist."""

    def attempt() -> int:
        found.clear()
        with store_errors("publish", url):
            fs.invalidate_cache()
            if not fs.exists(target):
                return 0
            h, size = hashlib.sha256(), 0
            with fs.open(target, "rb", block_size=READ_BLOCK) as fh:
                while block := fh.read(READ_BLOCK):
                    h.update(block)
                    size += len(block)
            found.append((h.hexdigest(), size))
        return 0

    found: list[tuple[str, int]] = []
    retrying("publish", url, attempt)
    return found[0] if found else None


def _read_bytes(fs: Any, target: str, url: str) -> bytes | None:
    def attempt() -> int:
        with store_errors("publish", url):
            fs.invalidate_cache()
            if fs.exists(target):
                out.append(fs.cat_file(target))
        return 0

    out: list[bytes] = []
    retrying("publish", url, attempt)
    return out[0] if out else None


def _put(fs: Any, local: Path, target: str, url: str) -> None:
    def attempt() -> int:
        with store_errors("publish", url):
            fs.put_file(str(local), target)
        return 0

    retrying("publish", url, attempt)
