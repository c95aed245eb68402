"""Fault-tolerance fixtures: the example config, a data root and a real instance on disk."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dagster"))
from dagster_support import copy_example

from corpus_assets.dagster_instance import ensure_home


@pytest.fixture
def example(tmp_path: Path) -> Path:
    config: Path = copy_example(tmp_path / "configs")
    return config


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def instance(root: Path) -> Iterator[dg.DagsterInstance]:
    """A real instance on disk with the project's dagster.yaml, under the data root."""
    home = ensure_home(root / "dagster")
    with dg.DagsterInstance.from_config(str(home)) as inst:
        yield inst
