"""A real `dagster-daemon run` on a data root's instance, and `corpus` commands beside it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster._core.scheduler.instigation import InstigatorTick
from support.corpus import start_corpus
from support.dagster import CLEANUP_SENSORS, STARTUP_TIMEOUT, sensors_ticked
from support.processes import stop_group
from support.waiting import wait_for

from corpus_assets.instance.home import ensure_home

DAEMON = str(Path(sys.executable).with_name("dagster-daemon"))


@dataclass
class Daemon:
    """A running daemon (sensors on) and the data root whose instance it serves."""

    root: Path
    home: Path
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes]

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))

    def corpus(self, *args: str) -> subprocess.Popen[str]:
        """`corpus ARGS` on this root, stderr piped (text)."""
        return start_corpus(
            *args, "--root", self.root,
            environ=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def ticked_after(self, sensor: str, timestamp: float) -> bool:
        """True once `sensor` finished a tick that started after `timestamp`."""
        from dagster._core.scheduler.instigation import TickStatus

        return any(
            t.timestamp > timestamp and t.status != TickStatus.STARTED for t in self._ticks(sensor)
        )

    def skip_reasons(self, sensor: str) -> list[str]:
        """Why `sensor`'s recent ticks launched nothing."""
        return [t.skip_reason for t in self._ticks(sensor) if t.skip_reason]

    def _ticks(self, sensor: str) -> list[InstigatorTick]:
        from dagster._core.scheduler.instigation import InstigatorType

        with self.instance() as instance:
            for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
                if state.name == sensor:
                    return list(
                        instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=50)
                    )
        return []


@contextlib.contextmanager
def running_daemon(base: Path) -> Iterator[Daemon]:
    """`dagster-daemon run` on `base/data/dagster`, after the cleanup sensors' first ticks."""
    root = base / "data"
    home = ensure_home(root / "dagster")
    env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_ROOT": str(root)}
    log = base / "daemon.log"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # Create every SQLite storage first: the daemon and its code server would both try.
        instance.all_instigator_state()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [DAEMON, "run", "-m", "corpus_assets.definitions"],
            env=env,
            cwd=base,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    daemon = Daemon(root, home, env, log, proc)
    try:
        with daemon.instance() as instance:
            wait_for(
                lambda: proc.poll() is not None or sensors_ticked(instance, CLEANUP_SENSORS),
                STARTUP_TIMEOUT,
                "the daemon's first cleanup-sensor ticks",
                every=1.0,
            )
        assert proc.poll() is None, log.read_text()[-5000:]
        yield daemon
    finally:
        stop_group(proc)
