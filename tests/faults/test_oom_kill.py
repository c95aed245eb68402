"""SIGKILL of a shard stage's main process alone (what the OOM killer does) frees its build lock.

The stage holds the build's shard lock and runs phase 1 in forked pool workers. When only the
main process is killed, its workers end with it (they die with their parent) and none of them
keeps the lock (a forked worker closes its copies of the stage's lock descriptors), so a second
start of the same stage takes the lock at once, resumes the work and publishes the bytes of an
uninterrupted run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fault_support import corpus_config, staged, tree
from support.corpus import run_corpus, start_corpus
from support.processes import descendants, live_in_group, running
from support.waiting import wait_for

from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import held_by

DOCS = 30_000  # ~30 shard tasks, near dedup on: phase 1 takes seconds with 2 workers
WORKERS = "2"
LOCK_FREE_S = 5.0  # the lock is free this soon after the kill
RERUN_S = 120.0  # the second shard stage ends within this


def _shard_args(config: Path, root: Path) -> list[str]:
    args = ["run", "--stage", "shard", "--config", str(config), "--root", str(root)]
    return [*args, "--workers", WORKERS]


def _workers(pid: int) -> list[int]:
    """The pool workers of stage `pid`: its descendants but multiprocessing's helpers."""
    found = []
    for child in descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        if b"resource_tracker" not in cmdline:
            found.append(child)
    return found


@pytest.mark.timeout(300)
def test_killing_the_shard_stage_alone_frees_its_lock_and_ends_its_workers(
    tmp_path: Path,
) -> None:
    config = corpus_config(tmp_path, "oomkill", DOCS)
    spec = json.loads(config.read_text(encoding="utf-8"))
    config.write_text(json.dumps({**spec, "dedup": {"near": True}}), encoding="utf-8")
    hash12 = load_config(config).hash12
    reference, root = tmp_path / "reference", tmp_path / "root"
    run_corpus("run", "--stage", "fetch", "--config", config, "--root", reference, check=True)
    shutil.copytree(reference / "raw", root / "raw")
    run_corpus(*_shard_args(config, reference), check=True)
    lock = Layout(root).stage_lock(hash12, "shard")

    log = (tmp_path / "stage.err").open("w")
    stage = start_corpus(
        *_shard_args(config, root),
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,  # the workers stay in its group: the test can always stop them
    )
    try:
        wait_for(
            lambda: staged(root, hash12, "shard"), 120, "a shard task to finish", watch=[stage]
        )
        workers = _workers(stage.pid)
        assert len(workers) >= 2, f"the stage runs {workers}, not a pool of {WORKERS}"
        holder = held_by(lock)
        assert holder is not None and holder.pid == stage.pid, holder
        os.kill(stage.pid, signal.SIGKILL)  # the main process only, as the OOM killer does
        stage.wait(timeout=10)
        assert stage.returncode == -signal.SIGKILL
        assert staged(root, hash12, "shard") and not (root / "corpus").exists(), "killed mid-work"

        killed = time.monotonic()
        wait_for(lambda: held_by(lock) is None, LOCK_FREE_S, "the build lock to be free")
        freed = time.monotonic() - killed
        wait_for(lambda: not any(map(running, workers)), LOCK_FREE_S, "the workers to end")
        again = run_corpus(*_shard_args(config, root), timeout=RERUN_S)
    finally:
        for pid in live_in_group(stage.pid):
            os.kill(pid, signal.SIGKILL)
        stage.wait()
        log.close()

    assert again.returncode == 0, again.stderr
    assert "waiting for" not in again.stderr, again.stderr
    assert freed < LOCK_FREE_S
    assert tree(root, "corpus") == tree(reference, "corpus")
