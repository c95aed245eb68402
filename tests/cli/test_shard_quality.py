"""The quality bars of the shard stage, scored against make_corpus.py's truth on a 5 MB corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_shard.py"


def test_shard_quality_bars_on_a_5mb_benchmark_corpus(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--mb",
            "5",
            "--check",
            "--no-datatrove",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["exact_removed"] >= 0.995
    assert report["near_removed"] >= 0.95
    assert report["unique_kept"] >= 0.99
    assert report["junk_removed"] >= 0.95
    assert report["partial_new_kept"] >= 0.95 and report["truth"]["partial"] > 0
    assert report["pii_left"] == {"email": 0, "ip": 0, "phone": 0}
    assert sum(report["pii_injected"].values()) > 0
    assert report["shakespeare_two_editions_both_kept"] == "8/8"
