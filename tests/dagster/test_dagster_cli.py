"""The `dagster` CLI ways in, as a user types them, on a config from `corpus register`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from corpus_assets.core.stages.verify import verify_path

DAGSTER = str(Path(sys.executable).with_name("dagster"))


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


@pytest.mark.timeout(400)
def test_job_execute_then_asset_materialize(example: Path, root: Path, tmp_path: Path) -> None:
    home = root / "dagster"
    env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_ROOT": str(root)}
    registered = _run(
        [sys.executable, "-m", "corpus_assets.cli", "register", str(example), "--root", str(root)],
        env,
        tmp_path,
    )
    key = json.loads(registered.stdout)["partition_key"]

    _run(
        [
            DAGSTER,
            "job",
            "execute",
            "-m",
            "corpus_assets.definitions",
            "-j",
            "corpus_build",
            "--tags",
            json.dumps({"dagster/partition": key}),
        ],
        env,
        tmp_path,
    )
    manifests = sorted(root.glob("**/_MANIFEST.json"))
    assert len(manifests) == 2
    assert all(verify_path(m) == [] for m in manifests)

    # The data root also follows from DAGSTER_HOME=<root>/dagster alone.
    env.pop("CORPUS_ROOT")
    _run(
        [
            DAGSTER,
            "asset",
            "materialize",
            "-m",
            "corpus_assets.definitions",
            "--select",
            "raw,shards,tokens",
            "--partition",
            key,
        ],
        env,
        tmp_path,
    )
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for asset in ("raw", "shards", "tokens"):
            assert key in instance.get_materialized_partitions(dg.AssetKey(asset))
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("tokens"), asset_partitions=[key]), limit=5
        ).records
        assert len(records) == 2
        runs = instance.get_runs()
        assert len(runs) == 2 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert {r.job_name for r in runs} >= {"corpus_build"}
