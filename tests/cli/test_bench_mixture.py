"""bench/bench_mixture.py at a tiny size: it builds, mixes and reads in one run and prints the
size, the index build and the reader against the bare memmap loop (structure only, no timings)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_mixture.py"


def test_tiny_run_prints_every_number(tmp_path: Path) -> None:
    cmd = [sys.executable, str(BENCH), "--gb", "0.004", "--seq-len", "256", "--samples", "300"]
    cmd += ["--rounds", "1", "--workers", "1", "--work", str(tmp_path / "mix")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"builds: 3, 0\.004 GB of token files \([\d,]+ tokens", out)
    assert re.search(r"index build: corpus mix --workers 1: [\d.]+ s wall, peak RSS [\d,]+ MB", out)
    for name, share in (("web", "0.5000"), ("code", "0.3000"), ("math", "0.2000")):
        assert f"  {name}: share {share}" in out
    assert "reader: 300 samples of 257 tokens, 1 rounds" in out
    assert re.search(r"MixtureDataset\[i\] +[\d,]+ +[\d,]+ +vs memmap loop [\d.]+ / [\d.]+", out)
    last = json.loads(out.strip().splitlines()[-1])
    assert last["reader_samples"] == 300 and set(last["samples_per_s"]) == {
        "mixture",
        "memmap",
        "views",
    }
    assert last["ratio_best"] > 0 and last["index_build_rss_mb"] > 0
