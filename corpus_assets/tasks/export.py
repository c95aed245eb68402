"""Export a verified task snapshot's training rows as a Hugging Face `datasets` dataset.

The export goes to a new folder only: built in a staging sibling, sealed owner-only (training
rows may hold answers), then renamed. `corpus_source.json` beside the data names the snapshot
it came from, so an exported dataset can always be traced back to a verified `dataset_id`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.store.atomic import disk_error, fsync_dir
from corpus_assets.core.store.remote import RemotePath
from corpus_assets.tasks.files import PRIVATE_DIR, PRIVATE_FILE, private_dir, write_private_json
from corpus_assets.tasks.snapshot import (
    MANIFEST,
    TRAIN,
    Snapshot,
    load_snapshot,
    publish_folder,
)

EXPORT_SOURCE = "corpus_source.json"


def snapshot_folder_of(path: Path) -> Path | None:
    """The task snapshot folder `path` names (it, its `manifest.json`, a job's `dataset/`)."""
    if path.is_file() and path.name == MANIFEST:
        path = path.parent
    for folder in (path, path / "dataset"):
        if (folder / MANIFEST).is_file():
            return folder
    return None


def export_hf_dataset(snapshot: Snapshot | str | Path, dest: str | Path) -> Path:
    """Verify the snapshot and write its training rows as a `datasets` dataset to new `dest`."""
    source = snapshot.path if isinstance(snapshot, Snapshot) else snapshot
    snap = load_snapshot(source.url if isinstance(source, RemotePath) else source)
    target = Path(dest).absolute()
    if target.exists():
        raise ConfigError(f"{target} already exists; choose a new folder")
    staging = target.with_name(f".{target.name}.staging-{os.getpid()}")
    if staging.exists():
        shutil.rmtree(staging)
    try:
        _save_dataset(snap, staging)
        _seal_tree(staging)
        publish_folder(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def _save_dataset(snap: Snapshot, staging: Path) -> None:
    """`datasets` save_to_disk of the training rows plus corpus_source.json, in `staging`."""
    import datasets  # slow to import: only when exporting

    try:
        table = datasets.Dataset.from_list(snap.training_rows())
    except (TypeError, ValueError) as exc:  # pyarrow's ArrowInvalid / ArrowTypeError
        raise DataError(f"snapshot {snap.path}: {TRAIN} does not fit one table: {exc}") from None
    try:
        staging.parent.mkdir(parents=True, exist_ok=True)
        private_dir(staging)
        table.save_to_disk(str(staging))
    except OSError as exc:
        raise disk_error(exc, staging) from exc
    source = {
        "kind": "task_snapshot",
        "dataset_id": snap.dataset_id,
        "snapshot_path": str(
            snap.path if isinstance(snap.path, RemotePath) else snap.path.absolute()
        ),
        "rows": snap.rows,
    }
    write_private_json(staging / EXPORT_SOURCE, source)


def _seal_tree(root: Path) -> None:
    """Make every folder 0700 and file 0600 under `root`, and fsync them (datasets does not)."""
    for dirpath, _dirs, filenames in os.walk(root):
        folder = Path(dirpath)
        os.chmod(folder, PRIVATE_DIR)
        for name in filenames:
            os.chmod(folder / name, PRIVATE_FILE)
            fd = os.open(folder / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(folder)
