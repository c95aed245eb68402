"""Owner-only crash-safe files: 0700 folders, 0600 files, temp name + fsync + rename.

Task datasets hold private references, so every folder and file a job writes is readable by its
owner only, whatever the umask. `jsonl_line` is the one canonical row form of every JSONL file of
a snapshot: byte-identical snapshots depend on it.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any

from corpus_assets.core.store.atomic import atomic_writer, disk_error, dump_json

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path) -> Path:
    """Create `path` (and its parents) and make it owner-only, also when it existed."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, PRIVATE_DIR)
    except OSError as exc:
        raise disk_error(exc, path) from exc
    return path


def private_writer(path: Path) -> AbstractContextManager[IO[bytes]]:
    """Yield a 0600 binary file at a temp name beside `path`; on success fsync and rename it in."""
    return atomic_writer(path, PRIVATE_FILE)


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` as an owner-only file, crash-safely."""
    with private_writer(path) as fh:
        fh.write(data)


def write_private_json(path: Path, obj: Any) -> None:
    """Write `obj` as stable JSON (sorted keys, indent 1, trailing newline), owner-only."""
    write_private(path, dump_json(obj))


def jsonl_line(obj: Any) -> bytes:
    """The canonical JSONL row: sorted keys, no spaces, UTF-8 unescaped, no NaN, one newline."""
    text = json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return (text + "\n").encode("utf-8")
