"""Cleanup sensors: a build that failed for good, or was cancelled, leaves no partial outputs.

One cleanup run per failed run (run key = the failed run's id), only when the shard stage had
started (a failed fetch leaves nothing to delete), never while run retries will re-execute the
run, never for cleanup runs themselves. They watch every code location: runs started from the
`dagster` CLI or `corpus build` have no code-location origin and would otherwise be ignored.
"""

import dagster as dg

from corpus_assets.assets.shards import shards
from corpus_assets.assets.tokens import tokens
from corpus_assets.dagster_dead_runs import cleanup_blocker
from corpus_assets.jobs import CLEANUP_JOB, corpus_cleanup

PARTITION_TAG = "dagster/partition"
WILL_RETRY_TAG = "dagster/will_retry"
CLEANUP_OF_TAG = "corpus/cleanup_of"
CLEANUP_PARTITION_TAG = "corpus/partition"
# Step keys whose start means partial outputs may exist (the shard stage or later).
OUTPUT_STEPS = frozenset(k.to_python_identifier() for k in (shards.key, tokens.key))


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
    started = {
        r.event_log_entry.step_key
        for r in instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.STEP_START
        ).records
    }
    if not started & OUTPUT_STEPS:
        return dg.SkipReason(f"run {run.run_id} {outcome} before the shard stage started")
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


@dg.run_failure_sensor(
    name="corpus_cleanup_on_failure",
    request_job=corpus_cleanup,
    monitor_all_code_locations=True,
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def corpus_cleanup_on_failure(
    context: dg.RunFailureSensorContext,
) -> dg.RunRequest | dg.SkipReason:
    """Cleans up the partition of a build that failed for good after its shard stage started."""
    request = cleanup_request(context.instance, context.dagster_run, "failed")
    context.log.info(_describe(request))
    return request


@dg.run_status_sensor(
    name="corpus_cleanup_on_cancel",
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
    request = cleanup_request(context.instance, context.dagster_run, "was cancelled")
    context.log.info(_describe(request))
    return request


def _describe(request: dg.RunRequest | dg.SkipReason) -> str:
    if isinstance(request, dg.SkipReason):
        return f"no cleanup: {request.skip_message}"
    return f"cleanup of {request.tags[CLEANUP_PARTITION_TAG]} after run {request.run_key}"
