"""Crash-safe files: temp name in the same folder, fsync, rename, fsync the folder."""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from corpus_assets.core.errors import ConfigError, CorpusError, DiskError, TransientError

MANIFEST = "_MANIFEST.json"


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def disk_error(exc: OSError, path: Path) -> CorpusError:
    """A full or read-only disk is worth a retry once fixed; say which path and why."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EXDEV:
        return ConfigError(
            f"cannot move {path} across file systems: the data root must be one file system"
        )
    if exc.errno is None and _nearly_full(path):  # short writes (numpy, pyarrow) carry no errno
        reason = f"no space left on device ({reason})"
    elif exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
        return DiskError(f"cannot write {path}: {reason}")
    return TransientError(f"cannot write {path}: {reason}")


def _nearly_full(path: Path) -> bool:
    """Less than 1 MiB free where `path` lives (a write that stopped short ran out of room)."""
    folder = path if path.is_dir() else path.parent
    try:
        stats = os.statvfs(folder)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < (1 << 20)


def _open_new(tmp: Path, mode: int | None) -> IO[bytes]:
    """`tmp` opened for writing; with `mode`, created with exactly that mode (umask ignored)."""
    if mode is None:
        return open(tmp, "wb")
    tmp.unlink(missing_ok=True)  # a leftover of a crashed writer with this pid
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    os.fchmod(fd, mode)
    return os.fdopen(fd, "wb")


@contextmanager
def atomic_writer(
    path: Path, mode: int | None = None, sync_dir: bool = True
) -> Iterator[IO[bytes]]:
    """Yield a binary file at a temp name beside `path`; on success fsync and rename it in.

    `mode` (e.g. 0o600 for owner-only files) is the file's mode whatever the umask.
    `sync_dir=False` leaves the folder's fsync to the caller: for files that a marker written
    later in the same folder (with its folder fsync) makes count, one folder fsync serves all.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with _open_new(tmp, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        if sync_dir:
            fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise disk_error(exc, path) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_writer(path) as fh:
        fh.write(data)


def dump_json(obj: Any) -> bytes:
    """Stable JSON for manifests: sorted keys, indented, trailing newline."""
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def write_json(path: Path, obj: Any) -> None:
    write_bytes(path, dump_json(obj))


def publish_dir(staging: Path, final: Path) -> None:
    """Move a complete staged folder to its final name (replacing an unfinished one)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fsync_tree(staging)
    if final.exists():
        remove_tree(final)
    try:
        os.replace(staging, final)
    except OSError as exc:
        raise disk_error(exc, final) from exc
    fsync_dir(final.parent)


def fsync_tree(root: Path) -> None:
    """fsync every folder under `root` (files are fsynced as they are written)."""
    for dirpath, _dirs, _files in os.walk(root):
        fsync_dir(Path(dirpath))


def remove_tree(path: Path) -> None:
    """Delete a folder by first renaming it aside, so no reader sees it half-deleted."""
    if not path.exists():
        return
    doomed = path.with_name(f".{path.name}.deleting-{os.getpid()}")
    os.replace(path, doomed)
    fsync_dir(path.parent)
    shutil.rmtree(doomed)


def fresh_dir(path: Path) -> Path:
    """An empty folder at `path` (anything there before is removed)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path
