"""What a test needs from the machine: under CI a missing piece fails the test, elsewhere it is a
skip that names what is missing and how to get it."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def unavailable(message: str) -> NoReturn:
    """Fail under `CI=true` (CI must run every test), skip elsewhere; `message` says what is
    missing and how to get it."""
    if in_ci():
        pytest.fail(f"{message} (CI=true: a test that cannot run here is a failure)")
    pytest.skip(message)
