"""bench/bench_tasks.py --quick: its JSON summary has every number, and one dataset per size,
for the uncalibrated jobs, the bare loop beside them and the calibrated jobs (structure only,
never timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_tasks.py"
CONFIG_KEYS = {
    "candidates_per_s_wall",
    "over_bare",
    "candidates_per_s_marginal",
    "cpu_s",
    "cpu_over_wall",
    "bare_over_cpu",
    "tree_rss_ratio",
    "process_rss_ratio",
}
RUN_KEYS = {"backend", "workers", "candidates", "wall_s", "generated", "retained", "duplicates"}
RUN_KEYS |= {"rejected", "dataset_id", "tree_rss_mb", "process_rss_mb", "processes", "cpu_s"}
CALIBRATED_KEYS = {"sizes", "target_count", "configs", "process_2_over_1", "probes", "standins"}
CALIBRATED_KEYS |= {"dataset_ids", "same_dataset_id", "load_average", "runs"}
CALIBRATED_CONFIG_KEYS = {"wall_s_small", "wall_s_large", "tree_rss_ratio", "process_rss_ratio"}
CALIBRATED_CONFIG_KEYS |= {"candidates_per_s_small", "candidates_per_s_large"}
CALIBRATED_RUN_KEYS = {"backend", "workers", "candidates", "wall_s", "generated", "retained"}
CALIBRATED_RUN_KEYS |= {"selected", "target_count", "dataset_id", "tree_rss_mb", "processes"}
CALIBRATED_RUN_KEYS |= {"process_rss_mb", "phases"}
PHASE_KEYS = {"generate_s", "files_ask_s", "grade_rank_select_s", "project_s", "publish_s"}
PHASE_KEYS |= {"exit_s", "first_line_s"}


def test_quick_run_summary(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, str(BENCH), "--quick", "--work", str(tmp_path / "jobs")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["sizes"] == {"base": 256, "small": 1000, "large": 3000}
    assert set(summary["configs"]) == {"thread-1", "process-1", "process-2"}
    for numbers in summary["configs"].values():
        assert set(numbers) == CONFIG_KEYS
        # a marginal rate subtracts two short runs' walls: under load it may come out negative
        assert all(v > 0 for k, v in numbers.items() if k != "candidates_per_s_marginal")
        assert isinstance(numbers["candidates_per_s_marginal"], float)
    assert summary["process_2_over_1_wall"] > 0
    assert isinstance(summary["process_2_over_1_marginal"], float)
    runs = summary["runs"]
    bare = summary["bare"]
    assert set(bare) == {"candidates_per_s", "runs"} and bare["candidates_per_s"] > 0
    assert len(bare["runs"]) == 2  # before the jobs and after them
    for loop in bare["runs"]:
        assert set(loop) == {"wall_s", "generated", "retained"}
        assert loop["generated"] == 3000 and loop["wall_s"] > 0
        # the bare loop keeps what the jobs keep: the same recipe, the same deduplication
        assert {loop["retained"]} == {r["retained"] for r in runs if r["candidates"] == 3000}
    assert len(runs) == 9 and all(set(r) == RUN_KEYS for r in runs)
    parts = summary["parts"]
    assert set(parts) == {"worker_s", "coordinator_s", "retained"}
    assert parts["worker_s"] > 0 and parts["coordinator_s"] > 0
    # the coordinator alone admits the worker's shard files as the jobs do
    assert {parts["retained"]} == {r["retained"] for r in runs if r["candidates"] == 3000}
    for run in runs:
        assert run["generated"] == run["candidates"]
        assert run["retained"] + run["duplicates"] + run["rejected"] == run["generated"]
        assert run["tree_rss_mb"] > 0 and run["process_rss_mb"] > 0
        assert run["cpu_s"] > 0
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
    check_calibrated(summary["calibrated"], {r["dataset_id"] for r in runs})


def check_calibrated(calibrated: dict[str, Any], uncalibrated_ids: set[str]) -> None:
    """The calibrated part: every number per backend/workers and size, one dataset per size."""
    assert set(calibrated) == CALIBRATED_KEYS
    assert calibrated["sizes"] == {"small": 1000, "large": 3000}
    assert calibrated["target_count"] == {"1000": 100, "3000": 300}
    assert set(calibrated["configs"]) == {"thread-1", "process-1", "process-2"}
    for numbers in calibrated["configs"].values():
        assert set(numbers) == CALIBRATED_CONFIG_KEYS and all(v > 0 for v in numbers.values())
    assert set(calibrated["process_2_over_1"]) == {"small", "large"}
    assert all(v > 0 for v in calibrated["process_2_over_1"].values())
    assert [p["candidates"] for p in calibrated["probes"]] == [1000, 3000]
    for standin in calibrated["standins"]:
        assert set(standin) == {"candidates", "wall_s", "process_rss_mb", "reports_mb"}
        assert standin["reports_mb"] > 0
    runs = calibrated["runs"]
    assert len(runs) == 6 and all(set(r) == CALIBRATED_RUN_KEYS for r in runs)
    for run in runs:
        assert run["generated"] == run["candidates"]
        assert run["selected"] == run["target_count"] == run["candidates"] // 10
        assert set(run["phases"]) == PHASE_KEYS
        assert all(v >= 0 for v in run["phases"].values())
    ids = {
        size: {r["dataset_id"] for r in runs if r["candidates"] == size} for size in (1000, 3000)
    }
    assert all(len(found) == 1 for found in ids.values()), ids
    assert calibrated["same_dataset_id"] is True
    assert not set.union(*ids.values()) & uncalibrated_ids  # calibrated, other datasets


def test_scale_part_summary(tmp_path: Path) -> None:
    """`--part scale`: per recipe, x bare and cpu/wall for every worker count asked, the bare
    loop keeping what the jobs keep, and one dataset per recipe whatever the worker count."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, str(BENCH), "--part", "scale", "--quick", "--workers", "1,3"]
    cmd += ["--work", str(tmp_path / "jobs")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    scale = json.loads(proc.stdout.strip().splitlines()[-1])["scale"]
    assert scale["workers"] == [1, 3]
    assert set(scale["recipes"]) == {"arithmetic", "burn"}
    assert scale["recipes"]["burn"]["params"] == {"burn_us": 200}
    for recipe in scale["recipes"].values():
        assert len(recipe["over_bare"]) == len(recipe["cpu_over_wall"]) == 2
        assert all(v > 0 for v in recipe["over_bare"] + recipe["cpu_over_wall"])
        assert [r["workers"] for r in recipe["runs"]] == [1, 3]
        assert {r["backend"] for r in recipe["runs"]} == {"process"}
        kept = {r["retained"] for r in recipe["runs"]}
        assert kept == {b["retained"] for b in recipe["bare"]["runs"]}
        assert len(recipe["dataset_ids"]) == 1
    assert scale["same_dataset_id"] is True
    assert "| workers | 1 | 3 |" in proc.stdout
