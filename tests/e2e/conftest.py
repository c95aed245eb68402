"""`corpus ui` (dagster dev: webserver, daemon, code server) on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dagster"))
from dagster_support import copy_example
from e2e_support import (
    STARTUP_TIMEOUT,
    DagsterDev,
    free_port,
    ready,
    sensors_ticked,
    wait_for,
)

from corpus_assets.instance.home import ensure_home


@pytest.fixture(scope="session")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    base = tmp_path_factory.mktemp("e2e")
    root = base / "data"
    home = ensure_home(root / "dagster")
    example = copy_example(base / "configs")
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_ROOT": str(root)}
    log = base / "dagster-dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "corpus_assets.cli",
                "ui",
                "--root",
                str(root),
                "--port",
                str(port),
            ],
            env=env,
            cwd=base,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = DagsterDev(root, home, f"http://127.0.0.1:{port}", env, example, log)
    try:
        wait_for(lambda: ready(server.url) or proc.poll() is not None, STARTUP_TIMEOUT, "the UI")
        assert proc.poll() is None, log.read_text()[-5000:]
        with server.instance() as instance:
            wait_for(
                lambda: sensors_ticked(
                    instance, {"corpus_cleanup_on_failure", "corpus_cleanup_on_cancel"}
                ),
                STARTUP_TIMEOUT,
                "the daemon's first sensor ticks",
            )
        yield server
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT the whole `dagster dev` group, then SIGKILL whatever is left."""
    for sig, grace in ((signal.SIGINT, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # stray children of a clean exit
        return
