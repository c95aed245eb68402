"""`corpus build` on a Dagster instance whose storage is a real PostgreSQL server, and the one-line
failures of a malformed or unreachable `--instance` URL."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from dagster_support import copy_example
from pg_support import PgServer
from support.dagster import no_sqlite_instance
from support.servers import free_port

from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
DB_OF = "select current_database()"


def _database(url: str) -> str:
    return url.rsplit("/", 1)[1]


@pytest.mark.timeout(300)
def test_build_of_the_example_stores_its_runs_in_postgres(
    corpus: CorpusRunner, pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    example = copy_example(tmp_path / "configs")
    key = load_config(example).partition_key
    root = tmp_path / "data"
    done = corpus("build", example, "--root", root, "--instance", pg_url)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["success"] and summary["partition_key"] == key
    assert verify_path(root / summary["tokens_manifest"]) == []

    db = _database(pg_url)
    [(run_id, status, partition)] = pg_server.query(
        db,
        "select r.run_id, r.status, t.value from runs r join run_tags t on t.run_id = r.run_id"
        " where t.key = 'dagster/partition'",
    )
    assert (status, partition) == ("SUCCESS", key)
    materialized = pg_server.query(
        db,
        "select asset_key from event_logs where run_id = %s"
        " and dagster_event_type = 'ASSET_MATERIALIZATION' order by asset_key",
        run_id,
    )
    assert [a for (a,) in materialized] == ['["raw"]', '["report"]', '["shards"]', '["tokens"]']
    partitions = pg_server.query(db, "select partition from dynamic_partitions")
    assert partitions == [(key,)]
    home = root / "dagster-postgres"
    assert "postgres_url" in (home / "dagster.yaml").read_text()
    assert list((home / "storage" / run_id / "compute_logs").glob("*.err")), "compute logs on disk"
    no_sqlite_instance(root)

    # The URL from the environment instead: the same instance, every stage a no-op.
    again = corpus("build", example, "--root", root, env={"CORPUS_DAGSTER_PG_URL": pg_url})
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["tokens"] == summary["tokens"]
    checked = corpus("check", key, "--root", root, "--instance", pg_url)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert set(json.loads(checked.stdout)["checks"].values()) == {"passed"}
    jobs = pg_server.query(db, "select pipeline_name, status from runs order by id")
    assert jobs == [("corpus_build", "SUCCESS")] * 2 + [("corpus_recheck", "SUCCESS")]
    no_sqlite_instance(root)


@pytest.mark.parametrize(
    ("url", "code", "said"),
    [
        ("not a url", 64, "not a database URL; expected postgresql+psycopg2://"),
        ("mysql://u@localhost/db", 64, "scheme 'mysql' is not PostgreSQL through psycopg2"),
        ("postgresql+psycopg2://u:secret@localhost:5432", 64, "no database name"),
        ("postgresql://u:secret@127.0.0.1:{port}/db", 75, "cannot reach PostgreSQL"),
    ],
)
def test_bad_instance_url_is_one_line(
    corpus: CorpusRunner, tmp_path: Path, url: str, code: int, said: str
) -> None:
    example = copy_example(tmp_path / "configs")
    url = url.format(port=free_port())  # nothing listens there
    done = corpus("register", example, "--root", tmp_path / "data", "--instance", url)
    assert done.returncode == code, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("corpus register: error: --instance") and said in line, line
    assert "secret" not in line
    assert not (tmp_path / "data" / "dagster").exists()
