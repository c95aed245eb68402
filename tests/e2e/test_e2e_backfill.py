"""A partition backfill of three registered configs, run by the daemon: all three materialize."""

from __future__ import annotations

import dagster as dg
import pytest
from dagster_support import variant
from support.dagster import DagsterDev, finished_runs
from support.waiting import wait_for

from corpus_assets.core.stages.verify import verify_path


@pytest.mark.timeout(900)
def test_backfill_three_configs(dagster_dev: DagsterDev) -> None:
    keys = [
        dagster_dev.register(variant(dagster_dev.example, f"backfill-{v}", version=v))
        for v in ("b1", "b2", "b3")
    ]
    dagster_dev.backfill("corpus_build", keys)

    with dagster_dev.instance() as instance:
        runs = wait_for(
            lambda: finished_runs(instance, keys), 780, "three finished backfill runs", every=3.0
        )
        assert {r.tags["dagster/partition"] for r in runs} == set(keys)
        assert all(r.tags.get("dagster/backfill") for r in runs)
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert set(keys) <= instance.get_materialized_partitions(dg.AssetKey("tokens"))
    manifests = sorted(dagster_dev.root.glob("tokens/bytes/tiny-stories/b*/*/_MANIFEST.json"))
    assert len(manifests) == 3 and all(verify_path(m) == [] for m in manifests)
    assert len(list(dagster_dev.root.glob("raw/tiny-*"))) == 1, "the shared source is fetched once"
