"""Owner-only crash-safe files: 0700 folders, 0600 files, temp name + fsync + rename.

Task datasets hold private references, so every folder and file a job writes is readable by its
owner only, whatever the umask. `jsonl_line` is the one canonical row form of every JSONL file of
a snapshot: byte-identical snapshots depend on it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from corpus_assets.core.store.atomic import disk_error, dump_json, fsync_dir

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


@contextmanager
def private_writer(path: Path) -> Iterator[IO[bytes]]:
    """Yield a 0600 binary file at a temp name beside `path`; on success fsync and rename it in."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)  # a leftover of a crashed writer with this pid
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE)
        os.fchmod(fd, PRIVATE_FILE)  # the umask must not matter
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise disk_error(exc, path) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
