"""A data job's folder: opening it new or for resume, its process lock, `job.json`, progress.

DIR/.lock            locked by the running job, named in it (the kernel drops it when it dies)
DIR/job.json         state (running, succeeded, failed, cancelled) and the error line
DIR/config.json      the job config as loaded
DIR/progress.json    counts, rewritten as chunks commit
DIR/work/            checkpoints.sqlite3 and the derived batch files
DIR/dataset/         the published snapshot
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import ConfigError, TransientError
from corpus_assets.core.store.locks import LockBusy, file_lock
from corpus_assets.tasks.files import private_dir, write_private_json

STATES = ("running", "succeeded", "failed", "cancelled")


class JobFolder:
    """The folder of one data job, held under an exclusive process lock while open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.work = path / "work"
        self.dataset = path / "dataset"
        self.staging = path / ".dataset.staging"
        self.job_file = path / "job.json"
        self._held = ExitStack()  # the folder's lock while the job runs

    @classmethod
    def open(cls, path: Path, resume: bool, attached: bool = False) -> JobFolder:
        """A new job needs a new (or empty) folder; `resume` needs an existing job's folder.

        `attached`: the caller holds the task partition's lock (`tasks/attach.py`), so a folder
        that a job was started in but never recorded (killed before its job.json) holds nothing
        anyone uses and counts as empty.
        """
        folder = cls(path.absolute())
        if resume:
            if not folder.job_file.is_file():
                raise ConfigError(
                    f"cannot resume {path}: no job.json there, so it is not a data job's folder; "
                    "start a new job without --resume"
                )
        elif not folder.empty() and not (attached and folder.unrecorded()):
            raise ConfigError(
                f"--output {path} already exists; a new job needs a new folder "
                "(or pass --resume to continue the job there)"
            )
        private_dir(folder.path)
        folder._lock()
        private_dir(folder.work)
        return folder

    def empty(self) -> bool:
        """Nothing there yet, or an empty folder."""
        path = self.path
        return not path.exists() or (path.is_dir() and not any(path.iterdir()))

    def unrecorded(self) -> bool:
        """A folder with no job.json, no snapshot and an empty work/: at most the lock and
        config.json of a job killed before it recorded itself (checkpoints come after job.json)."""
        if not self.path.is_dir() or self.job_file.exists():
            return False
        if self.dataset.exists() or self.staging.exists():
            return False
        return not self.work.exists() or (self.work.is_dir() and not any(self.work.iterdir()))

    def _lock(self) -> None:
        """Take DIR/.lock without waiting; a second job on the folder fails at once."""
        held = ExitStack()
        try:
            held.enter_context(file_lock(self.path / ".lock", f"job folder {self.path}", wait=0))
        except LockBusy as busy:
            pid = busy.holder.pid if busy.holder else "unknown"
            raise TransientError(
                f"job folder {self.path} is in use by another process (pid {pid}); "
                "wait for it to end or use another --output"
            ) from None
        self._held = held

    def release(self) -> None:
        """Drop DIR/.lock (also when the process dies: the kernel drops it then)."""
        self._held.close()

    def read_job(self) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = json.loads(self.job_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return doc

    def write_job(self, state: str, **fields: Any) -> None:
        """Rewrite job.json with `state` (one of STATES) and the given fields."""
        assert state in STATES, state
        doc = {k: v for k, v in self.read_job().items() if k not in ("error", "exit_code")}
        write_private_json(self.job_file, doc | {"state": state, "pid": os.getpid()} | fields)

    def write_config(self, raw: dict[str, Any]) -> None:
        write_private_json(self.path / "config.json", raw)

    def write_progress(self, progress: dict[str, Any]) -> None:
        write_private_json(self.path / "progress.json", progress)
