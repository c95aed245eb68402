"""bench/bench_tasks.py --quick: its JSON summary has every number, and one dataset per size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_tasks.py"
CONFIG_KEYS = {
    "candidates_per_s_wall",
    "candidates_per_s_marginal",
    "tree_rss_ratio",
    "process_rss_ratio",
}
RUN_KEYS = {"backend", "workers", "candidates", "wall_s", "generated", "retained", "duplicates"}
RUN_KEYS |= {"rejected", "dataset_id", "tree_rss_mb", "process_rss_mb", "processes"}


def test_quick_run_summary(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, str(BENCH), "--quick", "--work", str(tmp_path / "jobs")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["sizes"] == {"base": 256, "small": 1000, "large": 3000}
    assert set(summary["configs"]) == {"thread-1", "process-1", "process-2"}
    for numbers in summary["configs"].values():
        assert set(numbers) == CONFIG_KEYS and all(v > 0 for v in numbers.values())
    assert summary["process_2_over_1_wall"] > 0 and summary["process_2_over_1_marginal"] > 0
    runs = summary["runs"]
    assert len(runs) == 9 and all(set(r) == RUN_KEYS for r in runs)
    for run in runs:
        assert run["generated"] == run["candidates"]
        assert run["retained"] + run["duplicates"] + run["rejected"] == run["generated"]
        assert run["tree_rss_mb"] > 0 and run["process_rss_mb"] > 0
    by_size = {
        size: {r["dataset_id"] for r in runs if r["candidates"] == size}
        for size in (256, 1000, 3000)
    }
    assert all(len(ids) == 1 for ids in by_size.values()), by_size
    assert len(set.union(*by_size.values())) == 3  # other sizes, other datasets
    assert summary["same_dataset_id"] is True
    assert {(r["backend"], r["processes"] > 1) for r in runs} == {
        ("thread", False),
        ("process", True),
    }
