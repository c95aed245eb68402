"""TEMPORARY stand-in (the helper's version replaces it at merge)."""

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
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(PRIVATE_DIR)
    return path


@contextmanager
def private_writer(path: Path) -> Iterator[IO[bytes]]:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE)
        os.fchmod(fd, PRIVATE_FILE)
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
    with private_writer(path) as fh:
        fh.write(data)


def write_private_json(path: Path, obj: Any) -> None:
    write_private(path, dump_json(obj))


def jsonl_line(obj: Any) -> bytes:
    text = json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return (text + "\n").encode("utf-8")
