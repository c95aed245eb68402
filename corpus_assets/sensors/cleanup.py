"""Cleanup sensors: a build that failed for good, or was cancelled, leaves no partial outputs.

One cleanup run per failed run (run key = the failed run's id), only when the shard stage had
started (a failed fetch leaves nothing to delete; a task-dataset run keeps its job folder for
the next materialization to resume), never while run retries will re-execute the
run, never for cleanup runs themselves, never twice (a run that already has a cleanup run, from
a sensor or from `corpus build`, is skipped). They watch every code location: runs started from
the `dagster` CLI or `corpus build` have no code-location origin and would otherwise be ignored.

`corpus build` cleans up after its own runs (build/cleanup.py) with the same rule and run
key. While it is alive it holds a lock on the file its run's `corpus/compensated_by` tag names;
the sensors leave such a run to it, so a daemon running beside it never adds a second cleanup.
"""

from pathlib import Path

import dagster as dg

from corpus_assets.assets.quality_model import quality_model
from corpus_assets.assets.report import report
from corpus_assets.assets.shards import shards
from corpus_assets.assets.task_dataset import task_dataset
from corpus_assets.assets.tokens import tokens
from corpus_assets.core.store.locks import held_by
from corpus_assets.instance.dead_runs import cleanup_blocker
from corpus_assets.instance.failures import forget_unrun_checks
from corpus_assets.jobs import CLEANUP_JOB, corpus_cleanup
from corpus_assets.resources.partitions import CORPUS_CONFIGS

PARTITION_TAG = "dagster/partition"
WILL_RETRY_TAG = "dagster/will_retry"
CLEANUP_OF_TAG = "corpus/cleanup_of"
CLEANUP_PARTITION_TAG = "corpus/partition"
COMPENSATED_BY_TAG = "corpus/compensated_by"
RUN_KEY_TAG = "dagster/run_key"
SENSOR_NAME_TAG = "dagster/sensor_name"
FAILURE_SENSOR = "corpus_cleanup_on_failure"
CANCEL_SENSOR = "corpus_cleanup_on_cancel"
# Step keys whose start means partial outputs may exist (the shard stage or later).
OUTPUT_STEPS = frozenset(k.to_python_identifier() for k in (shards.key, tokens.key))
TASK_STEP = task_dataset.key.to_python_identifier()
CLASSIFIER_STEP = quality_model.key.to_python_identifier()
# The step after the stages: it writes only report files, and a build whose stages all finished
# is whole without them.
REPORT_STEP = report.key.to_python_identifier()


def cleanup_request(
    instance: dg.DagsterInstance, run: dg.DagsterRun, outcome: str
) -> dg.RunRequest | dg.SkipReason:
    """The cleanup run for a failed or cancelled `run`, or why there is none."""
    if run.job_name == CLEANUP_JOB:
        return dg.SkipReason(f"run {run.run_id} is a cleanup run")
    if run.tags.get(WILL_RETRY_TAG) == "true":
        return dg.SkipReason(f"run {run.run_id} will be retried; cleaning up after the last try")
    partition = run.tags.get(PARTITION_TAG)
    if not partition:
        return dg.SkipReason(f"run {run.run_id} has no partition")
    done = cleanup_runs_of(instance, run.run_id)
    if done:
        return dg.SkipReason(f"run {run.run_id} already has cleanup run {done[0].run_id}")
    started = {
        r.event_log_entry.step_key
        for r in instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.STEP_START
        ).records
    }
    if not started & OUTPUT_STEPS:
        if TASK_STEP in started:
            return dg.SkipReason(
                f"run {run.run_id} built a task dataset: its job folder is kept, and the next "
                "materialization of the partition resumes it"
            )
        if CLASSIFIER_STEP in started:
            return dg.SkipReason(
                f"run {run.run_id} trained a classifier: nothing is published before its "
                "manifest, and the next materialization of the partition trains it again"
            )
        return dg.SkipReason(f"run {run.run_id} {outcome} before the shard stage started")
    if not instance.has_dynamic_partition(CORPUS_CONFIGS, partition):
        return dg.SkipReason(f"run {run.run_id} was for {partition!r}, not a registered config")
    if _only_the_report_unfinished(instance, run.run_id, started):
        return dg.SkipReason(
            f"run {run.run_id} {outcome} in its report step, after the stages and checks had "
            "finished: the build is whole; materialize `report` again for its report"
        )
    if _only_upstream_missing(instance, run.run_id):
        return dg.SkipReason(
            f"run {run.run_id} {outcome} because an upstream asset was not materialized; "
            "its stage wrote nothing"
        )
    if blocker := cleanup_blocker(instance, run.run_id):
        return dg.SkipReason(f"no cleanup after run {run.run_id}: {blocker}")
    return dg.RunRequest(
        run_key=run.run_id,
        job_name=CLEANUP_JOB,
        run_config={
            "ops": {
                "cleanup_partition": {
                    "config": {"partition_key": partition, "failed_run_id": run.run_id}
                }
            }
        },
        tags={CLEANUP_OF_TAG: run.run_id, CLEANUP_PARTITION_TAG: partition},
    )


def _only_the_report_unfinished(
    instance: dg.DagsterInstance, run_id: str, started: set[str | None]
) -> bool:
    """The shard and tokenize steps, and every other step that started, succeeded, except the
    report step."""
    succeeded = {
        r.event_log_entry.step_key
        for r in instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.STEP_SUCCESS
        ).records
    }
    return succeeded >= OUTPUT_STEPS and started - succeeded <= {REPORT_STEP}


def _only_upstream_missing(instance: dg.DagsterInstance, run_id: str) -> bool:
    """No shard or tokenize step succeeded, and every one that failed found its upstream
    unbuilt ("materialize raw first: ...", exit 64): nothing to clean."""
    succeeded = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)
    if any(r.event_log_entry.step_key in OUTPUT_STEPS for r in succeeded.records):
        return False
    failed = [
        r.event_log_entry
        for r in instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.STEP_FAILURE
        ).records
        if r.event_log_entry.step_key in OUTPUT_STEPS
    ]
    return bool(failed) and all(_upstream_missing(entry) for entry in failed)


def _upstream_missing(entry: dg.EventLogEntry) -> bool:
    event = entry.dagster_event
    data = event.step_failure_data if event is not None else None
    failure = data.user_failure_data if data is not None else None
    flag = failure.metadata.get("upstream_missing") if failure is not None else None
    return bool(flag is not None and flag.value)


def cleanup_runs_of(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterRun]:
    """The cleanup runs launched for `run_id` (by a sensor or by `corpus build`)."""
    return list(instance.get_runs(filters=dg.RunsFilter(tags={CLEANUP_OF_TAG: run_id})))


def compensated_by_its_build(run: dg.DagsterRun) -> bool:
    """True while the `corpus build` that ran `run` lives to clean up after it (holds its lock)."""
    path = run.tags.get(COMPENSATED_BY_TAG)
    return path is not None and held_by(Path(path)) is not None  # gone or free: it is done


def sensor_request(
    instance: dg.DagsterInstance, run: dg.DagsterRun, outcome: str
) -> dg.RunRequest | dg.SkipReason:
    """What a cleanup sensor answers: nothing while `corpus build` compensates, else the rule.

    Either way the run's checks that never ran are forgotten first (instance/failures.py): they
    would otherwise show as "Execution failed" on every partition's Checks tab."""
    forget_unrun_checks(instance, run.run_id)
    if compensated_by_its_build(run):
        return dg.SkipReason(f"run {run.run_id} is cleaned up by the `corpus build` that ran it")
    return cleanup_request(instance, run, outcome)


@dg.run_failure_sensor(
    name=FAILURE_SENSOR,
    description="Cleans up the partition of a build that failed for good after its shard stage "
    "started: one corpus_cleanup run per failed run (never raw, never task runs).",
    request_job=corpus_cleanup,
    monitor_all_code_locations=True,
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def corpus_cleanup_on_failure(
    context: dg.RunFailureSensorContext,
) -> dg.RunRequest | dg.SkipReason:
    """Cleans up the partition of a build that failed for good after its shard stage started."""
    request = sensor_request(context.instance, context.dagster_run, "failed")
    context.log.info(_describe(request))
    return request


@dg.run_status_sensor(
    name=CANCEL_SENSOR,
    description="Cleans up the partition of a build cancelled after its shard stage started.",
    run_status=dg.DagsterRunStatus.CANCELED,
    request_job=corpus_cleanup,
    monitor_all_code_locations=True,
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def corpus_cleanup_on_cancel(
    context: dg.RunStatusSensorContext,
) -> dg.RunRequest | dg.SkipReason:
    """Cleans up the partition of a build cancelled after its shard stage started."""
    request = sensor_request(context.instance, context.dagster_run, "was cancelled")
    context.log.info(_describe(request))
    return request


def _describe(request: dg.RunRequest | dg.SkipReason) -> str:
    if isinstance(request, dg.SkipReason):
        return f"no cleanup: {request.skip_message}"
    return f"cleanup of {request.tags[CLEANUP_PARTITION_TAG]} after run {request.run_key}"
