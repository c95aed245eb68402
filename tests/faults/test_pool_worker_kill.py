"""A local pool worker SIGKILLed mid-stage (as the OOM killer does) is replaced, as on Ray.

The shard stage's phase 1 and the tokenize stage run in a pool of worker processes. A worker
killed once costs a new pool and the unfinished tasks, and the published bytes are those of an
uninterrupted run; workers that keep dying past the retry budget end the stage with exit 75 and
one line naming the last one's pid and signal.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from fault_support import corpus_config, staged, tree
from support.corpus import start_corpus
from support.processes import descendants
from support.waiting import wait_for

from corpus_assets.core.config import load_config
from corpus_assets.core.errors import EXIT_TRANSIENT
from corpus_assets.core.stages.ray_tasks import RETRIES

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]

DOCS = 30_000  # ~30 shard tasks, ~40 shards: phase 1 (near dedup on) and tokenize take seconds
WORKERS = "2"
INPUTS = {"shard": ("raw",), "tokenize": ("raw", "corpus")}  # what each stage reads
OUTPUT = {"shard": "corpus", "tokenize": "tokens"}  # what it publishes


@dataclass(frozen=True)
class Reference:
    """A config and a data root built from it without faults."""

    config: Path
    root: Path
    hash12: str


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, corpus: CorpusRunner) -> Reference:
    folder = tmp_path_factory.mktemp("pool-kill")
    config = corpus_config(folder, "poolkill", DOCS)
    spec = json.loads(config.read_text(encoding="utf-8"))
    config.write_text(json.dumps({**spec, "dedup": {"near": True}}), encoding="utf-8")
    root = folder / "reference"
    for stage in ("fetch", "shard", "tokenize"):
        done = corpus(*_run_args(stage, config, root))
        assert done.returncode == 0, done.stderr
    return Reference(config, root, load_config(config).hash12)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stage", ["shard", "tokenize"])
def test_killed_worker_is_replaced(stage: str, reference: Reference, tmp_path: Path) -> None:
    root = _root_for(stage, reference, tmp_path)
    process = _start(stage, reference.config, root)
    wait_for(
        lambda: staged(root, reference.hash12, stage) or process.poll() is not None,
        120,
        f"a {stage} task to finish",
    )
    workers = _pool_workers(process.pid)
    assert process.poll() is None and workers, f"the {stage} stage has no pool worker to kill"
    os.kill(workers[0], signal.SIGKILL)
    _out, err = process.communicate(timeout=240)

    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    retry = re.search(
        rf"worker \(pid {workers[0]}\) was killed by SIGKILL; running the (\d+) ", err
    )
    assert retry, f"no retry of the killed worker {workers[0]}:\n{err}"
    assert int(retry.group(1)) > 0, "the worker was killed after the last task finished"
    assert not Path(f"/proc/{workers[0]}").exists(), "the killed worker was not reaped"
    output = OUTPUT[stage]
    assert tree(root, output) == tree(reference.root, output)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stage", ["shard", "tokenize"])
def test_workers_dying_past_the_budget(stage: str, reference: Reference, tmp_path: Path) -> None:
    root = _root_for(stage, reference, tmp_path)
    process = _start(stage, reference.config, root)
    killed: list[int] = []
    while process.poll() is None:  # every worker of every pool, as soon as it shows
        for pid in _pool_workers(process.pid):
            if pid not in killed:
                with contextlib.suppress(ProcessLookupError):  # its broken pool stopped it
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        time.sleep(0.005)
    _out, err = process.communicate(timeout=60)

    assert process.returncode == EXIT_TRANSIENT, err
    assert "Traceback" not in err, err
    assert err.count("was killed by SIGKILL; running the") == RETRIES, err
    last = err.strip().splitlines()[-1]
    error = re.fullmatch(
        rf"corpus run: error: {stage} workers died {RETRIES + 1} times, the last "
        r"\(pid (\d+)\) was killed by SIGKILL; run the stage again .*",
        last,
    )
    assert error, err
    assert int(error.group(1)) in killed
    assert err.count("error:") == 1, err
    assert not (root / OUTPUT[stage]).exists()


def _root_for(stage: str, reference: Reference, tmp_path: Path) -> Path:
    """A new data root holding the reference's inputs of `stage` (a data root is relocatable)."""
    root = tmp_path / "root"
    for part in INPUTS[stage]:
        shutil.copytree(reference.root / part, root / part)
    return root


def _run_args(stage: str, config: Path, root: Path) -> list[str]:
    args = ["run", "--stage", stage, "--config", str(config), "--root", str(root)]
    return [*args, "--workers", WORKERS]


def _start(stage: str, config: Path, root: Path) -> subprocess.Popen[str]:
    args = _run_args(stage, config, root)
    return start_corpus(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _pool_workers(pid: int) -> list[int]:
    """The pool workers of stage process `pid`: its descendants but multiprocessing's resource
    tracker (which a spawning pool starts)."""
    workers = []
    for child in descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        if b"resource_tracker" not in cmdline:
            workers.append(child)
    return workers
