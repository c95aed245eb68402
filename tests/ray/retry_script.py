"""Run in a fresh interpreter by test_ray_retries.py: tasks that fail, through ray_session.

    python retry_script.py STATE_DIR

Prints one JSON object: per case, the results or the error the map raised, and how many times
each task started (one line per attempt in STATE_DIR/<case>-<task>, with the worker's pid).
The task functions live in __main__, so Ray ships them by value.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import DataError
from corpus_assets.core.stages.backend import Backend
from corpus_assets.core.stages.ray_tasks import ray_session
from corpus_assets.core.store.progress import Progress

FIRST_ATTEMPT_FAILS = {"oserror": OSError, "timeout": TimeoutError}


def flaky(state: str, case: str, task: int) -> int:
    log = Path(state) / f"{case}-{task}"
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    attempts = len(log.read_text(encoding="utf-8").splitlines())
    if case == "data" and task == 0:
        raise DataError("shard-00000.parquet: row 7 has no text")
    if case in FIRST_ATTEMPT_FAILS and task == 0 and attempts == 1:
        raise FIRST_ATTEMPT_FAILS[case](f"{case} on the first attempt")
    return task * 10


def main() -> None:
    state = Path(sys.argv[1])
    report: dict[str, Any] = {}
    with ray_session(Backend("ray"), 2, state / "probe", Progress("t", print)) as session:
        for case in ("oserror", "timeout", "data"):
            try:
                got: Any = list(session.map(flaky, [(str(state), case, t) for t in range(2)]))
            except Exception as exc:
                got = {"error": type(exc).__name__, "message": str(exc)}
            starts = {
                t: len((state / f"{case}-{t}").read_text().splitlines())
                for t in range(2)
                if (state / f"{case}-{t}").exists()
            }
            report[case] = {"result": got, "starts": starts}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
