"""Ctrl-C of `corpus build` and a heartbeat stop of a stage: clean lines, no traceback.

A Ctrl-C reaches every process of the terminal's process group: `corpus build` and the helper
processes Dagster starts to capture the run's output. A stage runs in its own process group and is
stopped by the stage runner (SIGINT to that group), on a Ctrl-C or after its heartbeat timeout,
which reaches the stage's pool workers. Each process answers in one line or not at all; the
tracebacks stay in the run log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from dagster_support import WRAPPER
from fault_support import corpus_config, staged
from support.corpus import own_instance_env, run_corpus, start_corpus
from support.processes import stage_pids
from support.waiting import wait_for

from corpus_assets.core.config import load_config
from corpus_assets.resources.supervise import supervise

DOCS = 16 * 1024  # sixteen shard tasks of ~1 MB: two workers take seconds over them
STOPPING = re.compile(r"^\[corpus\] no output for \d+ s; stopping pid (\d+)$")


def _tracebacks(text: str) -> list[str]:
    """The lines of `text` that belong to a Python traceback."""
    return [line for line in text.splitlines() if re.search("Traceback|KeyboardInterrupt", line)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_of_a_build_prints_no_traceback(
    sig: signal.Signals, code: int, tmp_path: Path
) -> None:
    """Ctrl-C (SIGINT), or SIGTERM, to the build's process group while the shard stage runs:
    exit 130 / 143, our lines only."""
    config = corpus_config(tmp_path / "configs", f"stop-{sig.name.lower()}", DOCS)
    cfg = load_config(config)
    root = tmp_path / "root"
    env = own_instance_env()
    # --progress: stderr passes on what the run writes meanwhile, as at a terminal
    build = start_corpus(
        "build", "--progress", config, "--root", root, "--workers", "2",
        environ=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )  # fmt: skip
    try:
        wait_for(
            lambda: (
                (staged(root, cfg.hash12, "shard") and stage_pids(root, "shard"))
                or build.poll() is not None
            ),
            240,
            "a shard task to finish",
        )
        assert build.poll() is None, "the build ended before the shard stage ran"
        os.killpg(build.pid, sig)
        _out, err = build.communicate(timeout=240)
    finally:
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
            build.wait()

    assert build.returncode == code, err
    assert _tracebacks(err) == [], err
    failed = re.search(r"^\[corpus\] run \S+ FAILED in [\d.]+ s: (.*)$", err, re.M)
    assert failed, err
    assert failed.group(1) == (
        "shard: `corpus run --stage shard` stopped: the run was interrupted or cancelled"
    ), err
    assert f"[corpus] cleaned up {cfg.partition_key} after failed run" in err, err
    assert err.rstrip().endswith("corpus build: interrupted"), err
    assert stage_pids(root, "shard") == [], "the shard stage outlived `corpus build`"
    [log] = re.findall(r"^\[corpus\] full log: (\S+)$", err, re.M)
    assert "DagsterExecutionInterruptedError" in Path(log).read_text(encoding="utf-8")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("inherited", [signal.SIG_DFL, signal.SIG_IGN], ids=["default", "ignored"])
def test_heartbeat_stop_of_a_stage_with_pool_workers_prints_no_traceback(
    tmp_path: Path, inherited: signal.Handlers
) -> None:
    """A shard task hangs in one pool worker while the other worker, done, waits for work: the
    stage runner's heartbeat stops the stage, which stops its workers and says one line; also
    when the stage starts with SIGTERM ignored (a parent that ran Dagster in-process leaves it
    so), since the stage stops its workers with SIGTERM."""
    config = corpus_config(tmp_path / "configs", "hang", 8 * 1024)
    cfg = load_config(config)
    root = tmp_path / "root"
    where = ["--config", str(config), "--root", str(root)]
    fetch = run_corpus("run", "--stage", "fetch", *where)
    assert fetch.returncode == 0, fetch.stderr
    state = tmp_path / "wrapper"
    argv = [sys.executable, str(WRAPPER), "--state", str(state), "--mode", "hang-task=0", "--"]
    argv += ["run", "--stage", "shard", *where, "--workers", "2"]
    lines: list[str] = []

    previous = signal.signal(signal.SIGTERM, inherited)  # what the stage inherits
    try:
        outcome = supervise(argv, dict(os.environ), 6.0, 60.0, lines.append)  # 60 s: a loaded CI
    finally:
        signal.signal(signal.SIGTERM, previous)

    assert outcome.timed_out, lines
    stopping = STOPPING.match(lines[0])
    assert stopping, lines
    hung = int((state / "hung.pid").read_text())
    assert hung != int(stopping.group(1)), "task 0 hung in the stage process, not a worker"
    assert len(staged(root, cfg.hash12, "shard")) == 7, "the other worker was still busy"
    assert outcome.returncode == 130, lines  # the stage stopped itself, before the SIGKILL
    assert _tracebacks("\n".join(lines)) == [], lines
    assert lines[1:] == ["corpus run: interrupted"], lines
