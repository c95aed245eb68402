"""`corpus tasks --attach`: the job of a task partition, run by one process at a time.

The stage runner runs a registered task config as `corpus tasks --attach`. The process holds
the partition's lock, `<root>/locks/<hash12>/tasks.lock` (`locks.build_lock`: the kernel drops
it when the holder dies), for its whole run. A second build of the partition waits, printing a
line every few seconds that names the holder, and then decides under the lock: a published
snapshot is verified and reused, a job folder that an earlier job left (failed, cancelled or
killed) is resumed, else the job starts. Lock order, everywhere: this lock first, then the shard
locks of the corpus builds the job reads (`corpus_inputs.reading`), then the folder's own .lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from corpus_assets.core.errors import ConfigError
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.tasks.config import LoadedJobConfig
from corpus_assets.tasks.jobdir import JobFolder
from corpus_assets.tasks.registry import job_folder

STAGE = "tasks"
PUBLISHED = "its snapshot is published; verifying it to reuse it"


def partition_lock(root: Path, config: LoadedJobConfig) -> Path:
    """The lock file of the task partition of `config` under `root`."""
    return Layout(root).stage_lock(config.hash12, STAGE)


@contextmanager
def attached(
    config: LoadedJobConfig, output: Path, root: Path, say: Callable[[str], None]
) -> Iterator[bool]:
    """Hold the partition's lock for the block; whether the job in `output` is to be resumed.

    `output` must be the partition's job folder, `<root>/tasks/<name>/<hash12>/`.
    """
    folder = JobFolder(job_folder(root, config))
    if output.resolve() != folder.path.resolve():
        raise ConfigError(
            f"--attach runs the job of task partition {config.partition_key} in {folder.path}; "
            f"--output {output} is another folder (without --attach, any new folder will do)"
        )
    what = f"the task job of {config.partition_key}"
    with build_lock(partition_lock(root, config), what, lambda line: say(f"tasks: {line}")):
        resume = folder.job_file.is_file()
        if resume and folder.dataset.is_dir():
            say(f"tasks: resuming the task job in {folder.path}: {PUBLISHED}")
        elif resume:
            say(f"tasks: resuming the task job in {folder.path}")
        else:
            say(f"tasks: starting the task job in {folder.path}")
        yield resume
