"""Fixtures of the PostgreSQL tests: one real server per session, a database per test."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dagster"))
from pg_support import PgServer, database, pg_bin, running_server
from support.environment import unavailable

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server (initdb in a temporary folder, a free loopback port), torn down."""
    bin_dir = pg_bin()
    if bin_dir is None:
        unavailable("PostgreSQL is not installed (scripts/test-deps.sh installs it as root)")
    with running_server(bin_dir) as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a new, empty database on the session's server, dropped after the test."""
    with database(pg_server, f"corpus_test_{os.getpid()}_{next(_names)}") as url:
        yield url
