"""With the daemon, on PostgreSQL: `corpus ui --instance URL` (dagster dev) serves a data root
whose Dagster storage is a real PostgreSQL database. A failed CLI run is cleaned up by the
sensors, exactly once, and a backfill of two partitions materializes both; the runs, the
sensor's cleanup and the backfill are rows of the database, and no SQLite file is under the root.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import WRAPPER, copy_example, variant
from pg_support import PgServer, database
from support.dagster import DagsterDev, no_sqlite_instance, running_ui
from support.sensors import ticks_after
from support.waiting import wait_for

from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.layout import Layout
from corpus_assets.instance.postgres import PG_URL_ENV
from corpus_assets.sensors.cleanup import CLEANUP_OF_TAG, FAILURE_SENSOR

DB = "corpus_daemon"


@pytest.fixture(scope="module")
def pg_dev(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    """`corpus ui --instance URL` on a new data root and database, after the sensors ticked."""
    base = tmp_path_factory.mktemp("pg-e2e")
    root = base / "data"
    example = copy_example(base / "configs")
    with database(pg_server, DB) as url, pytest.MonkeyPatch.context() as patch:
        patch.setenv(PG_URL_ENV, url)  # this process reads the instance's dagster.yaml too
        env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
        home = root / "dagster-postgres"
        with running_ui(base, root, home, env, example, "--instance", url) as server:
            yield server


@pytest.mark.timeout(600)
def test_failed_run_is_cleaned_up_by_the_sensor(
    pg_dev: DagsterDev, pg_server: PgServer, tmp_path: Path
) -> None:
    """A `dagster job execute` run whose blocking shards check fails (a corrupted shard): the
    daemon's failure sensor launches one cleanup, recorded in PostgreSQL."""
    key = pg_dev.register(pg_dev.example)  # the URL from $CORPUS_DAGSTER_PG_URL
    cfg = load_config(pg_dev.example)
    layout = Layout(pg_dev.root.resolve())
    command = [sys.executable, str(WRAPPER), "--state", str(tmp_path / "w")]
    command += ["--mode", "corrupt-shard", "--stage", "shard", "--"]
    run_config = tmp_path / "run_config.json"
    run_config.write_text(
        json.dumps({"resources": {"stage_runner": {"config": {"command": command}}}})
    )
    done = pg_dev.dagster(
        "job", "execute", "-m", "corpus_assets.definitions", "-j", "corpus_build",
        "--tags", json.dumps({"dagster/partition": key}), "-c", str(run_config), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0, "the blocking check should fail the run"
    assert layout.shards(cfg).exists()

    [(failed_id,)] = pg_server.query(
        DB,
        "select r.run_id from runs r join run_tags t on t.run_id = r.run_id"
        " where t.key = 'dagster/partition' and t.value = %s and r.status = 'FAILURE'",
        key,
    )

    def cleanups() -> list[tuple[str, str, str]]:
        return pg_server.query(
            DB,
            "select r.status, s.value, r.pipeline_name from runs r"
            " join run_tags t on t.run_id = r.run_id and t.key = %s and t.value = %s"
            " join run_tags s on s.run_id = r.run_id and s.key = 'dagster/sensor_name'",
            CLEANUP_OF_TAG,
            failed_id,
        )

    wait_for(lambda: [c for c in cleanups() if c[0] == "SUCCESS"], 240, "the cleanup run", 2.0)
    assert not layout.shards(cfg).exists() and not (layout.root / "work" / cfg.hash12).exists()
    assert any(layout.raw.glob("tiny-*/_SOURCE.json")), "raw is kept"
    with pg_dev.instance() as instance:
        ended = time.time()  # the cleanup run was seen SUCCESS: it ended before this
        # two ticks of the failure sensor that began after the cleanup ended: still one cleanup
        wait_for(
            lambda: len(ticks_after(instance, FAILURE_SENSOR, ended)) >= 2, 120, "2 ticks", 1.0
        )
        assert cleanups() == [("SUCCESS", FAILURE_SENSOR, "corpus_cleanup")]
        assert key not in instance.get_materialized_partitions(dg.AssetKey("shards"))
    no_sqlite_instance(pg_dev.root)


@pytest.mark.timeout(900)
def test_backfill_of_two_partitions(pg_dev: DagsterDev, pg_server: PgServer) -> None:
    """`dagster job backfill` of two registered configs: the daemon runs both to SUCCESS."""
    keys = [pg_dev.register(variant(pg_dev.example, f"pg-{v}", version=v)) for v in ("p1", "p2")]
    pg_dev.backfill("corpus_build", keys)

    def finished() -> list[tuple[str, str, str]]:
        rows = pg_server.query(
            DB,
            "select p.value, r.status, b.value from runs r"
            " join run_tags p on p.run_id = r.run_id and p.key = 'dagster/partition'"
            " join run_tags b on b.run_id = r.run_id and b.key = 'dagster/backfill'"
            " where p.value = any(%s)",
            keys,
        )
        over = ("SUCCESS", "FAILURE", "CANCELED")
        return rows if len(rows) == len(keys) and all(r[1] in over for r in rows) else []

    rows = wait_for(finished, 780, "two finished backfill runs", every=3.0)
    assert sorted((key, status) for key, status, _ in rows) == [(k, "SUCCESS") for k in keys]
    [(backfill_id,)] = {(b,) for _, _, b in rows}
    assert pg_server.query(DB, "select key from bulk_actions") == [(backfill_id,)]
    with pg_dev.instance() as instance:
        assert set(keys) <= instance.get_materialized_partitions(dg.AssetKey("tokens"))
    manifests = sorted(pg_dev.root.glob("tokens/bytes/tiny-stories/p*/*/_MANIFEST.json"))
    assert len(manifests) == 2 and all(verify_path(m) == [] for m in manifests)
    no_sqlite_instance(pg_dev.root)
