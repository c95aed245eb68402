"""bench/bench_big_document.py on a 40 MB document: fetch keeps it, the shard stage drops it and
exits 65 with nothing left, and neither stage's peak grows by more than 3x the document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_big_document.py"


def test_a_big_document_costs_at_most_three_times_its_size(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(BENCH), "--mb", "40", "--work", str(tmp_path), "--check"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r["kind"] for r in summary["runs"]] == ["jsonl", "text"]
    for run in summary["runs"]:
        assert run["document_mb"] == 40.0
        fetch, shard = run["stages"]["fetch"], run["stages"]["shard"]
        assert fetch["exit"] == 0 and fetch["peak_mb"] > fetch["baseline_mb"] + 40
        assert shard["exit"] == 65
        assert "no document survived the filters: 1 too_many_chars" in shard["last_line"]
        assert 0 < fetch["cost_x"] <= 3 and 0 < shard["cost_x"] <= 3, run
