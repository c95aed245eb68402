"""Dagster test fixtures: a private copy of the example config, a data root, an instance."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import copy_example

from corpus_assets.dagster_instance import ensure_home


@pytest.fixture
def example(tmp_path: Path) -> Path:
    return copy_example(tmp_path / "configs")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def instance(root: Path) -> Iterator[dg.DagsterInstance]:
    """A real instance on disk with the project's dagster.yaml, under the data root."""
    home = ensure_home(root / "dagster")
    with dg.DagsterInstance.from_config(str(home)) as inst:
        yield inst
