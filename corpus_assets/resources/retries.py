"""Retry policies per stage: fetch talks to the network and retries more (docs/reliability.md).

A stage that exits 64 or 65 raises `Failure(allow_retries=False)`, which bypasses these. The
policies give each stage's number of retries, backoff and jitter; the base delay between tries
is an execution setting of the stage runner (`fetch_retry_delay_s`, `stage_retry_delay_s`,
defaulting to the delays below), so a test or an impatient user can shorten it per run.
"""

from __future__ import annotations

import dagster as dg

FETCH_RETRY = dg.RetryPolicy(
    max_retries=5, delay=2.0, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)
STAGE_RETRY = dg.RetryPolicy(
    max_retries=2, delay=1.0, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)
# A task job resumes from its checkpoints, so a retry repeats no committed work.
TASK_RETRY = STAGE_RETRY
# Training a classifier fetches its examples first (into the raw cache, resumable): the fetch's.
CLASSIFIER_RETRY = FETCH_RETRY
RETRY_POLICIES = {
    "fetch": FETCH_RETRY,
    "shard": STAGE_RETRY,
    "tokenize": STAGE_RETRY,
    "tasks": TASK_RETRY,
    "classifier": CLASSIFIER_RETRY,
}
NETWORK = frozenset({"fetch", "classifier"})
"""The stages whose base delay is the runner's `fetch_retry_delay_s`."""


def retry_delay(policy: dg.RetryPolicy, base_delay_s: float, attempt: int) -> float:
    """Seconds before try `attempt` + 1: `policy`'s backoff and jitter on `base_delay_s`."""
    shaped = dg.RetryPolicy(
        max_retries=policy.max_retries,
        delay=base_delay_s,
        backoff=policy.backoff,
        jitter=policy.jitter,
    )
    return max(float(shaped.calculate_delay(attempt)), 0.0)
