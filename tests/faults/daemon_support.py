"""A real `dagster-daemon run` on a data root's instance, and `corpus` commands beside it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster._core.scheduler.instigation import InstigatorTick

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_support import STARTUP_TIMEOUT, sensors_ticked, wait_for

from corpus_assets.instance.home import ensure_home
from corpus_assets.sensors.cleanup import CANCEL_SENSOR, FAILURE_SENSOR

DAEMON = str(Path(sys.executable).with_name("dagster-daemon"))
CLEANUP_SENSORS = {FAILURE_SENSOR, CANCEL_SENSOR}


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
        return subprocess.Popen(
            [sys.executable, "-m", "corpus_assets.cli", *args, "--root", str(self.root)],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

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
            )
        assert proc.poll() is None, log.read_text()[-5000:]
        yield daemon
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the daemon's process group, then SIGKILL whatever is left."""
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # stray children of a clean exit
