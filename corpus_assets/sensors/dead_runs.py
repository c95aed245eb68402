"""The dead-run sensor: while the daemon runs, a run whose process was killed is marked FAILED.

The default run launcher cannot health-check a run worker, so Dagster's own run monitoring leaves
such a run STARTED for ever; see corpus_assets.instance.dead_runs for how a process is judged.
Marking it FAILED lets the cleanup and run-retry rules act on it like on any other failure.
"""

import dagster as dg

from corpus_assets.instance.dead_runs import mark_dead_runs

SENSOR = "corpus_dead_runs"


@dg.sensor(
    name=SENSOR,
    description="Marks FAILED every STARTING or STARTED run on this host whose process is gone "
    "(so the cleanup sensors can act on it).",
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def corpus_dead_runs(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    """Marks FAILED every STARTING or STARTED run on this host whose process is gone; only a run
    it marks is logged (a live run, judged again every tick, is counted in the skip reason)."""
    verdicts = mark_dead_runs(context.instance, by=f"sensor {SENSOR}")
    for verdict in verdicts:
        if verdict.dead:
            context.log.info(verdict.reason)
    marked = [v.run_id for v in verdicts if v.dead]
    if marked:
        return dg.SkipReason(f"marked {len(marked)} dead run(s) FAILED: {', '.join(marked)}")
    return dg.SkipReason(f"no dead runs among {len(verdicts)} active run(s)")
