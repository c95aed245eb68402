"""A run whose process was SIGKILLed is marked FAILED (by the next `corpus build`, by the daemon's
sensor), and no cleanup removes a partition that was rebuilt after the dead run."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import WRAPPER, variant
from fault_support import materializations, runs_of, sensor_requests, tree
from support.corpus import own_instance_env, run_corpus, start_corpus
from support.dagster import sensors_ticked
from support.processes import descendants, live_in_group, running, stop_group
from support.sensors import ticks_after
from support.waiting import wait_for

from corpus_assets.build.driver import register
from corpus_assets.core.config import load_config
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.layout import Layout
from corpus_assets.definitions import build_defs
from corpus_assets.instance.dead_runs import (
    HOST_TAG,
    PID_TAG,
    cleanup_blocker,
    judge,
    mark_dead_runs,
)
from corpus_assets.instance.processes import host
from corpus_assets.jobs import BUILD_JOB, CLEANUP_JOB
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.sensors.cleanup import CLEANUP_OF_TAG

BIN = Path(sys.executable).parent
DAEMON = ["dagster-daemon", "run", "-m", "corpus_assets.definitions"]
SENSORS = {"corpus_dead_runs", "corpus_cleanup_on_failure", "corpus_cleanup_on_cancel"}
STARTED = dg.DagsterRunStatus.STARTED


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "DAGSTER_HOME": str(root / "dagster"), "CORPUS_ROOT": str(root)}


def _corpus_build(config: Path, root: Path) -> subprocess.CompletedProcess[str]:
    env = own_instance_env()
    return run_corpus("build", config, "--root", root, environ=env)


def _stalled_tokenize(tmp_path: Path) -> Path:
    """Run config whose tokenize stage sleeps silently (killed long before its heartbeat)."""
    state = tmp_path / f"wrapper-{time.monotonic_ns()}"
    command = [sys.executable, str(WRAPPER), "--state", str(state), "--mode", "stall=600"]
    path = state.with_suffix(".json")
    runner = {"command": [*command, "--stage", "tokenize", "--"], "heartbeat_timeout_s": 900}
    path.write_text(json.dumps({"resources": {"stage_runner": {"config": runner}}}))
    return path


def _dagster(args: list[str], root: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """A `dagster` (or `dagster-daemon`) command on the root's instance, its output in a log."""
    name = f"{Path(args[0]).name}-{args[1]}-{time.monotonic_ns()}.log"
    log = open(cwd / name, "wb")  # noqa: SIM115
    return subprocess.Popen(
        [str(BIN / args[0]), *args[1:]],
        env=_env(root),
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _job(verb: str, key: str, run_config: Path) -> list[str]:
    """`dagster job execute|launch` of corpus_build on partition `key` with `run_config`."""
    tags = json.dumps({"dagster/partition": key})
    module = ["-m", "corpus_assets.definitions", "-j", BUILD_JOB]
    return [str(BIN / "dagster"), "job", verb, *module, "--tags", tags, "-c", str(run_config)]


def _kill_tree(pid: int) -> list[int]:
    """SIGKILL `pid` and every process under it (a machine that dies); wait until all are gone."""
    pids = [pid, *descendants(pid)]
    for each in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(each, signal.SIGKILL)
    wait_for(lambda: all(not running(p) for p in pids), 30, f"processes {pids} to die", every=0.1)
    return pids


def _step_started(instance: dg.DagsterInstance, step: str) -> dg.DagsterRun | None:
    """The STARTED run that has started `step`, if any."""
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=[STARTED])):
        starts = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_START)
        if any(r.event_log_entry.step_key == step for r in starts.records):
            return run
    return None


def _process_pid(instance: dg.DagsterInstance, run_id: str) -> int:
    """The pid on the run's RUN_START event (written by the run's own process)."""
    [record] = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_START).records
    event = record.event_log_entry.dagster_event
    assert event is not None and event.pid is not None
    return event.pid


def _failure_message(instance: dg.DagsterInstance, run_id: str) -> str:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    [record] = records.records
    return record.event_log_entry.message


def _status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return run.status


def _verified(root: Path, cfg_file: Path) -> dict[str, str]:
    """Digests of the build's shards and tokens, after `corpus verify` passed on both."""
    cfg = load_config(cfg_file)
    layout = Layout(root.resolve())
    for folder in (layout.shards(cfg), layout.tokens(cfg)):
        done = run_corpus("verify", folder / MANIFEST)
        assert done.returncode == 0, done.stderr
    return tree(root, "corpus", "tokens")


def _tokenize_killed(
    instance: dg.DagsterInstance, is_run_process: Callable[[int], bool], top: int | None = None
) -> tuple[dg.DagsterRun, int]:
    """Once a run is in its tokenize step, SIGKILL its process (or `top`) and all under it."""
    run = wait_for(lambda: _step_started(instance, "tokens"), 240, "the tokens step", every=0.2)
    pid = _process_pid(instance, run.run_id)
    assert is_run_process(pid), (pid, Path(f"/proc/{pid}/cmdline").read_bytes())
    assert pid in _kill_tree(top or pid)
    assert _status(instance, run.run_id) == STARTED, "a killed run stays STARTED by itself"
    return run, pid


@pytest.mark.timeout(300)
def test_killed_corpus_build_is_marked_failed_by_the_next_build(example: Path, root: Path) -> None:
    env = own_instance_env()
    build = start_corpus(
        "build", example, "--root", root, "--progress",
        environ=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert build.stderr is not None
    seen = []
    for line in build.stderr:
        seen.append(line)
        if line.startswith("shard:"):  # the shard stage is running
            _kill_tree(build.pid)
            break
    assert build.wait(timeout=30) == -signal.SIGKILL, "".join(seen)
    assert not running(build.pid)

    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        [dead] = runs_of(instance, BUILD_JOB)
        assert dead.status == STARTED
        assert dead.tags[PID_TAG] == str(build.pid) == str(_process_pid(instance, dead.run_id))

        other = _corpus_build(variant(example, "other", dataset="other-stories"), root)
        assert other.returncode == 0, other.stderr
        reason = (
            f"run worker process {build.pid} on {host()} is gone (killed?); "
            "marked failed by corpus build"
        )
        assert f"[corpus] run {dead.run_id} marked FAILED: {reason}" in other.stderr
        assert _status(instance, dead.run_id) == dg.DagsterRunStatus.FAILURE
        assert _failure_message(instance, dead.run_id) == reason
        marked = instance.get_run_by_id(dead.run_id)
        assert marked is not None
        assert marked.tags["dagster/failure_reason"] == "UNEXPECTED_TERMINATION"
        statuses = sorted(r.status.value for r in runs_of(instance, BUILD_JOB))
        assert statuses == ["FAILURE", "SUCCESS"]
        assert runs_of(instance, CLEANUP_JOB) == []  # no daemon: nothing cleans up by itself


@pytest.mark.timeout(400)
def test_killed_job_execute_rebuilt_then_no_cleanup_removes_it(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    cfg = register(example, root, instance)
    stalled = _stalled_tokenize(tmp_path)
    execute = _dagster(_job("execute", cfg.partition_key, stalled), root, tmp_path)
    dead, pid = _tokenize_killed(instance, lambda pid: pid == execute.pid)
    assert pid == execute.pid and execute.wait(timeout=30) == -signal.SIGKILL
    assert (Layout(root.resolve()).shards(cfg) / MANIFEST).is_file()

    rebuild = _corpus_build(example, root)
    assert rebuild.returncode == 0, rebuild.stderr
    assert f"run {dead.run_id} marked FAILED: run worker process {pid} on" in rebuild.stderr
    assert _status(instance, dead.run_id) == dg.DagsterRunStatus.FAILURE
    assert "marked failed by corpus build" in _failure_message(instance, dead.run_id)
    rebuilt = [r for r in runs_of(instance, BUILD_JOB) if r.run_id != dead.run_id]
    assert [r.status for r in rebuilt] == [dg.DagsterRunStatus.SUCCESS]
    before = _verified(root, example)

    # The cleanup sensor now sees a failed run whose shard stage had started: it must not ask.
    [answer] = sensor_requests(instance, dead.run_id)
    assert isinstance(answer, dg.SkipReason)
    assert f"run {rebuilt[0].run_id} rebuilt partition" in str(answer.skip_message)

    # A cleanup already requested before the rebuild (a daemon's) re-checks when it runs.
    job = build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def(CLEANUP_JOB)
    op_config = {"partition_key": cfg.partition_key, "failed_run_id": dead.run_id}
    result = job.execute_in_process(
        run_config={"ops": {"cleanup_partition": {"config": op_config}}}, instance=instance
    )
    assert result.success
    logged = [
        r.event_log_entry.message for r in instance.get_records_for_run(result.run_id).records
    ]
    skipped = f"cleanup of {cfg.partition_key} skipped: run {rebuilt[0].run_id} rebuilt partition"
    assert _verified(root, example) == before
    assert any(m.startswith(skipped) for m in logged), logged
    assert materializations(instance, "tokens", cfg.partition_key)


@contextlib.contextmanager
def _daemon(root: Path, cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`dagster-daemon run` on the root's instance, stopped at the end."""
    daemon = _dagster(DAEMON, root, cwd)
    try:
        yield daemon
    finally:
        stop_group(daemon, signal.SIGINT, grace=30.0)


def _cleanups_of(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(tags={CLEANUP_OF_TAG: run_id})))


def _launched_worker(instance: dg.DagsterInstance, daemon: int) -> Callable[[int], bool]:
    """Is `pid` a run worker that the DefaultRunLauncher started under the daemon's code server?"""

    def check(pid: int) -> bool:
        started = f"Started process for run (pid: {pid})."
        runs = instance.get_runs(filters=dg.RunsFilter(statuses=[STARTED]))
        logged = any(
            r.event_log_entry.message == started
            for run in runs
            for r in instance.get_records_for_run(
                run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT
            ).records
        )
        return logged and pid in descendants(daemon)

    return check


def _marked_by_sensor(instance: dg.DagsterInstance, run_id: str, pid: int) -> str:
    """Wait until the daemon's sensor marked the run FAILED; its failure message."""
    wait_for(
        lambda: _status(instance, run_id) == dg.DagsterRunStatus.FAILURE, 120, "the dead mark", 1.0
    )
    message = _failure_message(instance, run_id)
    assert message == (
        f"run worker process {pid} on {host()} is gone (killed?); "
        "marked failed by sensor corpus_dead_runs"
    )
    return message


@pytest.mark.timeout(900)
def test_daemon_marks_dead_runs_and_spares_a_rebuilt_partition(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    other = variant(example, "other", dataset="other-stories")
    layout = Layout(root.resolve())
    cfg, cfg_other = register(example, root, instance), register(other, root, instance)
    # 1. The daemon dies with its code server and the run worker that its DefaultRunLauncher
    # started (the code server would have marked a lone dead worker; now nobody is left to).
    with _daemon(root, tmp_path) as first:
        wait_for(lambda: sensors_ticked(instance, SENSORS), 240, "the first sensor ticks", 1.0)
        launch = _job("launch", cfg.partition_key, _stalled_tokenize(tmp_path))
        done = subprocess.run(launch, env=_env(root), cwd=tmp_path, timeout=300, check=False)
        assert done.returncode == 0
        dead, pid = _tokenize_killed(instance, _launched_worker(instance, first.pid), first.pid)
        assert first.wait(timeout=30) == -signal.SIGKILL
    assert (layout.shards(cfg) / MANIFEST).is_file()
    raw = tree(root, "raw")
    assert live_in_group(first.pid) == [], "a process of the daemon's could still mark it"
    assert _status(instance, dead.run_id) == STARTED
    with _daemon(root, tmp_path):
        # The next daemon's sensor marks it failed; the run is then cleaned up once like any
        # failed run (nothing rebuilt its partition).
        _marked_by_sensor(instance, dead.run_id, pid)
        cleanups = wait_for(
            lambda: [r for r in _cleanups_of(instance, dead.run_id) if r.status.value == "SUCCESS"],
            240,
            "the cleanup of the dead run",
            every=1.0,
        )
        assert len(cleanups) == 1 and len(_cleanups_of(instance, dead.run_id)) == 1
        assert not layout.shards(cfg).exists() and not layout.tokens(cfg).exists()
        assert tree(root, "raw") == raw and raw  # never raw

        # 2. `dagster job execute` stuck in tokenize while `corpus build` rebuilds the same
        # partition; then the first is killed: marked failed, and no cleanup touches the rebuild.
        execute = _dagster(
            _job("execute", cfg_other.partition_key, _stalled_tokenize(tmp_path)), root, tmp_path
        )
        stuck = wait_for(lambda: _step_started(instance, "tokens"), 240, "the tokens step", 0.2)
        rebuild = _corpus_build(other, root)
        assert rebuild.returncode == 0, rebuild.stderr
        assert "marked FAILED" not in rebuild.stderr  # the stuck run's process is alive
        assert _status(instance, stuck.run_id) == STARTED
        rebuilt = _verified(root, other)
        [rebuild_id] = [
            r.run_id for r in runs_of(instance, BUILD_JOB) if r.status.value == "SUCCESS"
        ]
        assert _process_pid(instance, stuck.run_id) == execute.pid
        _kill_tree(execute.pid)
        assert execute.wait(timeout=30) == -signal.SIGKILL
        _marked_by_sensor(instance, stuck.run_id, execute.pid)
        failed = instance.get_records_for_run(
            stuck.run_id, of_type=dg.DagsterEventType.RUN_FAILURE
        ).records[0]
        ticks = wait_for(
            lambda: [
                t
                for t in ticks_after(
                    instance, "corpus_cleanup_on_failure", failed.event_log_entry.timestamp - 60
                )
                if stuck.run_id in t
            ],
            120,
            "the cleanup sensor's answer on the dead run",
            every=1.0,
        )
        assert f"{rebuild_id} rebuilt partition {cfg_other.partition_key}" in ticks[0], ticks
        assert _cleanups_of(instance, stuck.run_id) == [], ticks
        assert _verified(root, other) == rebuilt
        assert materializations(instance, "tokens", cfg_other.partition_key)


@dg.op
def _noop() -> None:
    """Does nothing: runs of `probe` only exist to be judged."""


@dg.job
def probe() -> None:
    _noop()


def _probe_run(
    instance: dg.DagsterInstance, pid: int | None, at: float | None = None, **tags: str
) -> dg.DagsterRun:
    """A run of `probe` whose process `pid` logged its RUN_START at `at` (pid None: STARTING)."""
    run = instance.create_run_for_job(probe, tags=tags)
    kind = dg.DagsterEventType.RUN_START if pid else dg.DagsterEventType.RUN_STARTING
    event = dg.DagsterEvent(event_type_value=kind.value, job_name=run.job_name, pid=pid)
    instance.handle_new_event(
        dg.EventLogEntry(
            error_info=None,
            level=logging.DEBUG,
            user_message="",
            run_id=run.run_id,
            timestamp=time.time() if at is None else at,
            job_name=run.job_name,
            dagster_event=event,
        )
    )
    found = instance.get_run_by_id(run.run_id)
    assert found is not None and found.status.value in ("STARTED", "STARTING")
    return found


def _reaped_pid() -> int:
    """The pid of a real process that was SIGKILLed and reaped."""
    victim = subprocess.Popen(["sleep", "300"])
    victim.kill()
    victim.wait(timeout=10)
    assert not running(victim.pid)
    return victim.pid


def test_judging_run_processes(instance: dg.DagsterInstance) -> None:
    sleeper = subprocess.Popen(["sleep", "300"])
    zombie = subprocess.Popen(["sleep", "300"])
    try:
        zombie.kill()  # not reaped: only its zombie is left
        wait_for(lambda: not running(zombie.pid), 10, "the zombie", every=0.05)
        assert Path(f"/proc/{zombie.pid}").exists()
        dead_pid = _reaped_pid()
        alive = _probe_run(instance, sleeper.pid)
        reused = _probe_run(instance, sleeper.pid, at=time.time() - 3600)  # pid of a newer process
        zombied = _probe_run(instance, zombie.pid)
        killed = _probe_run(instance, dead_pid)
        unknown = _probe_run(instance, None)
        elsewhere = _probe_run(instance, dead_pid, **{PID_TAG: str(dead_pid), HOST_TAG: "far"})
        retried = _probe_run(instance, sleeper.pid, **{PID_TAG: str(dead_pid), HOST_TAG: host()})

        verdicts = {v.run_id: v for v in mark_dead_runs(instance, by="the test")}
        dead = {r.run_id for r in (reused, zombied, killed)}
        assert {k for k, v in verdicts.items() if v.dead} == dead
        gone = f"run worker process {dead_pid} on {host()} is gone (killed?)"
        assert verdicts[killed.run_id].reason == f"{gone}; marked failed by the test"
        assert "no event records its process pid; left alone" in verdicts[unknown.run_id].reason
        assert f"process {dead_pid} runs on host far" in verdicts[elsewhere.run_id].reason
        for run in (alive, retried):  # a retry copies its parent's tags: the event's pid counts
            assert (
                verdicts[run.run_id].reason == f"run {run.run_id}: process {sleeper.pid} is running"
            )
        for run in (alive, reused, zombied, killed, unknown, elsewhere, retried):
            expected = dg.DagsterRunStatus.FAILURE if run.run_id in dead else run.status
            assert _status(instance, run.run_id) == expected
        assert not any(v.dead for v in mark_dead_runs(instance, by="the test"))  # marked once
        for run_id in dead:
            assert "marked failed by the test" in _failure_message(instance, run_id)
        assert not judge(instance, alive).dead
    finally:
        for proc in (sleeper, zombie):
            proc.kill()
            proc.wait(timeout=10)


def test_cleanup_blocker_sees_other_live_or_later_runs_of_the_partition(
    instance: dg.DagsterInstance,
) -> None:
    key = {"dagster/partition": "p-v1-000000000000"}
    partition = key["dagster/partition"]
    instance.create_run_for_job(probe, tags=key, status=dg.DagsterRunStatus.SUCCESS)  # older
    older = _probe_run(instance, os.getpid(), **key)  # started before the failed run, still going
    failed = instance.create_run_for_job(probe, tags=key)
    instance.report_run_failed(failed)
    assert cleanup_blocker(instance, failed.run_id) == (
        f"run {older.run_id} of partition {partition} is STARTED"
    )
    instance.report_run_failed(older)
    assert cleanup_blocker(instance, failed.run_id) is None
    assert cleanup_blocker(instance, None) is None  # a cleanup asked for by hand
    instance.create_run_for_job(probe, tags={"dagster/partition": "q-v1-000000000000"})
    assert cleanup_blocker(instance, failed.run_id) is None  # another partition
    newer = _probe_run(instance, os.getpid(), **key)
    assert cleanup_blocker(instance, failed.run_id) == (
        f"run {newer.run_id} of partition {partition} is STARTED"
    )
    instance.report_run_failed(newer)
    assert cleanup_blocker(instance, failed.run_id) is None  # a newer failure: its own cleanup
    rebuilt = instance.create_run_for_job(probe, tags=key, status=dg.DagsterRunStatus.SUCCESS)
    assert cleanup_blocker(instance, failed.run_id) == (
        f"run {rebuilt.run_id} rebuilt partition {partition} after run {failed.run_id} began"
    )
