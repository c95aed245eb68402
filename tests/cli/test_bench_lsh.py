"""bench/bench_lsh_ranges.py on a small band: both ways of grouping by hash range give the same
groups (the script checks them) and the summary has one row per size (structure, not timings)."""

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
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [(s["rows"], s["ranges"]) for s in report["sizes"]] == [(3000, 1), (20000, 7)]
    assert all(set(s["seconds"]) == {"split", "filter"} for s in report["sizes"])
    assert not (tmp_path / "lsh").exists()
