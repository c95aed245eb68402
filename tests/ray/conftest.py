"""Ray tests: a small benchmark corpus, a `corpus` runner whose HOME must stay empty."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.corpus import make_bench_corpus
from support.environment import in_ci, unavailable

# Without the [ray] extra these tests are not collected (Ray is not imported here: a stage
# imports it itself, after setting its environment), except under CI, where each fails.
RAY_MISSING = importlib.util.find_spec("ray") is None
collect_ignore_glob = ["test_*.py"] if RAY_MISSING and not in_ci() else []


@pytest.fixture(autouse=True)
def _ray_installed() -> None:
    if RAY_MISSING:
        unavailable("Ray is not installed (pip install -e '.[ray]')")


@pytest.fixture(scope="session")
def bench_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bench_corpus(tmp_path_factory.mktemp("ray-bench") / "corpus", 3)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """HOME for every process of the test; it must still be empty afterwards."""
    folder = tmp_path / "home"
    folder.mkdir()
    yield folder
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    assert left == [], f"files left in HOME: {left}"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """TMPDIR for the stages: short, as Ray's socket paths under it must be (107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
