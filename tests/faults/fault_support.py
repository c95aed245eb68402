"""Helpers of the fault tests: instance queries, tree digests, sensors, cancelling a build."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from pathlib import Path

import dagster as dg

from corpus_assets.definitions import build_defs
from corpus_assets.jobs import CLEANUP_JOB
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.sensors.cleanup import corpus_cleanup_on_cancel, corpus_cleanup_on_failure


def tree(root: Path, *parts: str) -> dict[str, str]:
    """sha256 of every file under `root/part` for each part, keyed by path relative to `root`."""
    out: dict[str, str] = {}
    for part in parts:
        for path in sorted((root / part).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def materializations(instance: dg.DagsterInstance, asset: str, key: str) -> list[dg.EventLogRecord]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=100
    )
    return list(records.records)


def runs_of(instance: dg.DagsterInstance, job: str) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(job_name=job)))


def step_events(instance: dg.DagsterInstance, run_id: str, step: str) -> list[str]:
    return [
        r.event_log_entry.dagster_event_type.value  # type: ignore[union-attr]
        for r in instance.get_records_for_run(run_id).records
        if r.event_log_entry.step_key == step and r.event_log_entry.is_dagster_event
    ]


def messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [r.event_log_entry.user_message for r in instance.get_records_for_run(run_id).records]


def sensor_requests(
    instance: dg.DagsterInstance, run_id: str
) -> list[dg.RunRequest | dg.SkipReason]:
    """What both cleanup sensors answer for a finished run (each sees only its own outcome)."""
    run = instance.get_run_by_id(run_id)
    assert run is not None
    answers: list[dg.RunRequest | dg.SkipReason] = []
    for sensor, kind in (
        (corpus_cleanup_on_failure, dg.DagsterEventType.RUN_FAILURE),
        (corpus_cleanup_on_cancel, dg.DagsterEventType.RUN_CANCELED),
    ):
        records = instance.get_records_for_run(run_id, of_type=kind).records
        if not records:
            continue
        event = records[-1].event_log_entry.dagster_event
        assert event is not None
        context = dg.build_run_status_sensor_context(
            sensor_name=sensor.name, dagster_event=event, dagster_instance=instance, dagster_run=run
        )
        if kind == dg.DagsterEventType.RUN_FAILURE:
            answer = sensor(context.for_run_failure())
        else:
            answer = sensor(context)
        assert isinstance(answer, dg.RunRequest | dg.SkipReason)
        answers.append(answer)
    return answers


def launch_cleanups(
    requests: list[dg.RunRequest | dg.SkipReason], root: Path, instance: dg.DagsterInstance
) -> None:
    """Run each requested cleanup once per run key, as the daemon would."""
    job = build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def(CLEANUP_JOB)
    done = {r.tags.get("dagster/run_key") for r in runs_of(instance, CLEANUP_JOB)}
    for request in requests:
        if isinstance(request, dg.SkipReason) or request.run_key in done:
            continue
        done.add(request.run_key)
        result = job.execute_in_process(
            run_config=request.run_config,
            instance=instance,
            tags={**request.tags, "dagster/run_key": str(request.run_key)},
        )
        assert result.success


def cancel_when_started(
    instance: dg.DagsterInstance, step: str, after_s: float
) -> threading.Thread:
    """Cancel like the run launcher does (mark CANCELING, interrupt the worker) once `step` ran
    for `after_s` seconds."""

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for run in instance.get_runs(
                filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])
            ):
                started = instance.get_records_for_run(
                    run.run_id, of_type=dg.DagsterEventType.STEP_START
                ).records
                if any(r.event_log_entry.step_key == step for r in started):
                    time.sleep(after_s)
                    instance.report_run_canceling(run)
                    os.kill(os.getpid(), signal.SIGINT)
                    return
            time.sleep(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread
