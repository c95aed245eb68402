"""A partition backfill of three registered configs, run by the daemon: all three materialize."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import REPO, variant
from e2e_support import DagsterDev, wait_for

from corpus_assets.core.stages.verify import verify_path

DAGSTER = str(Path(sys.executable).with_name("dagster"))


@pytest.mark.timeout(900)
def test_backfill_three_configs(dagster_dev: DagsterDev) -> None:
    keys = [
        dagster_dev.register(variant(dagster_dev.example, f"backfill-{v}", version=v))
        for v in ("b1", "b2", "b3")
    ]
    done = subprocess.run(
        [
            DAGSTER,
            "job",
            "backfill",
            "-w",
            str(REPO / "workspace.yaml"),
            "-j",
            "corpus_build",
            "--partitions",
            ",".join(keys),
            "--noprompt",
        ],
        env=dagster_dev.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    with dagster_dev.instance() as instance:

        def finished_runs() -> list[dg.DagsterRun]:
            runs = [r for r in instance.get_runs() if r.tags.get("dagster/partition") in keys]
            done = len(runs) == len(keys) and all(r.is_finished for r in runs)
            return runs if done else []

        runs = wait_for(finished_runs, 780, "three finished backfill runs", every=3.0)
        assert {r.tags["dagster/partition"] for r in runs} == set(keys)
        assert all(r.tags.get("dagster/backfill") for r in runs)
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert set(keys) <= instance.get_materialized_partitions(dg.AssetKey("tokens"))
    manifests = sorted(dagster_dev.root.glob("tokens/bytes/tiny-stories/b*/*/_MANIFEST.json"))
    assert len(manifests) == 3 and all(verify_path(m) == [] for m in manifests)
    assert len(list(dagster_dev.root.glob("raw/tiny-*"))) == 1, "the shared source is fetched once"
