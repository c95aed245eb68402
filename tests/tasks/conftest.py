"""Task test fixtures: no job a test started outlives it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from job_support import stop_leftovers


@pytest.fixture(autouse=True)
def no_leftover_jobs() -> Iterator[None]:
    """A failed test leaves no job behind (each runs in a session of its own)."""
    yield
    stop_leftovers()
