"""`corpus run --backend ray`: byte-identical to the local pool, resumes, survives a killed worker.

Each stage here starts its own local Ray (no --ray-address) with HOME and TMPDIR in the test's
folder; the `home` fixture checks HOME is still empty afterwards (no ~/.ray/auth_token).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from ray_support import build, corpus, outputs, ray_env, write_config
from support.corpus import start_corpus
from support.processes import descendants, processes, running
from support.waiting import wait_for


def _processes_mentioning(text: str) -> list[int]:
    return [p.pid for p in processes() if text.encode() in p.cmdline]


def test_ray_outputs_match_the_local_pool_for_1_and_2_workers(
    tmp_path: Path, bench_corpus: Path, home: Path, short_tmp: Path
) -> None:
    env = ray_env(home, short_tmp)
    cfg = write_config(tmp_path, bench_corpus)
    local, ray1, ray2 = tmp_path / "local", tmp_path / "ray1", tmp_path / "ray2"
    build(env, cfg, local, "--workers", "2")
    logs = build(env, cfg, ray1, "--backend", "ray", "--workers", "1")
    assert all("on a local Ray (1 CPUs)" in log for log in logs), logs
    assert "shards as Ray tasks" in logs[0]  # phase 3 too
    assert "grouping 20 LSH bands as Ray tasks" in logs[0]  # and phase 2's grouping
    logs = build(env, cfg, ray2, "--backend", "ray", "--workers", "2")
    assert all("on a local Ray (2 CPUs)" in log for log in logs), logs
    reference = outputs(local)
    assert len([n for n in reference if n.endswith(".parquet")]) > 2
    assert len([n for n in reference if n.endswith(".bin")]) > 2
    assert outputs(ray1) == reference
    assert outputs(ray2) == reference
    # the local Ray of each stage is stopped and its temporary folder removed
    tmpdir = Path(env["TMPDIR"])
    assert list(tmpdir.iterdir()) == []
    assert _processes_mentioning(str(tmpdir)) == []


def _busy_worker(stage_pid: int, title: str) -> int | None:
    """A Ray worker under the stage process that is running a task named `title` right now."""
    under = set(descendants(stage_pid))
    for proc in processes():
        if proc.cmdline.startswith(f"ray::{title}".encode()) and proc.pid in under:
            return proc.pid
    return None


def _run_killing_a_worker(
    env: dict[str, str], argv: list[str], title: str
) -> tuple[int | None, subprocess.CompletedProcess[str]]:
    """Run `corpus ARGV`; SIGKILL the first Ray worker seen running task `title`."""
    proc = start_corpus(*argv, environ=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killed = None
    deadline = time.monotonic() + 240
    while proc.poll() is None and killed is None and time.monotonic() < deadline:
        pid = _busy_worker(proc.pid, title)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            killed = pid
            wait_for(lambda p=pid: not running(p), 10, f"worker {pid} to die")
        time.sleep(0.002)
    out, err = proc.communicate(timeout=240)
    return killed, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_killed_ray_worker_is_retried_and_the_bytes_do_not_change(
    tmp_path: Path, bench_corpus: Path, home: Path, short_tmp: Path
) -> None:
    env = ray_env(home, short_tmp)
    cfg = write_config(tmp_path, bench_corpus)
    local, root = tmp_path / "local", tmp_path / "ray"
    build(env, cfg, local, "--workers", "2")
    common = ["--config", str(cfg), "--root", str(root), "--backend", "ray", "--workers", "2"]
    corpus(env, "run", "--stage", "fetch", *common[:4])
    for stage, title in (("shard", "run_task"), ("tokenize", "ray_task")):
        killed, run = _run_killing_a_worker(env, ["run", "--stage", stage, *common], title)
        assert killed is not None, f"no Ray worker was caught running {title}: {run.stderr}"
        assert not running(killed)
        assert run.returncode == 0, run.stderr
        # Ray saw that very worker die in the middle of a task and ran the task again
        assert f"Worker PID: {killed} " in run.stderr, run.stderr
        assert f"Task {title} failed. There are 3 retries remaining" in run.stderr, run.stderr
        assert json.loads(run.stdout)["stage"] == stage  # Ray's report went to stderr
        print(f"{stage}: killed Ray worker {killed} while it ran {title}")
    assert outputs(root) == outputs(local)


def test_a_stage_killed_on_the_local_pool_resumes_on_ray(
    tmp_path: Path, bench_corpus: Path, home: Path, short_tmp: Path
) -> None:
    env = ray_env(home, short_tmp)
    cfg = write_config(tmp_path, bench_corpus)
    local, root = tmp_path / "local", tmp_path / "resumed"
    build(env, cfg, local, "--workers", "2")
    common = ["--config", str(cfg), "--root", str(root)]
    corpus(env, "run", "--stage", "fetch", *common)
    proc = start_corpus(
        # one worker: tasks run one after another in the stage process, the kill lands between
        "run", "--stage", "shard", *common, "--workers", "1",
        environ=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    done = lambda: len(list(root.glob("work/*/shard/tasks/*.done")))  # noqa: E731
    wait_for(lambda: done() >= 1 or proc.poll() is not None, 120, "a finished shard task")
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the local stage finished before the kill"
    finished = done()
    run = corpus(env, "run", "--stage", "shard", *common, "--backend", "ray", "--workers", "2")
    assert f"resuming: {finished} of" in run.stderr, run.stderr
    assert "on a local Ray" in run.stderr
    corpus(env, "run", "--stage", "tokenize", *common, "--backend", "ray", "--workers", "2")
    assert outputs(root) == outputs(local)


def test_a_ray_stage_killed_outright_takes_its_local_ray_along_and_resumes(
    tmp_path: Path, bench_corpus: Path, home: Path, short_tmp: Path
) -> None:
    env = ray_env(home, short_tmp)
    cfg = write_config(tmp_path, bench_corpus)
    local, root = tmp_path / "local", tmp_path / "ray"
    build(env, cfg, local, "--workers", "2")
    common = ["--config", str(cfg), "--root", str(root)]
    corpus(env, "run", "--stage", "fetch", *common)
    argv = ["run", "--stage", "shard", *common, "--backend", "ray", "--workers", "2"]
    proc = start_corpus(*argv, environ=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: _busy_worker(proc.pid, "run_task") is not None, 120, "a busy Ray worker")
    assert _processes_mentioning(str(short_tmp)), "the stage's local Ray is running"
    proc.kill()  # the stage process alone, as a SIGKILL from outside would
    assert proc.wait() == -signal.SIGKILL
    wait_for(
        lambda: not _processes_mentioning(str(short_tmp)), 30, "Ray to end"
    )  # Ray went with it
    left = short_tmp / f"corpus-ray-{proc.pid}"
    assert (left / "session_latest").is_symlink(), "the killed stage's Ray folder stayed behind"
    run = corpus(env, *argv)
    assert "on a local Ray" in run.stderr
    assert not left.exists(), "the next local Ray removes the dead stage's folder"
    assert list(short_tmp.glob("corpus-ray-*")) == []
    corpus(env, "run", "--stage", "tokenize", *common, "--backend", "ray", "--workers", "2")
    assert outputs(root) == outputs(local)
