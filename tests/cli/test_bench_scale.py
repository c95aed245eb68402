"""bench/bench_scale.py --quick: every stage at both sizes on the three backends (the local pool,
a local Ray with a shared root and one sharing nothing), with MB/s and peak RSS, Ray's start-up,
what the object store carried, and the largest-over-smallest ratios per backend (structure only,
never timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_scale.py"
STAGE_KEYS = {"wall_s", "cpu_s", "process_rss_mb", "tree_rss_mb", "mb_per_s"}
BACKENDS = ["local", "ray", "ray-sn"]


def test_quick_run_summary(tmp_path: Path) -> None:
    home = tmp_path / "home"  # Ray must leave no file in the home directory
    home.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HOME": str(home)}
    cmd = [sys.executable, str(BENCH), "--quick", "--work", str(tmp_path / "scale")]
    cmd += ["--backends", ",".join(BACKENDS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["sizes_mb"] == [1.0, 2.0] and summary["backends"] == BACKENDS
    assert len(summary["load_average_before"]) == 3
    runs = summary["runs"]
    assert [(r["mb"], r["backend"]) for r in runs] == [(mb, b) for mb in (1, 2) for b in BACKENDS]
    for run in runs:
        assert set(run["stages"]) == {"fetch", "shard", "tokenize"}
        for stage, numbers in run["stages"].items():
            keys = STAGE_KEYS | ({"dedup_rss_mb", "dedup_s"} if stage == "shard" else set())
            if run["backend"] != "local" and stage != "fetch":
                keys |= {"ray_start_s"}
            if run["backend"] == "ray-sn" and stage != "fetch":
                keys |= {"sent_mb", "received_mb"}  # raw text in, shards and tokens back
                assert numbers["received_mb"] > 0.5 * run["mb"], (stage, numbers)
            assert set(numbers) == keys, (run["backend"], stage)
            assert all(v > 0 for k, v in numbers.items() if k != "dedup_s"), (stage, numbers)
        assert 0 < run["documents_out"] < run["documents"]
        assert run["duplicates"]["exact"] > 0 and run["duplicates"]["near"] > 0
    assert runs[3]["documents"] > runs[0]["documents"] == runs[1]["documents"]
    for local, *ray in (runs[0:3], runs[3:6]):  # the same corpus, the same result
        assert all(local["documents_out"] == r["documents_out"] for r in ray)
        assert all(local["duplicates"] == r["duplicates"] for r in ray)
    for backend in BACKENDS:
        ratios = summary["largest_over_smallest"][backend]
        assert set(ratios) == {"fetch", "shard", "tokenize"}
        shard = {"process_rss_mb", "tree_rss_mb", "dedup_rss_mb", "mb_per_s"}
        assert set(ratios["shard"]) == shard
    assert not list(home.iterdir())
    assert not list((tmp_path / "scale").glob("root-*"))  # data roots removed without --keep
