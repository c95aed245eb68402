"""Helpers shared by the Dagster and end-to-end tests (imported by module name)."""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from corpus_assets.instance.home import ensure_home
from corpus_assets.resources.stage_runner import StageRunner

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
WRAPPER = Path(__file__).with_name("stage_wrapper.py")


def copy_example(folder: Path) -> Path:
    """examples/tiny.toml and its data copied into `folder`, so relative paths resolve there."""
    shutil.copytree(EXAMPLES / "tiny", folder / "tiny")
    shutil.copy(EXAMPLES / "tiny.toml", folder / "tiny.toml")
    return folder / "tiny.toml"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A private copy of the bundled example config."""
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


def variant(example: Path, name: str, **changes: Any) -> Path:
    """A JSON config beside `example`: the example with top-level keys replaced."""
    raw = tomllib.loads(example.read_text(encoding="utf-8"))
    raw.update(changes)
    path = example.with_name(f"{name}.json")
    path.write_text(json.dumps(raw, indent=2), encoding="utf-8")
    return path


def unlicensed(example: Path) -> Path:
    """The example with its source under a license that is not on the allow-list."""
    raw = tomllib.loads(example.read_text(encoding="utf-8"))
    source = {**raw["sources"][0], "license": "proprietary"}
    return variant(example, "unlicensed", sources=[source])


def wrapped(state: Path, mode: str, stage: str | None = None, **kw: Any) -> StageRunner:
    """A stage runner whose `corpus` goes through stage_wrapper.py in `mode`."""
    command = [sys.executable, str(WRAPPER), "--state", str(state), "--mode", mode]
    if stage is not None:
        command += ["--stage", stage]
    return StageRunner(command=[*command, "--"], **kw)
