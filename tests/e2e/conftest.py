"""`corpus ui` (dagster dev: webserver, daemon, code server) on a free loopback port."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dagster"))
from dagster_support import copy_example
from support.dagster import DagsterDev, running_ui

from corpus_assets.instance.home import ensure_home


@pytest.fixture(scope="session")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    base = tmp_path_factory.mktemp("e2e")
    root = base / "data"
    home = ensure_home(root / "dagster")
    example = copy_example(base / "configs")
    env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_ROOT": str(root)}
    with running_ui(base, root, home, env, example) as server:
        yield server
