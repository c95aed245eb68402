"""Task-dataset executor: candidates per second by backend and workers, and peak RSS by pool size.

    .venv/bin/python bench/bench_tasks.py [--small 10000] [--large 100000] [--base 512]
                                          [--work DIR] [--quick]

Writes one arithmetic job config per run into a temp folder (`candidate_count` =
`maximum_per_recipe` = `max_candidates` = N: one batch of N candidates, `target_count: 64`,
`batch_size: 256`) and runs `corpus tasks` as a subprocess, for each of thread/1 worker,
process/1 and process/2 at three sizes: `--base` (start-up: interpreter, imports, spawned
workers, select, projection, snapshot), `--small` and `--large`.

Throughput is generated candidates / wall seconds of the `--large` run ("wall", start-up
included) and, with the `--base` run of the same backend subtracted, (large - base) /
(wall_large - wall_base) ("marginal": per-candidate cost alone).

Memory, two numbers per run: "tree" is the peak of the sum of RSS over the `corpus tasks`
process and all its descendants (the spawned producer and workers), polled from /proc every
`--poll` seconds (a peak shorter than that can be missed; shared library pages are counted once
per process); "process" is the largest single process's peak RSS (`ru_maxrss` from `os.wait4`
on the job process, which covers the descendants it waited for). The ratios are large / small:
the candidate pool lives in SQLite on disk, so they should stay near 1.

Each run's generated / retained / duplicates come from `DIR/dataset/report.json`; the last line
printed is a JSON summary. `--quick` is a smoke run (sizes 256 / 1,000 / 3,000) for a test.
No timing assertions: the numbers are printed, not checked.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIGS = (("thread", 1), ("process", 1), ("process", 2))
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def write_job(path: Path, candidates: int, backend: str, workers: int) -> Path:
    """A job config of one batch of `candidates` arithmetic candidates (JSON is valid YAML)."""
    config = {
        "recipe": "corpus_assets.recipes.arithmetic:create_recipe",
        "target_count": 64,
        "purpose": "harness",
        "seed": 0,
        "params": {"candidate_count": candidates, "maximum_per_recipe": candidates},
        "max_batches": 1,
        "max_candidates": candidates,
        "execution": {"backend": backend, "max_workers": workers, "batch_size": 256},
    }
    path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    return path


def parents() -> dict[int, int]:
    """Every live process's parent pid, from /proc/PID/stat."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        out[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def tree_rss_kb(root: int) -> tuple[int, int]:
    """The summed RSS (KiB) of `root` and its descendants, and how many processes that is."""
    by_parent: dict[int, list[int]] = {}
    for pid, ppid in parents().items():
        by_parent.setdefault(ppid, []).append(pid)
    todo, total, count = [root], 0, 0
    while todo:
        pid = todo.pop()
        todo.extend(by_parent.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
                total += int(fh.read().split()[1]) * PAGE_KB
            count += 1
        except (OSError, IndexError):
            continue
    return total, count


def run_job(work: Path, candidates: int, backend: str, workers: int, poll: float) -> dict[str, Any]:
    """Run one job as a subprocess; its wall time, memory, counts and dataset id."""
    name = f"{backend}{workers}-{candidates}"
    config = write_job(work / f"{name}.yaml", candidates, backend, workers)
    output = work / name
    cmd = [sys.executable, "-m", "corpus_assets.cli", "tasks"]
    cmd += ["--config", str(config), "--output", str(output)]
    out_path, err_path = work / f"{name}.stdout", work / f"{name}.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        pid = subprocess.Popen(cmd, stdout=out, stderr=err).pid  # reaped by os.wait4 below
        peak_kb, most = 0, 0
        while _alive(pid):
            kb, count = tree_rss_kb(pid)
            peak_kb, most = max(peak_kb, kb), max(most, count)
            time.sleep(poll)
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        error = err_path.read_text(encoding="utf-8").strip()
        sys.exit(f"{' '.join(cmd)} exited {code}: {error}")
    result = json.loads(out_path.read_text(encoding="utf-8").strip().splitlines()[-1])
    report = json.loads((output / "dataset" / "report.json").read_text(encoding="utf-8"))
    totals = report["totals"]
    return {
        "backend": backend,
        "workers": workers,
        "candidates": candidates,
        "wall_s": round(wall, 3),
        "generated": totals["generated"],
        "retained": totals["retained"],
        "duplicates": totals["duplicates"],
        "rejected": totals["rejected"],
        "dataset_id": result["dataset_id"],
        "tree_rss_mb": round(peak_kb / 1024, 1),
        "process_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "processes": most,
    }


def _alive(pid: int) -> bool:
    """True while `pid` has not exited (a zombie counts as exited); does not reap it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def summarize(runs: list[dict[str, Any]], sizes: dict[str, int]) -> dict[str, Any]:
    """Per backend/workers: throughput (wall and marginal) and the large / small RSS ratios."""
    by = {(r["backend"], r["workers"], r["candidates"]): r for r in runs}
    configs: dict[str, dict[str, Any]] = {}
    for backend, workers in CONFIGS:
        base, small, large = (by[(backend, workers, sizes[k])] for k in ("base", "small", "large"))
        extra = large["generated"] - base["generated"]
        configs[f"{backend}-{workers}"] = {
            "candidates_per_s_wall": round(large["generated"] / large["wall_s"], 1),
            "candidates_per_s_marginal": round(
                extra / max(large["wall_s"] - base["wall_s"], 1e-9), 1
            ),
            "tree_rss_ratio": round(large["tree_rss_mb"] / small["tree_rss_mb"], 3),
            "process_rss_ratio": round(large["process_rss_mb"] / small["process_rss_mb"], 3),
        }
    one, two = configs["process-1"], configs["process-2"]
    ids = {
        size: sorted({r["dataset_id"] for r in runs if r["candidates"] == size})
        for size in sizes.values()
    }
    return {
        "sizes": sizes,
        "configs": configs,
        "process_2_over_1_wall": round(
            two["candidates_per_s_wall"] / one["candidates_per_s_wall"], 3
        ),
        "process_2_over_1_marginal": round(
            two["candidates_per_s_marginal"] / one["candidates_per_s_marginal"], 3
        ),
        "dataset_ids": {str(size): found for size, found in ids.items()},
        "same_dataset_id": all(len(found) == 1 for found in ids.values()),
        "load_average": list(os.getloadavg()),
        "runs": runs,
    }


def print_table(summary: dict[str, Any]) -> None:
    """The runs, then throughput and memory per backend/workers, then the ratios."""
    print(
        f"{'run':>22}{'wall s':>9}{'gen':>8}{'kept':>8}{'dups':>8}"
        f"{'tree MB':>9}{'proc MB':>9}{'n':>3}"
    )
    for r in summary["runs"]:
        label = f"{r['backend']}/{r['workers']} N={r['candidates']}"
        print(
            f"{label:>22}{r['wall_s']:>9.2f}{r['generated']:>8}{r['retained']:>8}"
            f"{r['duplicates']:>8}{r['tree_rss_mb']:>9.1f}{r['process_rss_mb']:>9.1f}{r['processes']:>3}"
        )
    large, small = summary["sizes"]["large"], summary["sizes"]["small"]
    print(
        f"\n{'':12}{'cand/s wall':>12}{'marginal':>10}"
        f"{f'tree RSS {large}/{small}':>24}{'process':>9}"
    )
    for name, c in summary["configs"].items():
        print(
            f"{name:12}{c['candidates_per_s_wall']:>12.0f}{c['candidates_per_s_marginal']:>10.0f}"
            f"{c['tree_rss_ratio']:>24.3f}{c['process_rss_ratio']:>9.3f}"
        )
    print(
        f"\nprocess 2 workers / 1 worker: {summary['process_2_over_1_wall']:.2f} (wall), "
        f"{summary['process_2_over_1_marginal']:.2f} (marginal); same dataset_id for every "
        f"backend and worker count at each size: {summary['same_dataset_id']}; load average "
        + " ".join(f"{x:.2f}" for x in summary["load_average"])
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", type=int, default=10_000)
    p.add_argument("--large", type=int, default=100_000)
    p.add_argument("--base", type=int, default=512, help="the start-up run's candidates")
    p.add_argument("--poll", type=float, default=0.05, help="seconds between /proc samples")
    p.add_argument("--work", type=Path, help="keep the job folders here (default: a temp dir)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 256 / 1,000 / 3,000")
    args = p.parse_args()
    if args.quick:
        args.base, args.small, args.large = 256, 1_000, 3_000
    sizes = {"base": args.base, "small": args.small, "large": args.large}
    if len(set(sizes.values())) != 3:
        sys.exit(f"--base, --small and --large must differ, got {sizes}")
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        runs = []
        for backend, workers in CONFIGS:
            for size in sizes.values():
                runs.append(run_job(work, size, backend, workers, args.poll))
                print(f"{backend}/{workers} N={size}: {runs[-1]['wall_s']:.2f}s", file=sys.stderr)
    summary = summarize(runs, sizes)
    print_table(summary)
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
