"""bench/bench_scale.py --quick: every stage at both sizes, with MB/s and peak RSS, and the
largest-over-smallest ratios (structure only, never timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_scale.py"
STAGE_KEYS = {"wall_s", "cpu_s", "process_rss_mb", "tree_rss_mb", "mb_per_s"}


def test_quick_run_summary(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(BENCH), "--quick", "--work", str(tmp_path / "scale")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["sizes_mb"] == [1.0, 2.0] and summary["backend"] == "local"
    assert len(summary["load_average_before"]) == 3
    runs = summary["runs"]
    assert [r["mb"] for r in runs] == [1.0, 2.0]
    for run in runs:
        assert set(run["stages"]) == {"fetch", "shard", "tokenize"}
        for stage, numbers in run["stages"].items():
            keys = STAGE_KEYS | ({"dedup_rss_mb", "dedup_s"} if stage == "shard" else set())
            assert set(numbers) == keys, stage
            assert all(v > 0 for k, v in numbers.items() if k != "dedup_s"), (stage, numbers)
        assert 0 < run["documents_out"] < run["documents"]
        assert run["duplicates"]["exact"] > 0 and run["duplicates"]["near"] > 0
    assert runs[1]["documents"] > runs[0]["documents"]
    ratios = summary["largest_over_smallest"]
    assert set(ratios) == {"fetch", "shard", "tokenize"}
    assert set(ratios["shard"]) == {"process_rss_mb", "tree_rss_mb", "dedup_rss_mb", "mb_per_s"}
    assert not list((tmp_path / "scale").glob("root-*"))  # data roots removed without --keep
