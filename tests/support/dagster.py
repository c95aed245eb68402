"""`corpus ui` (dagster dev: webserver, daemon, code server) on a free loopback port, and what
its instance shows."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from corpus_assets.sensors.cleanup import CANCEL_SENSOR, FAILURE_SENSOR
from support.corpus import run_corpus, start_corpus
from support.processes import stop_group
from support.servers import free_port
from support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).with_name("dagster"))
STARTUP_TIMEOUT = 180.0
CLEANUP_SENSORS = {FAILURE_SENSOR, CANCEL_SENSOR}


@dataclass
class DagsterDev:
    """A running `corpus ui` and the data root and instance it serves."""

    root: Path
    home: Path
    url: str
    env: dict[str, str]
    example: Path
    log: Path

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
        assert "errors" not in answer, answer
        return answer["data"]

    def corpus(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_corpus(*args, environ=self.env)

    def dagster(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """`dagster ARGS...` on this instance."""
        return run_dagster(*args, env=self.env, cwd=cwd)

    def backfill(self, job: str, keys: list[str]) -> None:
        """`dagster job backfill` of `job` over the partitions `keys` (the workspace.yaml's
        code location); it must be accepted."""
        done = self.dagster(
            "job", "backfill", "-w", str(REPO / "workspace.yaml"), "-j", job,
            "--partitions", ",".join(keys), "--noprompt", cwd=REPO,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    def register(self, config: Path) -> str:
        done = self.corpus("register", str(config), "--root", str(self.root))
        assert done.returncode == 0, done.stderr
        key: str = json.loads(done.stdout)["partition_key"]
        return key

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))


@contextlib.contextmanager
def running_ui(
    base: Path, root: Path, home: Path, env: Mapping[str, str], example: Path, *extra: str
) -> Iterator[DagsterDev]:
    """`corpus ui --root ROOT --port PORT EXTRA...` in `env`, its instance at `home`, its output
    in `base/dagster-dev.log`; yielded once the UI answers and the cleanup sensors ticked, then
    its process group SIGINTed."""
    port = free_port()
    log = base / "dagster-dev.log"
    with open(log, "wb") as out:
        proc = start_corpus(
            "ui", "--root", root, "--port", port, *extra,
            environ=env, cwd=base, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    server = DagsterDev(
        root, home, f"http://127.0.0.1:{port}", {**env, "DAGSTER_HOME": str(home)}, example, log
    )
    try:
        wait_for(lambda: ready(server.url) or proc.poll() is not None, STARTUP_TIMEOUT, "the UI", 1)
        assert proc.poll() is None, log.read_text()[-5000:]
        with server.instance() as instance:
            wait_for(
                lambda: sensors_ticked(instance, CLEANUP_SENSORS),
                STARTUP_TIMEOUT,
                "the daemon's first sensor ticks",
                every=1.0,
            )
        yield server
    finally:
        stop_group(proc, signal.SIGINT)


def run_dagster(
    *args: str, env: Mapping[str, str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`dagster ARGS...` (this environment's `dagster` command) to its end, output captured."""
    return subprocess.run(
        [DAGSTER, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def finished_runs(instance: dg.DagsterInstance, keys: list[str]) -> list[dg.DagsterRun]:
    """The runs of the partitions `keys` once there is one for each and all have finished, else
    none."""
    runs = [r for r in instance.get_runs() if r.tags.get("dagster/partition") in keys]
    done = len(runs) == len(keys) and all(r.is_finished for r in runs)
    return runs if done else []


def cancel_when(
    instance: dg.DagsterInstance, ready: Callable[[dg.DagsterRun], bool]
) -> threading.Thread:
    """Cancel like the run launcher does (mark CANCELING, SIGINT this process, the run worker)
    the started run for which `ready(run)` is true."""

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for run in instance.get_runs(
                filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])
            ):
                if ready(run):
                    instance.report_run_canceling(run)
                    os.kill(os.getpid(), signal.SIGINT)
                    return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def ready(url: str) -> bool:
    """Whether the webserver at `url` answers."""
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def sensors_ticked(instance: dg.DagsterInstance, names: set[str]) -> bool:
    """Every named sensor ticked once (a run-status sensor's first tick only sets its cursor)."""
    from dagster._core.scheduler.instigation import InstigatorType

    ticked = set()
    for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
        if state.name in names and instance.get_ticks(
            state.instigator_origin_id, state.selector_id, limit=1
        ):
            ticked.add(state.name)
    return ticked == names


def no_sqlite_instance(root: Path) -> None:
    """Nothing of a SQLite instance under the root: no `dagster/` home, no *.db file."""
    assert not (root / "dagster").exists()
    assert not list(root.rglob("*.db")), list(root.rglob("*.db"))
