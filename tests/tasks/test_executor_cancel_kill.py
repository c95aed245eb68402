"""Stopping a job from outside: repeated cancellation of the awaiting task, and a worker
process killed as the OOM killer would.

The jobs run `fault_recipes:create_recipe` (the arithmetic recipe, logging each call and pausing
where FAULT_PAUSE says), in process for the Python API and through `corpus tasks` otherwise.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from job_support import (
    WAIT_S,
    calls,
    dataset_files,
    job_config,
    job_env,
    job_state,
    last_json,
    read_log,
    run_job,
    start_job,
    wait_for_pause,
)
from support.processes import process
from support.waiting import wait_for

from corpus_assets.tasks.run import run_data_job

pytestmark = pytest.mark.timeout(300)


def lock_is_free(output: Path) -> bool:
    """Whether the job folder's `.lock` can be taken (the job released it)."""
    fd = os.open(output / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def live_task_threads() -> list[str]:
    """The executor's worker and producer threads still alive in this process."""
    return [
        t.name
        for t in threading.enumerate()
        if t.is_alive() and t.name.startswith(("task-worker", "task-producer"))
    ]


@pytest.mark.parametrize("cancels", [2, 3])
def test_repeated_cancellation_returns_once_the_job_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cancels: int
) -> None:
    config = job_config(tmp_path / "job.json")
    log, output, gate = tmp_path / "calls.log", tmp_path / "out", tmp_path / "gate"
    for key, value in job_env(log, "clean:28", gate).items():
        if key.startswith("FAULT_"):
            monkeypatch.setenv(key, value)
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: None)
        job = asyncio.create_task(run_data_job(config, output))
        while not calls(read_log(log), "pause"):
            assert not job.done(), job
            await asyncio.sleep(0.01)
        for _ in range(cancels):
            job.cancel()
            await asyncio.sleep(0.1)
        seen["done_while_paused"] = job.done()
        seen["state_while_paused"] = job_state(output)["state"]
        gate.touch()  # the paused worker finishes its chunk; the job can stop
        with pytest.raises(asyncio.CancelledError):
            await job
        # right after the await: nothing of the job is left running
        seen["state"] = job_state(output)["state"]
        seen["wal"] = (output / "work" / "checkpoints.sqlite3-wal").exists()
        seen["lock_free"] = lock_is_free(output)
        seen["threads"] = live_task_threads()

    try:
        asyncio.run(scenario())
    finally:
        gate.touch()  # a failed scenario leaves no worker paused
    assert seen["done_while_paused"] is False  # the task waits for the paused worker
    assert seen["state_while_paused"] == "running"
    assert seen["state"] == "cancelled"
    assert seen["wal"] is False  # the last connection closed the database (WAL checkpointed)
    assert seen["lock_free"] is True
    assert seen["threads"] == []
    assert not (output / "dataset").exists()


# -- a worker process killed mid-job -------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An uninterrupted run of the test config: its dataset files and id."""
    base = tmp_path_factory.mktemp("reference")
    done = run_job(job_config(base / "job.json"), base / "out", job_env(base / "calls.log"))
    assert done.returncode == 0, done.stderr
    return {
        "files": dataset_files(base / "out"),
        "dataset_id": last_json(done.stdout)["dataset_id"],
    }


def kill_a_paused_worker(log: Path, job: int) -> int:
    """SIGKILL one worker process that logged a pause; check it was the job's live child and that
    it is gone afterwards; its pid."""
    pid = int(calls(read_log(log), "paused-pid")[0])
    worker = process(pid)
    assert worker is not None and worker.running, worker  # alive
    assert worker.parent == job  # a worker the job spawned
    assert b"multiprocessing" in worker.cmdline
    os.kill(pid, signal.SIGKILL)
    # reaped by the job, not only dead
    wait_for(lambda: process(pid) is None, WAIT_S, f"worker {pid} to be reaped")
    return pid


@pytest.mark.parametrize(
    ("pause", "who"),
    [
        pytest.param("clean:48", "a task worker", id="cleaning"),
        pytest.param("project:48", "a task worker", id="projecting"),
        pytest.param("generate:1", "the generation process", id="generating"),
    ],
)
def test_a_killed_worker_is_replaced_and_the_job_publishes_the_same_dataset(
    tmp_path: Path, reference: dict[str, Any], pause: str, who: str
) -> None:
    execution = {"max_retries": 2, "retry_delay": 0.1}
    config = job_config(tmp_path / "job.json", "process", 2, execution)
    log, output, gate = tmp_path / "calls.log", tmp_path / "out", tmp_path / "gate"
    err = tmp_path / "job.err"
    proc = start_job(config, output, job_env(log, pause, gate), err)
    try:
        wait_for_pause(log, proc)
        pid = kill_a_paused_worker(log, proc.pid)
    finally:
        gate.touch()  # the new pool's workers run on
        stdout, _ = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, err.read_text()
    assert last_json(stdout)["dataset_id"] == reference["dataset_id"]
    assert dataset_files(output) == reference["files"]
    assert f"{who} (pid {pid}) was killed by SIGKILL; retry 1" in err.read_text()
    assert job_state(output)["state"] == "succeeded"


def test_a_killed_worker_past_the_retries_fails_with_one_transient_line(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    config = job_config(tmp_path / "job.json", "process", 2, {"max_retries": 0})
    log, output, gate = tmp_path / "calls.log", tmp_path / "out", tmp_path / "gate"
    err = tmp_path / "job.err"
    proc = start_job(config, output, job_env(log, "clean:48", gate), err)
    try:
        wait_for_pause(log, proc)
        pid = kill_a_paused_worker(log, proc.pid)
    finally:
        gate.touch()
        proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 75, err.read_text()
    errors = [line for line in err.read_text().splitlines() if not line.startswith("tasks: ")]
    assert len(errors) == 1, errors  # no traceback
    assert f"a task worker (pid {pid}) was killed by SIGKILL (after 1 attempt(s))" in errors[0]
    job = job_state(output)
    assert job["state"] == "failed" and job["exit_code"] == 75, job

    resumed = run_job(config, output, job_env(log), resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["dataset_id"] == reference["dataset_id"]
