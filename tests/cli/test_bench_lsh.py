"""bench/bench_lsh_ranges.py and bench/bench_keep_first.py on small inputs: both ways of each
give the same groups / partners (the scripts check them) and the summaries have their
fields (structure, not timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_lsh_ranges.py"


def test_small_run_summary(tmp_path: Path) -> None:
    cmd = [sys.executable, str(BENCH), "--rows", "3000,20000", "--range-rows", "3000"]
    cmd += ["--repeats", "1", "--out", str(tmp_path / "lsh")]
    cmd += ["--exact-rows", "5000", "--exact-range-rows", "900"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [(s["rows"], s["ranges"]) for s in report["sizes"]] == [(3000, 1), (20000, 7)]
    assert all(set(s["seconds"]) == {"split", "filter"} for s in report["sizes"])
    assert not (tmp_path / "lsh").exists()
    exact = report["exact"]  # the script checks both ways find the same copies
    assert exact["ranges"] == 6 and exact["copies"] > 500
    assert set(exact["by_range"]) == {"seconds", "peak_bytes_per_row"}


def test_keep_first_bench_small_run(tmp_path: Path) -> None:
    bench = REPO / "bench" / "bench_keep_first.py"
    cmd = [sys.executable, str(bench), "--rows", "20000", "--window-rows", "3000"]
    proc = subprocess.run(
        [*cmd, "--out", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr  # the script checks both give the same partners
    report = json.loads(proc.stdout)
    assert report["windowed"]["dropped"] == report["all_at_once"]["dropped"] > 1000
    assert {"peak_mb", "bytes_per_row", "seconds"} <= set(report["windowed"])
