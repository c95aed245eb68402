"""Helpers of the end-to-end tests: a running `corpus ui`, waiting, sensor ticks."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dagster"))

STARTUP_TIMEOUT = 180.0


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
        return subprocess.run(
            [sys.executable, "-m", "corpus_assets.cli", *args],
            env=self.env,
            text=True,
            capture_output=True,
            timeout=300,
            check=False,
        )

    def register(self, config: Path) -> str:
        done = self.corpus("register", str(config), "--root", str(self.root))
        assert done.returncode == 0, done.stderr
        key: str = json.loads(done.stdout)["partition_key"]
        return key

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_for(predicate: Any, timeout: float, what: str, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


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
