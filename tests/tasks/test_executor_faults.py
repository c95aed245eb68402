"""Durability of `corpus tasks`: SIGKILL and resume, the folder lock, cancellation by
signal and by asyncio, and a changed identity refused before any recipe call.

Real processes: every job runs `fault_recipes:create_recipe` (the arithmetic recipe, logging each
call to a file and pausing where FAULT_PAUSE says) in a fresh interpreter of its own session.
The test config needs two batches of 64 candidates (chunks of 8) and projects 100 rows.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from job_support import (
    TARGET,
    calls,
    checkpoint_dump,
    checkpoint_state,
    dataset_files,
    expected_cleans,
    integrity,
    job_config,
    job_env,
    job_state,
    kill_group,
    last_json,
    read_log,
    run_job,
    start_job,
    wait_for_pause,
    wait_for_text,
)

from corpus_assets.tasks.run import run_data_job

pytestmark = pytest.mark.timeout(300)

Check = Callable[[dict[str, Any]], bool]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An uninterrupted run of the test config: its dataset files, id and call log."""
    base = tmp_path_factory.mktemp("reference")
    config = job_config(base / "job.json")
    log = base / "calls.log"
    done = run_job(config, base / "out", job_env(log))
    assert done.returncode == 0, done.stderr
    files = dataset_files(base / "out")
    public = [json.loads(line)["task_id"] for line in files["public.jsonl"].splitlines()]
    assert len(public) == TARGET
    lines = read_log(log)
    assert calls(lines, "generate") == ["0", "1"]  # the config really needs two batches
    return {
        "files": files,
        "dataset_id": last_json(done.stdout)["dataset_id"],
        "selected": public,
        "log": lines,
        "output": base / "out",
    }


def interrupted(state: dict[str, Any]) -> str:
    """Which kill point the checkpoints show (for the assertion message)."""
    return json.dumps({"batches": state["batches"], "projected": len(state["projected"])})


def in_batch_0(state: dict[str, Any]) -> bool:
    """Killed while cleaning batch 0, after some chunks committed."""
    consumed, done = state["batches"].get(0, (0, False))
    return 0 < consumed < 64 and not done


def between_batches(state: dict[str, Any]) -> bool:
    """Killed after batch 0 finished, before anything of batch 1 committed."""
    batches = state["batches"]
    return bool(batches.get(0) == (64, True) and batches.get(1, (0, False))[0] == 0)


def projecting(state: dict[str, Any]) -> bool:
    """Killed while projecting, after some projection chunks committed."""
    return 0 < len(state["projected"]) < TARGET


# Each pause call lies in a chunk whose submission needed chunk 0 committed first (the
# coordinator keeps at most 2 * max_workers + 1 chunks in flight), so the checkpoints hold
# progress when the kill lands: with one worker, chunk 3 (calls 25-32); with two, chunk 5.
KILL_POINTS = [
    pytest.param("thread", 1, "clean:40", in_batch_0, id="thread-batch0-cleaning"),
    pytest.param("thread", 1, "generate:1", between_batches, id="thread-between-batches"),
    pytest.param("thread", 1, "project:30", projecting, id="thread-projecting"),
    pytest.param("process", 2, "clean:48", in_batch_0, id="process-batch0-cleaning"),
    pytest.param("process", 2, "project:48", projecting, id="process-projecting"),
]


@pytest.mark.parametrize(("backend", "workers", "pause", "where"), KILL_POINTS)
def test_sigkill_then_resume_gives_the_same_bytes_without_recleaning(
    tmp_path: Path,
    reference: dict[str, Any],
    backend: str,
    workers: int,
    pause: str,
    where: Check,
) -> None:
    config = job_config(tmp_path / "job.json", backend, workers)
    log, output = tmp_path / "calls.log", tmp_path / "out"
    proc = start_job(config, output, job_env(log, pause), tmp_path / "first.err")
    wait_for_pause(log, proc)
    kill_group(proc)
    assert not (output / "dataset").exists()
    assert job_state(output)["state"] == "running"
    state = checkpoint_state(output)
    assert where(state), interrupted(state)
    before = len(read_log(log))

    resumed = run_job(config, output, job_env(log), resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "in use" not in resumed.stderr  # the dead job's lock went with it
    assert dataset_files(output) == reference["files"]
    assert last_json(resumed.stdout)["dataset_id"] == reference["dataset_id"]
    assert job_state(output)["state"] == "succeeded"

    again = read_log(log)[before:]
    unfinished = [str(b) for b in range(2) if not state["batches"].get(b, (0, False))[1]]
    assert calls(again, "generate") == unfinished
    assert Counter(calls(again, "clean")) == expected_cleans(state["batches"], 2)
    owed = Counter(reference["selected"]) - Counter(state["projected"])
    assert Counter(calls(again, "project")) == owed


def _published(output: Path) -> None:
    """Left as by a kill between the snapshot's rename and job.json's `succeeded`."""


def _half_written(output: Path) -> None:
    """Left as by a kill while the snapshot was being written in staging."""
    staging = output / ".dataset.staging"
    (output / "dataset").rename(staging)
    (staging / "manifest.json").unlink()
    train = staging / "train.jsonl"
    train.write_bytes(train.read_bytes()[:100])


@pytest.mark.parametrize("leave", [_published, _half_written], ids=["published", "staging"])
def test_resume_after_the_last_checkpoint_only_publishes(
    tmp_path: Path, reference: dict[str, Any], leave: Callable[[Path], None]
) -> None:
    """Simulated kills after every checkpoint committed: no recipe call, the same bytes."""
    output = tmp_path / "out"
    shutil.copytree(reference["output"], output)
    leave(output)
    doc = job_state(output)
    for key in ("dataset_id", "dataset_path"):
        doc.pop(key, None)
    (output / "job.json").write_text(json.dumps(doc | {"state": "running"}), encoding="utf-8")
    config = job_config(tmp_path / "job.json")
    log = tmp_path / "calls.log"
    resumed = run_job(config, output, job_env(log), resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["dataset_id"] == reference["dataset_id"]
    assert job_state(output)["state"] == "succeeded"
    assert dataset_files(output) == reference["files"]
    assert not (output / ".dataset.staging").exists()
    assert calls(read_log(log), "generate") == calls(read_log(log), "clean") == []
    assert calls(read_log(log), "project") == []


def test_second_job_on_a_busy_folder_fails_at_once(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    config = job_config(tmp_path / "job.json")
    log, output, gate = tmp_path / "calls.log", tmp_path / "out", tmp_path / "gate"
    first = start_job(config, output, job_env(log, "clean:28", gate), tmp_path / "first.err")
    try:
        wait_for_pause(log, first)
        paused = len(read_log(log))
        second = run_job(config, output, job_env(log), resume=True)
        assert second.returncode == 75, second.stderr
        errors = [line for line in second.stderr.splitlines() if "error:" in line]
        assert errors == [
            f"corpus tasks: error: job folder {output} is in use by another process "
            f"(pid {first.pid}); wait for it to end or use another --output"
        ], second.stderr
        assert len(read_log(log)) == paused  # the second job called no recipe code
        assert first.poll() is None
    finally:
        gate.touch()
        first.communicate(timeout=120)
    assert first.returncode == 0, (tmp_path / "first.err").read_text()
    assert dataset_files(output) == reference["files"]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_cancels_cleanly_even_when_repeated(
    tmp_path: Path, reference: dict[str, Any], signum: int, code: int
) -> None:
    config = job_config(tmp_path / "job.json")
    log, output, gate = tmp_path / "calls.log", tmp_path / "out", tmp_path / "gate"
    err = tmp_path / "first.err"
    proc = start_job(config, output, job_env(log, "clean:28", gate), err)
    try:
        wait_for_pause(log, proc)
        proc.send_signal(signum)
        wait_for_text(err, "stopping after the current chunk", proc)
        proc.send_signal(signum)  # handled while the first one's cleanup still waits
        wait_for_text(err, "already stopping", proc)
    finally:
        gate.touch()
        proc.communicate(timeout=120)
    assert proc.returncode == code, err.read_text()
    job = job_state(output)
    assert job["state"] == "cancelled", job
    assert not (output / "dataset").exists()
    assert integrity(output) == "ok"
    assert checkpoint_state(output)["batches"][0][0] > 0  # it stopped after a committed chunk

    resumed = run_job(config, output, job_env(log), resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["dataset_id"] == reference["dataset_id"]
    assert dataset_files(output) == reference["files"]


def test_ctrl_c_to_the_process_group_cancels_a_process_backend_job(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    """Ctrl-C in a terminal signals every process of the group: workers leave it to the job."""
    config = job_config(tmp_path / "job.json", "process", 2)
    log, output, gate = tmp_path / "calls.log", tmp_path / "out", tmp_path / "gate"
    err = tmp_path / "first.err"
    proc = start_job(config, output, job_env(log, "clean:48", gate), err)
    try:
        wait_for_pause(log, proc)
        os.killpg(proc.pid, signal.SIGINT)
        wait_for_text(err, "stopping after the current chunk", proc)
    finally:
        gate.touch()
        proc.communicate(timeout=120)
    assert proc.returncode == 130, err.read_text()
    assert job_state(output)["state"] == "cancelled"
    assert not (output / "dataset").exists()
    assert integrity(output) == "ok"

    resumed = run_job(config, output, job_env(log), resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert dataset_files(output) == reference["files"]


def test_job_json_records_the_sigterm_exit_code(tmp_path: Path) -> None:
    config = job_config(tmp_path / "job.json")
    log, output, gate = tmp_path / "calls.log", tmp_path / "out", tmp_path / "gate"
    err = tmp_path / "first.err"
    proc = start_job(config, output, job_env(log, "clean:28", gate), err)
    try:
        wait_for_pause(log, proc)
        proc.send_signal(signal.SIGTERM)
        wait_for_text(err, "stopping after the current chunk", proc)  # not before the gate
    finally:
        gate.touch()
        proc.communicate(timeout=120)
    assert proc.returncode == 143
    assert job_state(output)["exit_code"] == 143


async def cancel_while_paused(config: Path, output: Path, log: Path, gate: Path) -> None:
    """Start `run_data_job`, cancel its task while the recipe is paused, expect CancelledError.

    A ticker on the caller's loop must advance while the job runs: the loop is not blocked.
    """
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    clock = asyncio.create_task(ticker())
    job = asyncio.create_task(run_data_job(config, output))
    while not calls(read_log(log), "pause"):
        assert not job.done(), job
        await asyncio.sleep(0.01)
    paused_at = ticks
    while ticks < paused_at + 20:
        await asyncio.sleep(0.01)
    assert not job.done()
    job.cancel()
    await asyncio.sleep(0.05)
    gate.touch()
    with pytest.raises(asyncio.CancelledError):
        await job
    clock.cancel()


def _pause_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, ...]:
    """The test config, and this process's FAULT_* environment: pause at clean 28."""
    config = job_config(tmp_path / "job.json")
    log, output, gate = tmp_path / "calls.log", tmp_path / "out", tmp_path / "gate"
    for key, value in job_env(log, "clean:28", gate).items():
        if key.startswith("FAULT_"):
            monkeypatch.setenv(key, value)
    return config, log, output, gate


def test_python_api_cancel_and_resume_keep_the_loop_responsive(
    tmp_path: Path, reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, log, output, gate = _pause_in_process(tmp_path, monkeypatch)
    unhandled: list[dict[str, Any]] = []

    async def scenario() -> str:
        # run_data_job leaves its cancelled outcome future unretrieved; when that future is
        # collected, the default handler formats a traceback (ast.parse in 3.11), which, from
        # a collection inside another ast.parse, breaks pytest's assertion rewriting later on.
        asyncio.get_running_loop().set_exception_handler(lambda _, c: unhandled.append(c))
        await cancel_while_paused(config, output, log, gate)
        assert job_state(output)["state"] == "cancelled"
        assert not (output / "dataset").exists()
        monkeypatch.delenv("FAULT_PAUSE")
        snapshot = await run_data_job(config, output, resume=True)
        return snapshot.dataset_id

    assert asyncio.run(scenario()) == reference["dataset_id"]
    gc.collect()
    assert job_state(output)["state"] == "succeeded"
    assert dataset_files(output) == reference["files"]


def _edit_input(base: Path) -> None:
    (base / "input.txt").write_text("other bytes\n", encoding="utf-8")


def _edit_exclusions(base: Path) -> None:
    (base / "exclusions.jsonl").write_text('{"task_id": "arith-0"}\n', encoding="utf-8")


def _edit_recipe(base: Path) -> None:
    (base / "recipe_part.py").write_text("CHANGED = True\n", encoding="utf-8")


def _edit_seed(base: Path) -> None:
    _identity_config(base, seed=1)


def _identity_config(base: Path, seed: int = 0) -> Path:
    return job_config(
        base / "job.json",
        seed=seed,
        inputs=["input.txt"],
        exclusions=["exclusions.jsonl"],
        params={"extra_source": str(base / "recipe_part.py")},
    )


IDENTITY_CHANGES = [
    pytest.param(_edit_input, "input file 'input.txt' changed", id="input"),
    pytest.param(_edit_exclusions, "exclusion file 'exclusions.jsonl' changed", id="exclusions"),
    pytest.param(_edit_recipe, "recipe_part.py' changed", id="recipe-source"),
    pytest.param(_edit_seed, "the job config", id="seed"),
]


@pytest.mark.parametrize(("edit", "phrase"), IDENTITY_CHANGES)
def test_changed_identity_fails_before_any_recipe_call(
    tmp_path: Path, edit: Callable[[Path], None], phrase: str
) -> None:
    (tmp_path / "input.txt").write_text("input bytes\n", encoding="utf-8")
    (tmp_path / "exclusions.jsonl").write_text('{"task_id": "arith-none"}\n', encoding="utf-8")
    (tmp_path / "recipe_part.py").write_text("CHANGED = False\n", encoding="utf-8")
    config = _identity_config(tmp_path)
    log, output = tmp_path / "calls.log", tmp_path / "out"
    proc = start_job(config, output, job_env(log, "clean:28"), tmp_path / "first.err")
    wait_for_pause(log, proc)
    kill_group(proc)
    before_log, before_db = read_log(log), checkpoint_dump(output)
    assert checkpoint_state(output)["batches"]
    identity = json.loads((output / "job.json").read_text())["identity"]

    edit(tmp_path)
    resumed = run_job(config, output, job_env(log), resume=True)
    assert resumed.returncode == 65, resumed.stderr
    assert f"cannot resume {output}" in resumed.stderr
    assert phrase in resumed.stderr
    assert read_log(log) == before_log
    assert checkpoint_dump(output) == before_db
    assert not (output / "dataset").exists()
    job = json.loads((output / "job.json").read_text())
    assert job["state"] == "failed" and job["exit_code"] == 65
    assert job["identity"] == identity  # the refused identity is not recorded
