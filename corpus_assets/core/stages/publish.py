"""Publish a verified build to object storage (`corpus publish PATH URL`) and verify it there
(`corpus verify URL`).

What is published: a shards or tokens build (its `_MANIFEST.json` and every file the manifest
lists: the shards and the screening audit, or the token files), a token export (`corpus
export-tokens --to URL` publishes its staged folder) or a task snapshot (its
`manifest.json` and the files it lists), under URL (`s3://BUCKET/PREFIX` or any fsspec URL; a
local folder works too). The caller verifies the build on disk first. Every name the manifest
lists is a relative path inside the build folder (no `..` part, no leading `/`); one that is
not is refused (DataError) before anything is written.

One prefix holds one build, and two publishes cannot both win it. Before any data file goes
up, the publish creates the claim `.publish-claim.json` (the manifest's name, sha256 and size)
with a conditional create: S3's `PutObject` with `If-None-Match: *`, a hard link of a complete
temp file on a local folder (fsspec's `mode="create"` elsewhere). A publish that finds a claim
or a manifest of another build stops there (DataError naming both manifests' sha256) having
uploaded nothing, so it cannot overwrite a data file of the build that won. A claim of the
same build is its own: a rerun, or the same build published twice at once, carries on. A store
that ignores `If-None-Match` (a second create of the claim goes through) is refused
(ConfigError).

Order: every data file is uploaded (skipped when the object is already there with the listed
size and sha256), then every one is read back, streaming, and its size and sha256 compared with
the manifest's (a wrong one is uploaded again, once); only then the manifest is created, last,
conditionally too, and read back. So a reader that sees the manifest sees a complete build, and
a publish that was interrupted, rerun, uploads only what is missing or wrong. A local folder
gets each file by temp name, fsync and rename.

Verifying in place reads the manifest and streams every listed object once: missing, wrong
size or wrong sha256 is a problem naming the object. (The deeper checks of `corpus verify PATH`,
Parquet row counts and token file structure, read files on disk.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.store.atomic import (
    MANIFEST,
    atomic_writer,
    disk_error,
    dump_json,
    fsync_dir,
)
from corpus_assets.core.store.remote import filesystem, retrying, shown, store_errors

TASK_MANIFEST = "manifest.json"
CLAIM = ".publish-claim.json"
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
        elif doc.get("kind") in ("tokens", "token_export", "mixture"):
            entries = list(doc["files"])
        else:
            raise DataError(
                f"{where}: kind {doc.get('kind')!r} is not a shards or tokens build, a token "
                "export or a mixture"
            )
        files = [Listed(str(e["name"]), str(e["sha256"]), int(e["bytes"])) for e in entries]
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise DataError(f"{where}: malformed manifest ({type(exc).__name__}: {exc})") from None
    for item in files:
        check_name(item.name, where)
    return files


def check_name(name: str, where: str) -> None:
    """A listed file name that stays inside the build folder; DataError otherwise."""
    parts = name.split("/")
    if (
        name.startswith("/")
        or "\\" in name
        or "\0" in name
        or any(part in ("", ".", "..") for part in parts)
        or name in (MANIFEST, TASK_MANIFEST, CLAIM)
    ):
        raise DataError(
            f"{where}: file name {name!r} is not inside the build folder; allowed: a relative "
            f"path with no '.' or '..' part, no leading '/', not {MANIFEST}, {TASK_MANIFEST} "
            f"or {CLAIM}"
        )


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
    """Upload the verified build at `path` to `url`: claim the prefix, data files, manifest."""
    check_destination(url)
    manifest = manifest_of(path)
    body = manifest.read_bytes()
    files = listed_files(manifest.name, json.loads(body), str(manifest))
    own = Listed(manifest.name, hashlib.sha256(body).hexdigest(), len(body))
    dest = Destination(url)
    existing = dest.read(manifest.name)
    if existing is not None and existing != body:
        raise _taken(url, "already holds another build", existing, own)
    if existing is None:
        _claim(dest, own)
    uploaded = _upload(dest, manifest.parent, files, note)
    created = existing is None and dest.create(manifest.name, body)
    if existing is None and not created and (there := dest.read(manifest.name)) != body:
        raise _taken(url, "already holds another build", there or b"", own)
    if not dest.matches(own):
        raise DataError(f"publish: {shown(url)}/{manifest.name} reads back wrong")
    return {
        "url": shown(url),
        "manifest": manifest.name,
        "files": len(files),
        "uploaded": len(uploaded) + created,
        "skipped": len(files) - len(uploaded),
        "bytes": sum(f.bytes for f in files),
    }


def _claim(dest: Destination, own: Listed) -> None:
    """Make the prefix this build's (create the claim), or find it is already; DataError when
    another build claimed it."""
    claim = dump_json({"bytes": own.bytes, "manifest": own.name, "sha256": own.sha256})
    if dest.create(CLAIM, claim) and dest.create(CLAIM, claim):
        raise ConfigError(
            f"publish: {shown(dest.url)}: the store ignores If-None-Match (a second create of "
            f"{CLAIM} went through), so two publishes could both take the prefix; publish to a "
            "store that honours conditional writes (AWS S3 does)"
        )
    there = dest.read(CLAIM)  # made now or found: what is there decides
    try:
        digest = str(json.loads(there or b"")["sha256"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        raise DataError(
            f"publish: {shown(dest.url)}/{CLAIM} is not a publish claim; publish to a new prefix"
        ) from None
    if digest != own.sha256:
        raise DataError(
            f"publish: {shown(dest.url)} is claimed by another build (its {own.name} has sha256 "
            f"{digest}; this build's has {own.sha256}): publish to a new prefix (one prefix "
            "holds one build; an interrupted publish is finished by running it again)"
        )


def _taken(url: str, what: str, there: bytes, own: Listed) -> DataError:
    """The one-line refusal of a prefix that holds another build's manifest."""
    return DataError(
        f"publish: {shown(url)} {what} (its {own.name} has sha256 "
        f"{hashlib.sha256(there).hexdigest()}; this build's has {own.sha256}): publish to a "
        "new prefix (one prefix holds one build)"
    )


def _upload(
    dest: Destination, folder: Path, files: list[Listed], note: Callable[[str], None]
) -> list[Listed]:
    """Every listed file that is not there yet uploaded, then read back; the uploaded ones."""
    uploaded: list[Listed] = []
    for item in files:  # an object already there with the listed digest was just read back
        if not dest.matches(item):
            note(f"publish: uploading {item.name} ({item.bytes:,} bytes)")
            dest.put(folder / item.name, item.name)
            uploaded.append(item)
    for item in uploaded:  # read back what went up before the manifest makes the build visible
        if not dest.matches(item):
            note(f"publish: {item.name} read back wrong; uploading it again")
            dest.put(folder / item.name, item.name)
            if not dest.matches(item):
                raise DataError(f"publish: {shown(dest.url)}/{item.name} reads back wrong twice")
    return uploaded


class Destination:
    """The prefix a build is published under: reads, overwriting puts and exclusive creates,
    through fsspec, or the file system itself for a local folder."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fs, base = filesystem(url, "publish")
        self.base = base.rstrip("/")
        self.local = "file" in self.fs.protocol

    def target(self, name: str) -> str:
        """The path of `name` under the prefix."""
        return f"{self.base}/{name}"

    def read(self, name: str) -> bytes | None:
        """The object's bytes; None when it does not exist."""
        return _read_bytes(self.fs, self.target(name), self.url)

    def matches(self, item: Listed) -> bool:
        """Whether the object is there with the item's sha256 and size."""
        found = _digest(self.fs, self.target(item.name), self.url)
        return found is not None and found == (item.sha256, item.bytes)

    def put(self, local: Path, name: str) -> None:
        """Upload `local` as `name`, replacing what is there."""
        if self.local:
            with atomic_writer(Path(self.target(name))) as out, open(local, "rb") as src:
                shutil.copyfileobj(src, out, READ_BLOCK)
            return

        def attempt() -> int:
            with store_errors("publish", self.url):
                self.fs.put_file(str(local), self.target(name))
            return 0

        retrying("publish", self.url, attempt)

    def create(self, name: str, data: bytes) -> bool:
        """Write `name` only if it does not exist (atomically); whether this call made it."""
        if self.local:
            return _create_local(Path(self.target(name)), data)
        made: list[bool] = []

        def attempt() -> int:
            made.clear()
            with store_errors("publish", self.url):
                try:
                    self.fs.pipe_file(self.target(name), data, mode="create")
                except FileExistsError:  # S3's 412 to If-None-Match: *
                    made.append(False)
                    return 0
            made.append(True)
            return 0

        retrying("publish", self.url, attempt)
        return made[0]


def _create_local(path: Path, data: bytes) -> bool:
    """`data` at `path` unless something is there: a complete temp file hard-linked in."""
    tmp = path.with_name(f".{path.name}.claim-{os.getpid()}")
    with atomic_writer(tmp, sync_dir=False) as fh:
        fh.write(data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        raise disk_error(exc, path) from exc
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return True


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
        out.clear()
        with store_errors("publish", url):
            fs.invalidate_cache()
            if fs.exists(target):
                out.append(fs.cat_file(target))
        return 0

    out: list[bytes] = []
    retrying("publish", url, attempt)
    return out[0] if out else None
