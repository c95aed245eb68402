"""bench/bench_templates.py --small: the templated corpus and the benchmark corpus side by side,
with MB/s, the near copies, `near_unchecked` and the re-posts removed (structure and quality,
never timings: the ratio is printed for people, not asserted on a shared machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_templates.py"
CORPORA = ("benchmark", "templated", "templated_no_near")


def test_small_run_summary(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(BENCH), "--small", "--out", str(tmp_path / "templates")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [s["documents"] for s in report["sizes"]] == [2000, 10000]
    for size in report["sizes"]:
        assert {*CORPORA, "ratio_mb_per_s", "ratio_without_near_dedup"} <= set(size)
        templated, bench = size["templated"], size["benchmark"]
        assert templated["documents"] == size["documents"]
        assert abs(bench["mb"] - templated["mb"]) < 0.1  # the same size, the same start-up
        assert all(size[c]["mb_per_s"] > 0 and len(size[c]["walls_s"]) == 1 for c in CORPORA)
        assert templated["reposts_removed"] == 1.0  # real copies among templates are found
        assert templated["near_unchecked"] > size["documents"] // 3  # the Story template's rows
        assert bench["near_unchecked"] == 0 and bench["near_dropped"] > 0
        assert size["templated_no_near"]["near_dropped"] == 0
