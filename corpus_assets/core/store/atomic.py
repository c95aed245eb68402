"""Crash-safe files: temp name in the same folder, fsync, rename, fsync the folder.

Privacy follows the folder: in an owner-only folder (no group or other bits: raw/, work/, logs/,
the Dagster instance) every file and folder written here is owner-only too (0600, 0700), whatever
the umask; elsewhere modes follow the umask. A published folder takes the rule of where it lands.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from corpus_assets.core.errors import ConfigError, CorpusError, DiskError, TransientError

MANIFEST = "_MANIFEST.json"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
SHARED_BITS = 0o077  # group and other


def is_private(folder: Path) -> bool:
    """Whether `folder` is open to its owner only (no group or other permission bits)."""
    return stat.S_IMODE(os.stat(folder).st_mode) & SHARED_BITS == 0


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) and make it owner-only (0700), also when it existed."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        tighten(path)
    except OSError as exc:
        raise disk_error(exc, path) from exc
    return path


def tighten(path: Path) -> None:
    """Make `path` owner-only (a folder 0700, a file 0600) if it is open to others; a link or
    a file that vanished meanwhile (another process's temp file) is left alone."""
    try:
        info = os.lstat(path)
        if stat.S_IMODE(info.st_mode) & SHARED_BITS and not stat.S_ISLNK(info.st_mode):
            os.chmod(path, PRIVATE_DIR if stat.S_ISDIR(info.st_mode) else PRIVATE_FILE)
    except FileNotFoundError:
        pass


def tighten_tree(root: Path) -> None:
    """`tighten` `root` and everything under it (links are not followed)."""
    tighten(root)
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            tighten(Path(dirpath) / name)


def make_dirs(path: Path) -> Path:
    """Create `path` and its missing parents; each new folder is owner-only when the folder it is
    made in is (mkdir's mode is masked by the umask, so it is set after)."""
    missing: list[Path] = []
    here = path
    while not here.exists():
        missing.append(here)
        here = here.parent
    private = bool(missing) and here.is_dir() and is_private(here)
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue  # made by someone else meanwhile: theirs to set
        if private:
            os.chmod(folder, PRIVATE_DIR)
    return path


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

    `mode` (e.g. 0o600 for owner-only files) is the file's mode whatever the umask; without
    one, a file in an owner-only folder is owner-only and any other follows the umask.
    `sync_dir=False` leaves the folder's fsync to the caller: for files that a marker written
    later in the same folder (with its folder fsync) makes count, one folder fsync serves all.
    """
    make_dirs(path.parent)
    if mode is None and is_private(path.parent):
        mode = PRIVATE_FILE
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
    """Move a complete staged folder to its final name (replacing an unfinished one).

    Its modes become those of where it lands: owner-only in an owner-only folder (the raw
    cache), else the umask's (a build staged in the private work/ folder is published readable
    as the umask says).
    """
    make_dirs(final.parent)
    _take_modes(staging, private=is_private(final.parent))
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
    """An empty folder at `path` (anything there before is removed), owner-only in an
    owner-only folder."""
    if path.exists():
        shutil.rmtree(path)
    return make_dirs(path)


def _take_modes(root: Path, private: bool) -> None:
    """Give `root` and everything under it owner-only modes, or those the umask gives."""
    if private:
        tighten_tree(root)
        return
    mask = current_umask()
    folder_mode, file_mode = 0o777 & ~mask, 0o666 & ~mask
    os.chmod(root, folder_mode)
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(Path(dirpath) / name, folder_mode)
        for name in files:
            if not os.path.islink(Path(dirpath) / name):
                os.chmod(Path(dirpath) / name, file_mode)


def current_umask() -> int:
    """This process's umask (from /proc where it is shown, else set and put back)."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask
