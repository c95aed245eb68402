"""One data root for the CLI and the Dagster resources, from the same environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.corpus import run_corpus

RESOURCE_ROOT = (
    "from corpus_assets.resources.paths import CorpusPaths; print(CorpusPaths().root_path())"
)


def _environment(**set_: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CORPUS_ROOT", "DAGSTER_HOME")}
    return {**env, **set_}


@pytest.mark.parametrize("instance_folder", ["dagster", "dagster-postgres", None])
def test_the_cli_and_the_resource_pick_the_same_root(
    example: Path, tmp_path: Path, instance_folder: str | None
) -> None:
    """With only `$DAGSTER_HOME` set (the Dagster CLI's setup), `corpus register` stores the
    config under the root holding it, where the resource looks; with neither variable set both
    use ./corpus-data."""
    work = tmp_path / "work"
    work.mkdir()
    mine = tmp_path / "mine"
    env = (
        _environment(DAGSTER_HOME=str(mine / instance_folder))
        if instance_folder
        else _environment()
    )
    expected = mine if instance_folder else work / "corpus-data"
    if instance_folder == "dagster-postgres":  # its instance needs a URL: ask the resource only
        registered = None
    else:
        done = run_corpus("register", example, cwd=work, environ=env)
        assert done.returncode == 0, done.stderr
        registered = json.loads(done.stdout)
    resource = subprocess.run(
        [sys.executable, "-c", RESOURCE_ROOT], cwd=work, env=env, capture_output=True, text=True
    )
    assert resource.returncode == 0, resource.stderr
    assert Path(resource.stdout.strip()) == expected.resolve()
    if registered is not None:
        assert list((expected / "configs").glob("*.json")), "the config is stored in that root"
        assert not (work / "corpus-data").exists() or expected == work / "corpus-data"
