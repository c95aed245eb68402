"""The Dagster instance on PostgreSQL (`--instance URL`): the URL, its server, its home.

Run storage, event log storage and schedule storage go to the database (dagster-postgres);
compute logs and everything else stay in `<root>/dagster-postgres/` on disk.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING

from corpus_assets.core.errors import ConfigError, TransientError
from corpus_assets.core.store.layout import Layout
from corpus_assets.instance.home import (
    DAGSTER_YAML_HEAD,
    DAGSTER_YAML_REST,
    ensure_home,
    open_home,
)

if TYPE_CHECKING:
    import dagster as dg
    from sqlalchemy.engine import URL

PG_URL_ENV = "CORPUS_DAGSTER_PG_URL"
SCHEME = "postgresql+psycopg2"
FORM = f"{SCHEME}://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
CONNECT_TIMEOUT_S = 5

POSTGRES_STORAGE = f"""\
# Storage: PostgreSQL through dagster-postgres, at the URL in ${PG_URL_ENV} (which `corpus
# build|register|ui|check --instance URL` set): runs, event logs, schedules and sensor ticks.
# Compute logs stay in this folder. The `dagster` CLI needs DAGSTER_HOME set here and
# ${PG_URL_ENV} set to a {SCHEME}:// URL.
storage:
  postgres:
    postgres_url:
      env: {PG_URL_ENV}
"""

DAGSTER_YAML = DAGSTER_YAML_HEAD + POSTGRES_STORAGE + DAGSTER_YAML_REST


def instance_url(given: str | None) -> str | None:
    """`--instance`, else `$CORPUS_DAGSTER_PG_URL`, else None (SQLite under the data root)."""
    return given or os.environ.get(PG_URL_ENV) or None


def checked_url(url: str) -> str:
    """`url` as dagster-postgres needs it (`postgresql://` becomes `postgresql+psycopg2://`).

    A URL that is not a PostgreSQL URL with a database name is a ConfigError (exit 64).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
        _ = parsed.port  # a non-numeric port raises here
    except (ArgumentError, ValueError):
        raise ConfigError(f"--instance: not a database URL; expected {FORM}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername=SCHEME)  # SQLAlchemy 2.1 would pick psycopg 3
    if parsed.drivername != SCHEME:
        raise ConfigError(
            f"--instance: scheme {parsed.drivername!r} is not PostgreSQL through psycopg2; "
            f"expected {FORM}"
        )
    if not parsed.database:
        raise ConfigError(f"--instance {_shown(parsed)}: no database name; expected {FORM}")
    return parsed.render_as_string(hide_password=False)


def check_reachable(url: str) -> None:
    """Connect once: an unreachable server (or refused login) is a TransientError (exit 75)."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.pool import NullPool

    for module in ("dagster_postgres", "psycopg2"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"--instance needs the postgres extra ({module} is not installed): "
                "pip install -e '.[postgres]'"
            )
    parsed = make_url(url)
    engine = create_engine(
        parsed, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
    )
    try:
        with engine.connect():
            pass
    except DBAPIError as exc:
        reason = " ".join(str(exc.orig).split()) or type(exc.orig).__name__
        raise TransientError(
            f"--instance {_shown(parsed)}: cannot reach PostgreSQL: {reason}"
        ) from None
    finally:
        engine.dispose()


def postgres_home(root: Path) -> Path:
    """`<root>/dagster-postgres`, owner-only, with its dagster.yaml (PostgreSQL storage)."""
    return ensure_home(Layout(root.resolve()).dagster_postgres_home, DAGSTER_YAML)


def open_postgres_instance(root: Path, url: str) -> dg.DagsterInstance:
    """The instance at `url` (checked, reachable), its home under `root`; sets DAGSTER_HOME and
    $CORPUS_DAGSTER_PG_URL for this process and its children."""
    url = checked_url(url)
    check_reachable(url)
    os.environ[PG_URL_ENV] = url
    Layout(root.resolve()).secure()  # raw/, work/, logs/ owner-only before any stage runs
    return open_home(postgres_home(root))


def _shown(parsed: URL) -> str:
    return parsed.render_as_string(hide_password=True)
