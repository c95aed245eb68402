"""A throwaway PostgreSQL server for the tests: initdb into a temporary folder, a free loopback
port, its unix socket in that folder, a database per test; everything removed afterwards.

As root (CI), the server runs as the `postgres` user (`initdb` refuses root) through `runuser`;
as any other user, as that user. The binaries are Debian's (/usr/lib/postgresql/<major>/bin).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.servers import free_port

SUPERUSER = "postgres"
OS_USER = "postgres"  # who runs the server when the tests run as root


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (holding initdb and pg_ctl), or None."""
    found = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/initdb")]
    if not found and shutil.which("initdb"):
        return Path(str(shutil.which("initdb"))).parent
    numeric = [p for p in found if re.fullmatch(r"\d+", p.parent.name)]
    return max(numeric, key=lambda p: int(p.parent.name)) if numeric else None


@dataclass(frozen=True)
class PgServer:
    """A running server: where it listens and how to make a database on it."""

    bin: Path
    folder: Path
    port: int

    def url(self, database: str) -> str:
        return f"postgresql+psycopg2://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres") -> Any:
        import psycopg2

        conn = psycopg2.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, dbname=database, connect_timeout=10
        )
        conn.autocommit = True
        return conn

    def query(self, database: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return list(cur.fetchall()) if cur.description else []
        finally:
            conn.close()


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", OS_USER, "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def running_server(bin_dir: Path) -> Iterator[PgServer]:
    """initdb + pg_ctl start on a free port; pg_ctl stop and the folder removed on exit."""
    # Under /tmp itself, not pytest's root-only tmp folder: the postgres user must reach it.
    folder = Path(tempfile.mkdtemp(prefix="corpus-pg-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(folder, OS_USER, OS_USER)
        data, log = folder / "data", folder / "server.log"
        _run([str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
              "-E", "UTF8", "--locale=C", "--no-sync"])  # fmt: skip
        port = free_port()
        options = (
            f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        start = [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60"]
        done = subprocess.run(
            _as_server_user([*start, "-o", options, "start"]),
            capture_output=True, text=True, check=False, timeout=90,
        )  # fmt: skip
        if done.returncode != 0:
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stdout}{done.stderr}{tail}")
        try:
            yield PgServer(bin_dir, folder, port)
        finally:
            stop = [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
            subprocess.run(_as_server_user(stop), capture_output=True, check=False, timeout=90)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(argv: list[str]) -> None:
    done = subprocess.run(
        _as_server_user(argv), capture_output=True, text=True, check=False, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stdout}{done.stderr}")


@contextlib.contextmanager
def database(server: PgServer, name: str) -> Iterator[str]:
    """A new, empty database `name` on `server`; its URL; dropped afterwards."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        yield server.url(name)
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()
