"""A test that cannot run on this machine is a skip for a developer and a failure under CI."""

from __future__ import annotations

import pytest
from support.environment import unavailable


def test_a_missing_piece_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"chromium is not installed .*CI=true"):
        unavailable("chromium is not installed")


def test_a_missing_piece_is_a_skip_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        unavailable("chromium is not installed")
