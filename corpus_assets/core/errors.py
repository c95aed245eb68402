"""One error hierarchy; the CLI alone maps it to exit codes and prints it."""

from __future__ import annotations

import re

EXIT_OK = 0
EXIT_USAGE = 64
EXIT_DATA = 65
EXIT_TRANSIENT = 75


class CorpusError(Exception):
    """Base of every error the project raises on purpose."""

    exit_code = 1


class ConfigError(CorpusError):
    """Bad config or usage: never retried (exit 64)."""

    exit_code = EXIT_USAGE


class UpstreamMissing(ConfigError):
    """A stage's input is not built yet: "materialize <asset> first: ..." (exit 64).

    Nothing was written, so a build that fails this way needs no cleanup: a stage sends the
    flag to the stage runner through Pipes, and a step raising it marks its failure
    `upstream_missing`, which the cleanup sensors read.
    """

    def __init__(self, upstream: str, detail: str) -> None:
        super().__init__(f"materialize {upstream} first: {detail}")


class DataError(CorpusError):
    """Bad data: unlicensed source, digest mismatch, corrupt input (exit 65, never retried)."""

    exit_code = EXIT_DATA


class TransientError(CorpusError):
    """Network, timeout, lock busy, disk full: worth retrying with backoff (exit 75)."""

    exit_code = EXIT_TRANSIENT


class DiskError(CorpusError):
    """A file operation failed for another reason than a full, read-only or forbidden disk (an
    I/O error, say): a corpus stage gives up (exit 1); a task job retries it, as every OSError."""


PLAIN_WORD = re.compile(r"[a-z0-9][a-z0-9._-]{0,23}")


def shown(value: object) -> str:
    """`value` as an error message may quote it: error lines go to logs, so a string is quoted
    only when it is a short lowercase word (plainly not a secret), else named by its length."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        if PLAIN_WORD.fullmatch(value):
            return repr(value)
        return f"<{len(value)} characters, not shown>"
    return f"a {type(value).__name__}"
