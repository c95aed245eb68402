"""Dead runs: a run whose process is gone is marked FAILED; a newer build is never cleaned up.

The default run launcher cannot health-check a run worker, so Dagster's run monitoring never
notices a killed run: it stays STARTED for ever. The process that executes a run (`corpus build`,
`dagster job execute`, a `dagster api execute_run` worker) writes the run's RUN_START event (a
worker first logs "Started process for run"); that event carries its pid and time. The run is on
this host when `corpus build` tagged it with this host and that pid, or, untagged, when the
instance keeps its runs in SQLite (a local file, which Dagster supports on one machine only).
Runs elsewhere, and runs whose pid no event records, are left alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from corpus_assets.core.errors import TransientError
from corpus_assets.core.store.locks import file_lock
from corpus_assets.instance import processes
from corpus_assets.instance.dagster_internals import (
    InMemoryRunStorage,
    JobFailureData,
    RunFailureReason,
    SqliteRunStorage,
)

HOST_TAG, PID_TAG, PID_START_TAG = "corpus/host", "corpus/pid", "corpus/pid_start"
PARTITION_TAG = "dagster/partition"
WORKER_STARTED = "Started process for run"
ACTIVE = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
LOCK_TIMEOUT_S = 10.0
"""How long a dead-run check waits for another one on the same instance before it skips (the
other is checking the same runs right now)."""


@dataclass(frozen=True)
class RunProcess:
    """The process that executes a run, as its own event recorded it."""

    pid: int
    host: str | None  # None: unknown
    recorded_at: float  # epoch seconds: the process was alive then
    start_ticks: int | None  # from the corpus/pid_start tag, when it names this pid


@dataclass(frozen=True)
class Verdict:
    """Whether an active run's process is gone, and why (a line for logs)."""

    run_id: str
    dead: bool
    reason: str


def process_tags() -> dict[str, str]:
    """Tags for a run this process executes: its host, pid and start time (`corpus build`)."""
    tags = {HOST_TAG: processes.host(), PID_TAG: str(os.getpid())}
    ticks = processes.start_ticks()
    return tags if ticks is None else {**tags, PID_START_TAG: str(ticks)}


def run_process(instance: dg.DagsterInstance, run: dg.DagsterRun) -> RunProcess | None:
    """The run's process from its RUN_START (or worker start) event; None if none recorded."""
    event = _process_event(instance, run.run_id)
    if event is None or event.dagster_event is None or event.dagster_event.pid is None:
        return None
    pid = event.dagster_event.pid
    if run.tags.get(PID_TAG) == str(pid):  # a retry copies its parent's tags: check the pid
        ticks = run.tags.get(PID_START_TAG)
        return RunProcess(pid, run.tags.get(HOST_TAG), event.timestamp, _int(ticks))
    return RunProcess(pid, processes.host() if _local(instance) else None, event.timestamp, None)


def judge(instance: dg.DagsterInstance, run: dg.DagsterRun) -> Verdict:
    """Is `run` (STARTING or STARTED) dead: its process recorded on this host and gone?"""
    found = run_process(instance, run)
    here = processes.host()
    if found is None:
        why = f"run {run.run_id} is {run.status.value} but no event records its process pid"
        return Verdict(run.run_id, False, f"{why}; left alone")
    if found.host != here:
        where = f"host {found.host}" if found.host else "an unknown host (runs not in SQLite)"
        why = f"run {run.run_id}: its process {found.pid} runs on {where}, not {here}"
        return Verdict(run.run_id, False, f"{why}; left alone")
    if processes.running(found.pid, found.recorded_at, found.start_ticks):
        return Verdict(run.run_id, False, f"run {run.run_id}: process {found.pid} is running")
    why = f"run worker process {found.pid} on {here} is gone (killed?)"
    return Verdict(run.run_id, True, why)


def mark_dead_runs(
    instance: dg.DagsterInstance, by: str, say: Callable[[str], None] | None = None
) -> list[Verdict]:
    """Mark FAILED every active run on this host whose process is gone; every run's verdict."""
    try:
        with _lock(instance):
            verdicts = [_mark(instance, run, by) for run in instance.get_runs(_active())]
    except TransientError as exc:  # another process is checking right now
        return [Verdict("", False, f"dead runs not checked: {exc}")]
    for verdict in verdicts:
        if verdict.dead and say is not None:
            say(f"run {verdict.run_id} marked FAILED: {verdict.reason}")
    return verdicts


def cleanup_blocker(instance: dg.DagsterInstance, failed_run_id: str | None) -> str | None:
    """Why cleaning up after `failed_run_id` would remove another build of its partition: a run
    of the partition is still going (whenever it started), or one succeeded after it began."""
    record = instance.get_run_record_by_id(failed_run_id) if failed_run_id else None
    partition = record.dagster_run.tags.get(PARTITION_TAG) if record else None
    if record is None or partition is None:
        return None
    tags = {PARTITION_TAG: partition}
    going = instance.get_runs(dg.RunsFilter(tags=tags, statuses=UNFINISHED))
    for run in going:
        if run.run_id != failed_run_id:
            return f"run {run.run_id} of partition {partition} is {run.status.value}"
    began = record.start_time or record.create_timestamp.timestamp()
    succeeded = instance.get_run_records(
        dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.SUCCESS])
    )
    for later in succeeded:
        ended = later.end_time or max(later.create_timestamp, later.update_timestamp).timestamp()
        if ended > began:
            return (
                f"run {later.dagster_run.run_id} rebuilt partition {partition} "
                f"after run {failed_run_id} began"
            )
    return None


def _mark(instance: dg.DagsterInstance, run: dg.DagsterRun, by: str) -> Verdict:
    verdict = judge(instance, run)
    if verdict.dead:
        marked = Verdict(run.run_id, True, f"{verdict.reason}; marked failed by {by}")
        failure = JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION)
        instance.report_run_failed(run, message=marked.reason, job_failure_data=failure)
        return marked
    return verdict


def _process_event(instance: dg.DagsterInstance, run_id: str) -> dg.EventLogEntry | None:
    started = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.RUN_START, limit=1, ascending=False
    ).records
    if started:
        return started[0].event_log_entry
    engine = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
    workers = [
        r.event_log_entry
        for r in engine.records
        if r.event_log_entry.user_message.startswith(WORKER_STARTED)
    ]
    return workers[-1] if workers else None


def _active() -> dg.RunsFilter:
    return dg.RunsFilter(statuses=ACTIVE)


def _local(instance: dg.DagsterInstance) -> bool:
    return isinstance(instance.run_storage, SqliteRunStorage | InMemoryRunStorage)


def _lock(instance: dg.DagsterInstance) -> AbstractContextManager[None]:
    """One checker at a time per instance home, so no run is marked failed twice."""
    if not instance.root_directory:
        return contextlib.nullcontext()
    path = Path(instance.root_directory) / ".dead_runs.lock"
    return file_lock(path, "the dead-run check", wait=LOCK_TIMEOUT_S)


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None
