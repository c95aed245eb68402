"""Retry policies per stage: fetch talks to the network and retries more (DESIGN §6).

A stage that exits 64 or 65 raises `Failure(allow_retries=False)`, which bypasses these.
"""

from __future__ import annotations

import dagster as dg

FETCH_RETRY = dg.RetryPolicy(
    max_retries=5, delay=2.0, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)
STAGE_RETRY = dg.RetryPolicy(
    max_retries=2, delay=1.0, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)
RETRY_POLICIES = {"fetch": FETCH_RETRY, "shard": STAGE_RETRY, "tokenize": STAGE_RETRY}
