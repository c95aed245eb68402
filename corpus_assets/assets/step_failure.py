"""A step's failure reads as one sentence first: the failure's description as the step's first
ERROR event, before the step failure Dagster records next (with its stack trace)."""

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from corpus_assets.core.errors import CorpusError, UpstreamMissing
from corpus_assets.core.secrets import mask_text


@contextmanager
def one_sentence(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> Iterator[None]:
    """Log a `dg.Failure`'s one-line description at ERROR level, then let it propagate; a
    `CorpusError` raised in the step becomes that failure (`as_failure`); a retry requested
    because of one logs that failure's line."""
    try:
        yield
    except CorpusError as exc:
        failure = as_failure(exc)
        context.log.error(_line(failure))
        raise failure from None
    except dg.Failure as failure:
        context.log.error(_line(failure))
        raise
    except dg.RetryRequested as retry:
        if isinstance(retry.__cause__, dg.Failure):
            context.log.error(_line(retry.__cause__))
        raise


def as_failure(exc: CorpusError) -> dg.Failure:
    """The step failure for an error the step raised on purpose: its sentence, its exit code and
    the `upstream_missing` flag the cleanup sensors read; never retried."""
    return dg.Failure(
        mask_text(str(exc)),
        metadata={"exit_code": exc.exit_code, "upstream_missing": isinstance(exc, UpstreamMissing)},
        allow_retries=False,
    )


def _line(failure: dg.Failure) -> str:
    return " ".join((failure.description or "the step failed").split())
