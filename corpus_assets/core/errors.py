"""One error hierarchy; the CLI alone maps it to exit codes and prints it."""

from __future__ import annotations

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


class DataError(CorpusError):
    """Bad data: unlicensed source, digest mismatch, corrupt input (exit 65, never retried)."""

    exit_code = EXIT_DATA


class TransientError(CorpusError):
    """Network, timeout, lock busy, disk full: worth retrying with backoff (exit 75)."""

    exit_code = EXIT_TRANSIENT
