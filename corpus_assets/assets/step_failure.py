"""A step's failure reads as one sentence first: the failure's description as the step's first
ERROR event, before the step failure Dagster records next (with its stack trace)."""

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg


@contextmanager
def one_sentence(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> Iterator[None]:
    """Log a `dg.Failure`'s one-line description at ERROR level, then let it propagate; a retry
    requested because of one logs that failure's line."""
    try:
        yield
    except dg.Failure as failure:
        context.log.error(_line(failure))
        raise
    except dg.RetryRequested as retry:
        if isinstance(retry.__cause__, dg.Failure):
            context.log.error(_line(retry.__cause__))
        raise


def _line(failure: dg.Failure) -> str:
    return " ".join((failure.description or "the step failed").split())
