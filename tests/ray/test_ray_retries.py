"""Which failures of a Ray task are retried: OSError and TimeoutError are, a DataError is not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ray_support import ray_env

SCRIPT = Path(__file__).with_name("retry_script.py")


def test_transient_errors_are_retried_and_bad_data_is_not(
    tmp_path: Path, home: Path, short_tmp: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(state)],
        capture_output=True,
        text=True,
        env=ray_env(home, short_tmp),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    for case in ("oserror", "timeout"):  # the first attempt of task 0 failed, the second ran
        assert report[case] == {"result": [0, 10], "starts": {"0": 2, "1": 1}}, report
    data = report["data"]
    assert data["result"] == {
        "error": "DataError",  # Ray's wrapper is gone: the CLI maps it to exit 65
        "message": "shard-00000.parquet: row 7 has no text",
    }
    assert data["starts"]["0"] == 1, data  # never retried
    assert list(short_tmp.iterdir()) == []
