"""Task-dataset executor: candidates per second by backend and workers against the bare recipe
loop, and peak RSS by pool size.

    .venv/bin/python bench/bench_tasks.py [--small 10000] [--large 100000] [--base 512]
                                          [--work DIR] [--quick] [--part both|plain|calibrated]
    .venv/bin/python bench/bench_tasks.py --part live [--live-latency 0.2] [--live-requests 25]
                                          [--live-rounds 3] [--overhead-requests 1000]
    .venv/bin/python bench/bench_tasks.py --part scale [--workers 1,2,4,8,16]
                                          [--scale-candidates 100000] [--burn-candidates 10000]
                                          [--burn-us 400]

Writes one arithmetic job config per run into a temp folder (`candidate_count` =
`maximum_per_recipe` = `max_candidates` = N: one batch of N candidates, `target_count: 64`,
`batch_size: 256`) and runs `corpus tasks` as a subprocess, for each of thread/1 worker,
process/1 and process/2 at three sizes: `--base` (start-up: interpreter, imports, spawned
workers, select, projection, snapshot), `--small` and `--large`.

Throughput is generated candidates / wall seconds of the `--large` run ("wall", start-up
included) and, with the `--base` run of the same backend subtracted, (large - base) /
(wall_large - wall_base) ("marginal": per-candidate cost alone).

The baseline ("bare"): the same recipe on the same `--large` candidates in one Python loop in
this process, no executor: generate, clean, the canonical JSON line of each cleaned sample and
its sha256, deduplication by task id in a set, then `training_row` of each retained sample. It
runs before the jobs and after them; its candidates/s is the mean of the two (imports and
recipe construction not timed). "x bare" is a job's wall candidates/s divided by it.

Memory, two numbers per run: "tree" is the peak of the sum of RSS over the `corpus tasks`
process and all its descendants (the spawned producer and workers), polled from /proc every
`--poll` seconds (a peak shorter than that can be missed; shared library pages are counted once
per process); "process" is the largest single process's peak RSS (`ru_maxrss` from `os.wait4`
on the job process, which covers the descendants it waited for). The ratios are large / small:
the candidate pool lives in SQLite on disk, so they should stay near 1.

CPU, per run: "cpu s" is the user + system seconds of the `corpus tasks` process and the
descendants it waited for (`os.wait4`), so spawned workers count; "cpu/wall" is how many cores
the run kept busy on average; "bare/cpu" is the bare loop's seconds for the same candidates over
the run's CPU seconds: the "x bare" the run could reach if that CPU were spread over one core
with no idle moment (two cores: twice it). A thread run near cpu/wall 1.0 runs one thread at a
time (the interpreter lock): its "x bare" cannot pass its "bare/cpu".

The executor's two halves alone, in this process on the `--large` candidates, after the jobs
(the summary's "parts"): "worker" generates, cleans, encodes and writes the batch's shard files
in one thread (`shard_chunk`, the configs' `shard_size`), nothing else running; "coordinator"
reads those files back and admits every row into a new checkpoint database a file block at a
time, committing as the executor does (`commit_chunk`, a durable commit at least every
`GROUP_COMMIT_S`), then finishes the batch (`finish_batch`: its check of inputs against
references, and the last commit). Each is the best of two, in seconds, beside the bare loop's
seconds.

Scale mode (`--part scale` only, the summary's "scale" key): for each of `--workers` (worker
counts, by commas), a `backend: process` job of one batch, for two recipes: the arithmetic one
(`--scale-candidates`) and `bench/burn_recipe.py` (`--burn-candidates`), the same tasks with a
`clean` that first burns `--burn-us` microseconds of CPU, a recipe whose per-candidate work is
expensive. Per recipe the bare loop runs before and after the jobs (the mean of the two); per
worker count "x bare" and "cpu/wall" as above, and whether every count published one
`dataset_id`. It prints a Markdown table.

Each run's generated / retained / duplicates come from `DIR/dataset/report.json`.

Calibrated mode (the summary's "calibrated" key; `--part calibrated` runs only it, `--part
plain` only the above): ranking and calibration of N candidates, at `--small` and `--large`.
Per size: the probe job (process/1; seed 12, the calibrated job's recipe params, no
calibration) writes `work/batch-0-public.jsonl`; `examples/tasks/standin_model.py --repeats 2`
writes the two report files from it (timed separately, not part of the calibrated job); then
the calibrated job (`recorded_responses` on those reports, the arithmetic recipe's ranking
hooks; `target_count` = N // 10, `minimum_per_family` = min(16, N // 160), `minimum_one_pass`
= N // 40, `max_batches: 1`, `candidate_count` = `maximum_per_recipe` = `max_candidates` = N)
runs for thread/1, process/1 and process/2 with the same wall / tree / process numbers. Its phase
split comes from the arrival times of its progress lines on stderr: "generate" until the last
`generate` line (start-up included), "files+ask" until the `calibrate` line (batch files, the
calibrator's answers), "grade+sel" until the `select` line (grading, ranking, ranked merge),
"project", "publish", and "exit" (from `published` to the process's exit).

Live mode (`--part live` only, the summary's "live" key): calibration against
`tests/support/openai_server.py` on loopback. For `max_concurrency` 1, 8 and 32, the bare
`openai` async client asks `--live-requests` x max_concurrency prompts (at least 100), at most
that many at once, of a fresh server answering after `--live-latency` seconds; then a
`corpus tasks` job (`tests/tasks/live_recipe.py`, one batch of those tasks, `repeats: 1`,
`live_responses` with that `max_concurrency`, `batch_size` max(64, 2 x max_concurrency),
`max_workers: 2`) asks another fresh one. Its "ask" span runs from its last `generate` progress
line to its `calibrate` line; the server reports the largest and the mean number of requests in
flight. Then the overhead per request: the bare client and the job alternated `--live-rounds`
times at max_concurrency 1 against an instant server, (best ask - best bare) / requests.

The last line printed is a JSON summary. `--quick` is a smoke run (sizes 256 / 1,000 / 3,000)
for a test. No timing assertions: the numbers are printed, not checked.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIGS = (("thread", 1), ("process", 1), ("process", 2))
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


ARITHMETIC = "corpus_assets.recipes.arithmetic:create_recipe"


def write_job(
    path: Path,
    candidates: int,
    backend: str,
    workers: int,
    recipe: str = ARITHMETIC,
    params: dict[str, Any] | None = None,
) -> Path:
    """A job config of one batch of `candidates` arithmetic candidates (JSON is valid YAML);
    `recipe` and `params` name another factory of the same params and its extra ones."""
    config = {
        "recipe": recipe,
        "target_count": 64,
        "purpose": "harness",
        "seed": 0,
        "params": {"candidate_count": candidates, "maximum_per_recipe": candidates}
        | (params or {}),
        "max_batches": 1,
        "max_candidates": candidates,
        "execution": {"backend": backend, "max_workers": workers, "batch_size": 256},
    }
    path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    return path


def bare_loop(
    candidates: int, recipe_ref: str = ARITHMETIC, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The recipe without the executor: seconds and counts of one loop over `candidates`."""
    from corpus_assets.tasks.factory import load_factory
    from corpus_assets.tasks.files import jsonl_line
    from corpus_assets.tasks.types import GenerateContext

    recipe = load_factory(recipe_ref)(
        candidate_count=candidates, maximum_per_recipe=candidates, **(params or {})
    )
    context = GenerateContext(seed=0, batch_index=0, target_count=64, purpose="harness")
    seen: dict[str, str] = {}
    generated = rejected = 0
    start = time.perf_counter()
    for sample in recipe.generate(context):
        generated += 1
        cleaned = recipe.clean(sample)
        if cleaned is None:
            rejected += 1
            continue
        digest = hashlib.sha256(jsonl_line(cleaned.to_json())).hexdigest()
        if cleaned.task_id not in seen:
            seen[cleaned.task_id] = digest
            recipe.training_row(cleaned)
    wall = time.perf_counter() - start
    return {"wall_s": round(wall, 3), "generated": generated, "retained": len(seen)}


def executor_parts(candidates: int, work: Path) -> dict[str, Any]:
    """The worker's and the coordinator's work on `candidates`, each alone (best of two)."""
    from corpus_assets.tasks.checkpoints import Checkpoints
    from corpus_assets.tasks.config import ExecutionSpec
    from corpus_assets.tasks.generation import GROUP_COMMIT_S
    from corpus_assets.tasks.shards import ShardFile
    from corpus_assets.tasks.types import GenerateContext, GenerationShard
    from corpus_assets.tasks.workers import RecipeSpec, ShardOrder, _init_worker, shard_chunk

    params = {"candidate_count": candidates, "maximum_per_recipe": candidates}
    _init_worker(RecipeSpec("corpus_assets.recipes.arithmetic:create_recipe", params), None)
    execution = ExecutionSpec(batch_size=256)
    context = GenerateContext(seed=0, batch_index=0, target_count=64, purpose="harness")
    folder = work / "parts"
    folder.mkdir(exist_ok=True)
    files = [
        ShardFile(
            folder, 0, index, GenerationShard(start, min(start + execution.shard_size, candidates))
        )
        for index, start in enumerate(range(0, candidates, execution.shard_size))
    ]

    def worker() -> float:
        start = time.perf_counter()
        for file in files:
            shard_chunk(ShardOrder(context, file))
        return time.perf_counter() - start

    def coordinator() -> tuple[float, int]:
        path = folder / f"pool-{time.monotonic_ns()}.sqlite"
        start = time.perf_counter()
        ckpt = Checkpoints(path)
        consumed = 0
        for file in files:
            for block in file.read():  # as `BatchGeneration._import_shard` commits a shard
                consumed += block.size
                due = time.monotonic() - ckpt.flushed_at >= GROUP_COMMIT_S
                ckpt.commit_chunk(0, consumed, block, durable=due)
        ckpt.finish_batch(0, consumed, False)  # the batch's check of inputs, and its end
        retained = int(ckpt.db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0])
        ckpt.close()
        return time.perf_counter() - start, retained

    worker_s = min(worker() for _ in range(2))
    coordinated = [coordinator() for _ in range(2)]
    return {
        "worker_s": round(worker_s, 3),
        "coordinator_s": round(min(s for s, _ in coordinated), 3),
        "retained": coordinated[0][1],
    }


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


def measure(cmd: list[str], work: Path, name: str, poll: float) -> dict[str, Any]:
    """Run `cmd` as a subprocess: wall seconds, peak tree / process RSS, and its stderr lines
    with the seconds (from the start) at which each arrived; exit on a non-zero status."""
    out_path, err_path = work / f"{name}.stdout", work / f"{name}.stderr"
    lines: list[tuple[float, str]] = []
    with open(out_path, "wb") as out, open(err_path, "w", encoding="utf-8") as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
        pid = child.pid  # reaped by os.wait4 below
        reader = threading.Thread(target=_read_lines, args=(child, start, lines, err))
        reader.start()
        peak_kb, most = 0, 0
        while _alive(pid):
            kb, count = tree_rss_kb(pid)
            peak_kb, most = max(peak_kb, kb), max(most, count)
            time.sleep(poll)
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
        reader.join(timeout=60)
    if child.returncode != 0:
        error = err_path.read_text(encoding="utf-8").strip()
        sys.exit(f"{' '.join(cmd)} exited {child.returncode}: {error}")
    return {
        "wall_s": wall,
        "tree_rss_mb": round(peak_kb / 1024, 1),
        "process_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "processes": most,
        "stdout": out_path.read_text(encoding="utf-8"),
        "lines": lines,
    }


def _read_lines(
    child: subprocess.Popen[str], start: float, lines: list[tuple[float, str]], copy: Any
) -> None:
    """Each stderr line of `child` with its arrival time, also copied to the file `copy`."""
    assert child.stderr is not None
    for line in child.stderr:
        lines.append((time.perf_counter() - start, line.rstrip("\n")))
        copy.write(line)


def tasks_cmd(config: Path, output: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "corpus_assets.cli",
        "tasks",
        "--config",
        str(config),
        "--output",
        str(output),
    ]


def run_job(
    work: Path,
    candidates: int,
    backend: str,
    workers: int,
    poll: float,
    recipe: str = ARITHMETIC,
    params: dict[str, Any] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Run one job as a subprocess; its wall time, memory, counts and dataset id."""
    name = name or f"{backend}{workers}-{candidates}"
    config = write_job(work / f"{name}.yaml", candidates, backend, workers, recipe, params)
    output = work / name
    m = measure(tasks_cmd(config, output), work, name, poll)
    result = json.loads(m["stdout"].strip().splitlines()[-1])
    report = json.loads((output / "dataset" / "report.json").read_text(encoding="utf-8"))
    totals = report["totals"]
    return {
        "backend": backend,
        "workers": workers,
        "candidates": candidates,
        "wall_s": round(m["wall_s"], 3),
        "cpu_s": m["cpu_s"],
        "generated": totals["generated"],
        "retained": totals["retained"],
        "duplicates": totals["duplicates"],
        "rejected": totals["rejected"],
        "dataset_id": result["dataset_id"],
        "tree_rss_mb": m["tree_rss_mb"],
        "process_rss_mb": m["process_rss_mb"],
        "processes": m["processes"],
    }


def _alive(pid: int) -> bool:
    """True while `pid` has not exited (a zombie counts as exited); does not reap it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def summarize(
    runs: list[dict[str, Any]], sizes: dict[str, int], bare: list[dict[str, Any]]
) -> dict[str, Any]:
    """Per backend/workers: throughput (wall and marginal), the wall throughput over the bare
    loop's, the CPU of the large run against its wall time and the bare loop's, and the large /
    small RSS ratios."""
    by = {(r["backend"], r["workers"], r["candidates"]): r for r in runs}
    bare_rate = sum(b["generated"] / b["wall_s"] for b in bare) / len(bare)
    configs: dict[str, dict[str, Any]] = {}
    for backend, workers in CONFIGS:
        base, small, large = (by[(backend, workers, sizes[k])] for k in ("base", "small", "large"))
        extra = large["generated"] - base["generated"]
        configs[f"{backend}-{workers}"] = {
            "candidates_per_s_wall": round(large["generated"] / large["wall_s"], 1),
            "over_bare": round(large["generated"] / large["wall_s"] / bare_rate, 3),
            "candidates_per_s_marginal": round(
                extra / max(large["wall_s"] - base["wall_s"], 1e-9), 1
            ),
            "cpu_s": large["cpu_s"],
            "cpu_over_wall": round(large["cpu_s"] / large["wall_s"], 3),
            "bare_over_cpu": round(large["generated"] / bare_rate / large["cpu_s"], 3),
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
        "bare": {"candidates_per_s": round(bare_rate, 1), "runs": bare},
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
    bare = summary["bare"]
    walls = ", ".join(f"{b['wall_s']:.2f}s" for b in bare["runs"])
    print(
        f"\nbare loop N={large}: {bare['candidates_per_s']:.0f} candidates/s (mean of {walls}; "
        f"{bare['runs'][0]['retained']} retained)"
    )
    print(
        f"\n{'':12}{'cand/s wall':>12}{'x bare':>8}{'marginal':>10}{'cpu s':>8}{'cpu/wall':>10}"
        f"{'bare/cpu':>10}{f'tree RSS {large}/{small}':>24}{'process':>9}"
    )
    for name, c in summary["configs"].items():
        print(
            f"{name:12}{c['candidates_per_s_wall']:>12.0f}{c['over_bare']:>8.2f}"
            f"{c['candidates_per_s_marginal']:>10.0f}{c['cpu_s']:>8.2f}{c['cpu_over_wall']:>10.2f}"
            f"{c['bare_over_cpu']:>10.2f}{c['tree_rss_ratio']:>24.3f}{c['process_rss_ratio']:>9.3f}"
        )
    print(
        f"\nprocess 2 workers / 1 worker: {summary['process_2_over_1_wall']:.2f} (wall), "
        f"{summary['process_2_over_1_marginal']:.2f} (marginal); same dataset_id for every "
        f"backend and worker count at each size: {summary['same_dataset_id']}; load average "
        + " ".join(f"{x:.2f}" for x in summary["load_average"])
    )
    parts, walls = summary["parts"], [b["wall_s"] for b in bare["runs"]]
    print(
        f"alone, N={large}: worker {parts['worker_s']:.2f}s, coordinator "
        f"{parts['coordinator_s']:.2f}s, bare loop {min(walls):.2f}-{max(walls):.2f}s"
    )


# -- calibrated mode ----------------------------------------------------------------------

CALIBRATED_CONFIGS = (("thread", 1), ("process", 1), ("process", 2))
STANDIN = REPO / "examples" / "tasks" / "standin_model.py"
IDENTITY = {
    "model_ref": "standin-model-v1",
    "harness_ref": "standin-harness-v1",
    "backend_model_digest": "sha256:" + "0" * 64,
    "verifier_digest": "boxed-verifier-v1",
}
CALIBRATED_SEED = 12
TARGET_FRACTION = 10  # target_count = N // 10
# at most 16: the counting streams saturate (83 distinct tasks in all), so a minimum growing
# with N fails at 100k (N // 400 = 250 asked, 59 eligible); at most target_count // 16, so the
# eight families' minimums fill at most half the target (quick sizes)
MINIMUM_PER_FAMILY = 16
PROGRESS = re.compile(r"tasks: (\w+)")
# (key, progress phase, which of its lines, column label): each span runs from the previous
# span's end to that progress line's arrival on stderr; "exit_s" from the last to the exit
SPANS = (
    ("generate_s", "generate", -1, "generate"),  # start-up, generation, cleaning, admission
    ("files_ask_s", "calibrate", 0, "files+ask"),  # batch files; recorded_responses answers
    ("grade_rank_select_s", "select", 0, "grade+sel"),  # grading, ranking, ranked merge
    ("project_s", "project", -1, "project"),
    ("publish_s", "published", 0, "publish"),
)


def calibrated_config(
    candidates: int, backend: str, workers: int, reports: list[Path] | None
) -> dict[str, Any]:
    """The calibrated job of N candidates (`reports`: one batch's report per repeat), or with
    `reports=None` its probe: same recipe, seed and params, no calibration."""
    config: dict[str, Any] = {
        "recipe": "corpus_assets.recipes.arithmetic:create_recipe",
        "target_count": candidates // TARGET_FRACTION,
        "purpose": "model",
        "seed": CALIBRATED_SEED,
        "params": {
            "candidate_count": candidates,
            "maximum_per_recipe": candidates,
            "minimum_per_family": min(MINIMUM_PER_FAMILY, candidates // TARGET_FRACTION // 16),
            "minimum_one_pass": max(1, candidates // 40),
        },
        "max_batches": 1,
        "max_candidates": candidates,
        "execution": {"backend": backend, "max_workers": workers, "batch_size": 256},
    }
    if reports is not None:
        config["calibration"] = {
            "implementation": "corpus_assets.recipes.arithmetic_calibration:recorded_responses",
            "repeats": len(reports),
            "params": {**IDENTITY, "reports": [[str(r) for r in reports]]},
        }
    return config


def phase_split(lines: list[tuple[float, str]], wall: float) -> dict[str, float]:
    """Seconds per span of the job, from the arrival times of its progress lines on stderr."""
    marks: dict[str, list[float]] = {}
    for at, line in lines:
        if match := PROGRESS.match(line):
            marks.setdefault(match.group(1), []).append(at)
    split, previous = {}, 0.0
    for key, phase, which, _ in SPANS:
        end = marks[phase][which] if phase in marks else previous
        split[key] = round(end - previous, 3)
        previous = end
    # the reader thread may stamp the last line after os.wait4 returned: never below 0
    split["exit_s"] = round(max(wall - previous, 0.0), 3)
    split["first_line_s"] = round(marks.get("generate", [wall])[0], 3)
    return split


def run_calibrated_size(
    work: Path, candidates: int, poll: float
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Probe job, stand-in reports, then the calibrated job per backend/workers, at size N."""
    probe_out = work / f"probe-{candidates}"
    probe_cfg = work / f"probe-{candidates}.yaml"
    config = calibrated_config(candidates, "process", 1, None)
    probe_cfg.write_text(json.dumps(config, indent=1), encoding="utf-8")
    m = measure(tasks_cmd(probe_cfg, probe_out), work, probe_out.name, poll)
    probe = {"candidates": candidates, "wall_s": round(m["wall_s"], 3)}
    print(f"probe N={candidates}: {m['wall_s']:.2f}s", file=sys.stderr)

    reports_dir = work / f"reports-{candidates}"
    cmd = [sys.executable, str(STANDIN), str(probe_out), str(reports_dir), "--repeats", "2"]
    for key, value in IDENTITY.items():
        cmd += [f"--{key.replace('_', '-')}", value]
    m = measure(cmd, work, reports_dir.name, poll)
    reports = sorted(reports_dir.glob("batch-0-repeat-*.json"))
    standin = {
        "candidates": candidates,
        "wall_s": round(m["wall_s"], 3),
        "process_rss_mb": m["process_rss_mb"],
        "reports_mb": round(sum(r.stat().st_size for r in reports) / 2**20, 1),
    }
    print(f"stand-in N={candidates}: {m['wall_s']:.2f}s", file=sys.stderr)

    runs = []
    for backend, workers in CALIBRATED_CONFIGS:
        name = f"calibrated-{backend}{workers}-{candidates}"
        config = calibrated_config(candidates, backend, workers, reports)
        (work / f"{name}.yaml").write_text(json.dumps(config, indent=1), encoding="utf-8")
        m = measure(tasks_cmd(work / f"{name}.yaml", work / name), work, name, poll)
        result = json.loads(m["stdout"].strip().splitlines()[-1])
        report = json.loads((work / name / "dataset" / "report.json").read_text("utf-8"))
        progress = json.loads((work / name / "progress.json").read_text("utf-8"))
        runs.append(
            {
                "backend": backend,
                "workers": workers,
                "candidates": candidates,
                "wall_s": round(m["wall_s"], 3),
                "generated": report["totals"]["generated"],
                "retained": report["totals"]["retained"],
                "selected": progress["projected"],
                "target_count": config["target_count"],
                "dataset_id": result["dataset_id"],
                "tree_rss_mb": m["tree_rss_mb"],
                "process_rss_mb": m["process_rss_mb"],
                "processes": m["processes"],
                "phases": phase_split(m["lines"], m["wall_s"]),
            }
        )
        print(f"calibrated {backend}/{workers} N={candidates}: {m['wall_s']:.2f}s", file=sys.stderr)
    return probe, standin, runs


def summarize_calibrated(
    probes: list[dict[str, Any]],
    standins: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    sizes: dict[str, int],
) -> dict[str, Any]:
    """Per backend/workers: wall and candidates/s at each size, RSS large / small; 2 vs 1."""
    by = {(r["backend"], r["workers"], r["candidates"]): r for r in runs}
    configs: dict[str, dict[str, Any]] = {}
    for backend, workers in CALIBRATED_CONFIGS:
        small, large = (by[(backend, workers, sizes[k])] for k in ("small", "large"))
        configs[f"{backend}-{workers}"] = {
            "wall_s_small": small["wall_s"],
            "wall_s_large": large["wall_s"],
            "candidates_per_s_small": round(small["candidates"] / small["wall_s"], 1),
            "candidates_per_s_large": round(large["candidates"] / large["wall_s"], 1),
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
        "target_count": {str(n): n // TARGET_FRACTION for n in sizes.values()},
        "configs": configs,
        "process_2_over_1": {
            key: round(two[f"candidates_per_s_{key}"] / one[f"candidates_per_s_{key}"], 3)
            for key in ("small", "large")
        },
        "probes": probes,
        "standins": standins,
        "dataset_ids": {str(size): found for size, found in ids.items()},
        "same_dataset_id": all(len(found) == 1 for found in ids.values()),
        "load_average": list(os.getloadavg()),
        "runs": runs,
    }


def print_calibrated(summary: dict[str, Any]) -> None:
    """The calibrated runs with their phase split, then per backend/workers, then 2 vs 1."""
    print("\ncalibrated (recorded_responses, ranked selection, one batch of N):")
    for p, s in zip(summary["probes"], summary["standins"], strict=True):
        print(
            f"  N={p['candidates']}: probe job {p['wall_s']:.2f}s, stand-in reports "
            f"{s['wall_s']:.2f}s ({s['reports_mb']:.1f} MB, {s['process_rss_mb']:.1f} MB RSS)"
        )
    spans = [key for key, _, _, _ in SPANS] + ["exit_s"]
    heads = "".join(f"{label:>10}" for *_, label in SPANS) + f"{'exit':>10}"
    print(
        f"{'run':>22}{'wall s':>8}{'cand/s':>8}{'kept':>7}{'sel':>7}"
        f"{'tree MB':>9}{'proc MB':>9}{heads}"
    )
    for r in summary["runs"]:
        label = f"{r['backend']}/{r['workers']} N={r['candidates']}"
        cells = "".join(f"{r['phases'][k]:>10.2f}" for k in spans)
        print(
            f"{label:>22}{r['wall_s']:>8.2f}{r['candidates'] / r['wall_s']:>8.0f}{r['retained']:>7}"
            f"{r['selected']:>7}{r['tree_rss_mb']:>9.1f}{r['process_rss_mb']:>9.1f}{cells}"
        )
    large, small = summary["sizes"]["large"], summary["sizes"]["small"]
    print(
        f"\n{'':12}{f'cand/s {small}':>14}{large:>8}{f'tree RSS {large}/{small}':>24}{'process':>9}"
    )
    for name, c in summary["configs"].items():
        print(
            f"{name:12}{c['candidates_per_s_small']:>14.0f}{c['candidates_per_s_large']:>8.0f}"
            f"{c['tree_rss_ratio']:>24.3f}{c['process_rss_ratio']:>9.3f}"
        )
    ratio = summary["process_2_over_1"]
    print(
        f"\ncalibrated process 2 workers / 1 worker: {ratio['small']:.2f} (N={small}), "
        f"{ratio['large']:.2f} (N={large}); same dataset_id for every backend and worker count "
        f"at each size: {summary['same_dataset_id']}"
    )


# -- scaling with worker processes (`--part scale`) ------------------------------------------

BURN = "burn_recipe:create"  # bench/burn_recipe.py: arithmetic, `clean` burning burn_us of CPU


def run_scale(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Per recipe (arithmetic, and the burning one), the bare loop before and after `process`
    jobs of one batch at each of `--workers`; x bare and cpu/wall per worker count."""
    counts = [int(w) for w in args.workers.split(",")]
    recipes = (
        ("arithmetic", ARITHMETIC, {}, args.scale_candidates),
        ("burn", BURN, {"burn_us": args.burn_us}, args.burn_candidates),
    )
    environ = os.environ.copy()  # the jobs and their workers import burn_recipe from bench/
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(Path(__file__).parent)])
    load = os.getloadavg()[0]
    out: dict[str, Any] = {"workers": counts, "recipes": {}}
    try:
        for name, ref, params, candidates in recipes:
            bare = [bare_loop(candidates, ref, params)]
            runs = []
            for workers in counts:
                run = run_job(
                    work, candidates, "process", workers, args.poll, ref, params,
                    name=f"scale-{name}-{workers}",
                )  # fmt: skip
                runs.append(run)
                print(f"scale {name} process/{workers}: {run['wall_s']:.2f}s", file=sys.stderr)
            bare.append(bare_loop(candidates, ref, params))
            rate = sum(b["generated"] / b["wall_s"] for b in bare) / len(bare)
            out["recipes"][name] = {
                "candidates": candidates,
                "params": params,
                "bare": {"candidates_per_s": round(rate, 1), "runs": bare},
                "over_bare": [round(r["generated"] / r["wall_s"] / rate, 3) for r in runs],
                "cpu_over_wall": [round(r["cpu_s"] / r["wall_s"], 3) for r in runs],
                "dataset_ids": sorted({r["dataset_id"] for r in runs}),
                "runs": runs,
            }
    finally:
        os.environ.clear()
        os.environ.update(environ)
    out["same_dataset_id"] = all(len(r["dataset_ids"]) == 1 for r in out["recipes"].values())
    out["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    return out


def print_scale(summary: dict[str, Any]) -> None:
    """The table of x bare and cpu/wall per worker count, one pair of rows per recipe."""
    counts = summary["workers"]
    print(f"\nscale (backend process, one batch; load {summary['load_average']}):")
    print("| workers | " + " | ".join(str(w) for w in counts) + " |")
    print("|---" * (len(counts) + 1) + "|")
    for name, r in summary["recipes"].items():
        what = (
            f"{name}, {r['candidates']:,} candidates, bare {r['bare']['candidates_per_s']:,.0f}/s"
        )
        for key, label in (("over_bare", "x bare"), ("cpu_over_wall", "cpu/wall")):
            cells = " | ".join(f"{v:.2f}" for v in r[key])
            print(f"| {label}, {what} | {cells} |")
    print(f"same dataset_id at every worker count, per recipe: {summary['same_dataset_id']}")


# -- live calibration against the test model server (`--part live`) -------------------------

LIVE_CONCURRENCY = (1, 8, 32)
MODEL_SERVER = REPO / "tests" / "support" / "openai_server.py"
LIVE_RECIPES = REPO / "tests" / "tasks"  # live_recipe.py: sums the test server answers
LIVE = "corpus_assets.calibrators.openai:live_responses"


def start_model_server(latency: float) -> tuple[subprocess.Popen[bytes], str]:
    """The test server on a free loopback port; its root URL once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [sys.executable, str(MODEL_SERVER), "--port", str(port), "--latency", str(latency)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            server_stats(root)
            return proc, root
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                sys.exit(f"the test model server did not start on port {port}")
            time.sleep(0.05)


def server_stats(root: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{root}/stats", timeout=10) as answer:
        doc: dict[str, Any] = json.load(answer)
    return doc


def live_prompts(requests: int) -> list[str]:
    """What `live_recipe:make` asks for `requests` tasks of mode `right`, one batch."""
    return [f"b0-{i:02d}: {i} + 7 = ? [right]" for i in range(requests)]


def bare_client(root: str, requests: int, concurrency: int) -> float:
    """Seconds for the `openai` client alone to ask the same requests, `concurrency` at once."""
    import openai  # only the live part needs it

    async def ask_all() -> float:
        client = openai.AsyncOpenAI(base_url=f"{root}/v1", api_key="EMPTY", max_retries=0)
        limit = asyncio.Semaphore(concurrency)

        async def one(prompt: str) -> None:
            async with limit:
                await client.chat.completions.create(
                    model="test-model", messages=[{"role": "user", "content": prompt}], n=1
                )

        await client.models.list()  # the connection is made before the clock starts
        start = time.perf_counter()
        await asyncio.gather(*(one(p) for p in live_prompts(requests)))
        wall = time.perf_counter() - start
        await client.close()
        return wall

    return asyncio.run(ask_all())


def live_config(root: str, requests: int, concurrency: int) -> dict[str, Any]:
    """One batch of `requests` tasks calibrated once each against the server at `root`."""
    return {
        "recipe": "live_recipe:make",
        "target_count": 16,
        "purpose": "model",
        "params": {"batches": [["right"] * requests]},
        "calibration": {
            "implementation": LIVE,
            "repeats": 1,
            "params": {
                "base_url": f"{root}/v1",
                "model": "test-model",
                "harness_ref": "bench",
                "verifier_digest": "bench",
                "max_concurrency": concurrency,
            },
        },
        # calls of at least 2 x max_concurrency tasks, two at a time: no call end starves it
        "execution": {"batch_size": max(64, 2 * concurrency), "max_workers": 2},
    }


def live_pair(
    work: Path, name: str, requests: int, concurrency: int, latency: float, poll: float
) -> dict[str, Any]:
    """The bare client, then a job, each against a fresh server: one run's numbers."""
    proc, root = start_model_server(latency)
    try:
        bare_s = bare_client(root, requests, concurrency)
        bare = (bare_s, server_stats(root)["mean_in_flight"])
    finally:
        proc.terminate()
        proc.wait()
    proc, root = start_model_server(latency)
    try:
        config = work / f"{name}.json"
        config.write_text(json.dumps(live_config(root, requests, concurrency)), "utf-8")
        m = measure(tasks_cmd(config, work / name), work, name, poll)
        stats = server_stats(root)
    finally:
        proc.terminate()
        proc.wait()
    return live_run(concurrency, requests, bare, m, stats)


def run_live(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Throughput and requests in flight per max_concurrency against a server that takes
    `--live-latency` per answer (`--live-requests` x max_concurrency requests, at least 100);
    then the overhead per request at max_concurrency 1 against an instant server, best of
    `--live-rounds` rounds of the bare client and the job."""
    environ = os.environ.copy()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(LIVE_RECIPES)])
    load = os.getloadavg()[0]
    try:
        runs = []
        for c in LIVE_CONCURRENCY:
            requests = max(100, args.live_requests * c)
            runs.append(live_pair(work, f"live-{c}", requests, c, args.live_latency, args.poll))
            print(f"live c={c}: {runs[-1]['ask_s']:.2f}s", file=sys.stderr)
        rounds = []
        for r in range(args.live_rounds):
            rounds.append(live_pair(work, f"overhead-{r}", args.overhead_requests, 1, 0.0, 0.05))
            print(f"overhead round {r}: {rounds[-1]['ask_s']:.2f}s", file=sys.stderr)
    finally:
        os.environ.clear()
        os.environ.update(environ)
    n = args.overhead_requests
    bare_s, ask_s = min(r["bare_s"] for r in rounds), min(r["ask_s"] for r in rounds)
    overhead = {
        "requests": n,
        "bare_s": [r["bare_s"] for r in rounds],
        "ask_s": [r["ask_s"] for r in rounds],
        "ms_per_request": round((ask_s - bare_s) / n * 1000, 3),
    }
    loads = [round(load, 2), round(os.getloadavg()[0], 2)]
    return {"latency_s": args.live_latency, "load_average": loads, "runs": runs,
            "overhead": overhead}  # fmt: skip


def live_run(
    concurrency: int,
    requests: int,
    bare: tuple[float, float],
    m: dict[str, Any],
    stats: dict[str, Any],
) -> dict[str, Any]:
    """One live run's numbers: the ask span runs from the last `generate` progress line (the
    batch generated and admitted) to the `calibrate` line (every response committed)."""
    marks: dict[str, list[float]] = {}
    for at, line in m["lines"]:
        if match := PROGRESS.match(line):
            marks.setdefault(match.group(1), []).append(at)
    ask_s = marks["calibrate"][0] - marks["generate"][-1]
    bare_s, bare_in_flight = bare
    if stats["chat"] != requests:
        sys.exit(f"live c={concurrency}: the server got {stats['chat']} requests, not {requests}")
    return {
        "concurrency": concurrency,
        "requests": requests,
        "bare_s": round(bare_s, 3),
        "bare_requests_per_s": round(requests / bare_s, 1),
        "ask_s": round(ask_s, 3),
        "requests_per_s": round(requests / ask_s, 1),
        "overhead_ms_per_request": round((ask_s - bare_s) / requests * 1000, 3),
        "max_in_flight": stats["max_in_flight"],
        "mean_in_flight": round(stats["mean_in_flight"], 2),
        "bare_mean_in_flight": round(bare_in_flight, 2),
        "wall_s": round(m["wall_s"], 3),
    }


def print_live(summary: dict[str, Any]) -> None:
    print(
        f"\nlive (test server, {summary['latency_s'] * 1000:.0f} ms per answer, "
        f"load {summary['load_average']}):"
    )
    print("| max_concurrency | requests | bare client req/s | calibrator req/s | "
          "max in flight | mean in flight (bare) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for run in summary["runs"]:
        print(
            f"| {run['concurrency']} | {run['requests']} | {run['bare_requests_per_s']:,.0f} | "
            f"{run['requests_per_s']:,.0f} | {run['max_in_flight']} | "
            f"{run['mean_in_flight']:.1f} ({run['bare_mean_in_flight']:.1f}) |"
        )
    o = summary["overhead"]
    print(
        f"overhead at max_concurrency 1, instant server, {o['requests']} requests: "
        f"{o['ms_per_request']:.3f} ms per request (best of bare {o['bare_s']} s, "
        f"job ask {o['ask_s']} s)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", type=int, default=10_000)
    p.add_argument("--large", type=int, default=100_000)
    p.add_argument("--base", type=int, default=512, help="the start-up run's candidates")
    p.add_argument("--poll", type=float, default=0.05, help="seconds between /proc samples")
    p.add_argument("--work", type=Path, help="keep the job folders here (default: a temp dir)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 256 / 1,000 / 3,000")
    p.add_argument(
        "--part",
        choices=("both", "plain", "calibrated", "live", "scale"),
        default="both",
        help="the uncalibrated jobs, the calibrated ones, or both (default); or live "
        "calibration; or scaling with worker processes",
    )
    p.add_argument("--workers", default="1,2,4,8,16", help="scale: worker counts, by commas")
    p.add_argument("--scale-candidates", type=int, default=100_000, help="scale: arithmetic")
    p.add_argument("--burn-candidates", type=int, default=10_000, help="scale: burning recipe")
    p.add_argument("--burn-us", type=int, default=400, help="scale: CPU us burnt per clean")
    p.add_argument("--live-requests", type=int, default=25, help="live requests per slot")
    p.add_argument("--live-latency", type=float, default=0.2, help="seconds per test answer")
    p.add_argument("--live-rounds", type=int, default=3, help="overhead rounds (best of)")
    p.add_argument("--overhead-requests", type=int, default=1000)
    args = p.parse_args()
    if args.quick:
        args.base, args.small, args.large = 256, 1_000, 3_000
        args.scale_candidates, args.burn_candidates, args.burn_us = 3_000, 300, 200
    sizes = {"base": args.base, "small": args.small, "large": args.large}
    if len(set(sizes.values())) != 3:
        sys.exit(f"--base, --small and --large must differ, got {sizes}")
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.part in ("both", "plain"):
            runs, bare = [], [bare_loop(args.large)]
            print(f"bare N={args.large}: {bare[-1]['wall_s']:.2f}s", file=sys.stderr)
            for backend, workers in CONFIGS:
                for size in sizes.values():
                    runs.append(run_job(work, size, backend, workers, args.poll))
                    print(
                        f"{backend}/{workers} N={size}: {runs[-1]['wall_s']:.2f}s", file=sys.stderr
                    )
            bare.append(bare_loop(args.large))
            print(f"bare N={args.large}: {bare[-1]['wall_s']:.2f}s", file=sys.stderr)
            summary = summarize(runs, sizes, bare)
            summary["parts"] = executor_parts(args.large, work)
            print_table(summary)
        if args.part in ("both", "calibrated"):
            probes, standins, cal_runs = [], [], []
            for size in (args.small, args.large):
                probe, standin, found = run_calibrated_size(work, size, args.poll)
                probes.append(probe)
                standins.append(standin)
                cal_runs += found
            cal_sizes = {"small": args.small, "large": args.large}
            summary["calibrated"] = summarize_calibrated(probes, standins, cal_runs, cal_sizes)
            print_calibrated(summary["calibrated"])
        if args.part == "live":
            summary["live"] = run_live(work, args)
            print_live(summary["live"])
        if args.part == "scale":
            summary["scale"] = run_scale(work, args)
            print_scale(summary["scale"])
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
