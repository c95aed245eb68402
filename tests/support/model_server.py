"""`openai_server.py` (this folder) run as a process of its own session, for live tests.

`ModelServer(log, *args)` starts it on a free loopback port and waits until it answers;
`stats()` is its `GET /stats`; `stop()` ends its process group.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from support.processes import stop_group
from support.servers import free_port
from support.waiting import wait_for

SERVER = Path(__file__).resolve().parent / "openai_server.py"


class ModelServer:
    """The test model server, its base URL and its counters."""

    def __init__(self, log: Path, *args: str) -> None:
        self.port = free_port()
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(SERVER), "--port", str(self.port), *args],
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}/v1"
        wait_for(self._up, 30, "the test model server", watch=[self.proc])

    def _up(self) -> bool:
        try:
            self.stats()
        except OSError:
            return False
        return True

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as answer:
            doc: dict[str, Any] = json.load(answer)
        return doc

    def answered(self) -> int:
        """Chat requests received and no longer in flight."""
        stats = self.stats()
        return int(stats["chat"]) - int(stats["in_flight"])

    def stop(self) -> None:
        stop_group(self.proc, grace=5)
