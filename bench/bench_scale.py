"""Fetch, shard and tokenize on corpora of two sizes, side by side: MB/s and peak RSS per stage.

    python bench/bench_scale.py [--sizes 100,1000] [--workers 2] [--backends local,ray]
                                [--work /tmp/bench-scale] [--quick] [--keep]

For each size (MB) the corpus is generated once by bench/make_corpus.py (seed 0; kept under
--work and reused), then each stage runs as its own `corpus run --stage S` subprocess on a fresh
data root, in order fetch, shard, tokenize (tokenizer `bytes`). Per stage: wall seconds
(interpreter start-up included), MB/s = corpus text MB / wall, CPU seconds of the stage and its
workers, and memory, polled from /proc every 20 ms: "process" is the stage process's own peak
(VmHWM), "tree" the peak of the RSS summed over it and its workers; for the shard stage,
"dedup" is the stage process's RSS during its dedup phase (between its "deduplicating" and
"duplicates:" progress lines). Then the ratios of the largest size to the smallest. The
summary is one JSON line on stdout (last line); a table goes to stderr.

`--backends` names the executors of the stages' tasks, each run on every size, side by side:
`local` (the process pool, the default), `ray` (`corpus run --backend ray`: each stage starts
a local Ray with `--workers` CPUs and stops it, start-up included in its wall time; Ray's own
processes are children of the stage, so "tree" counts them) and `ray-sn` (the same with
`--ray-shared-root no`: shared nothing, each task's inputs and files through Ray's object
store). For the Ray backends a stage also reports `ray_start_s` (from its start to its "running
tasks on" line) and, shared nothing, `sent_mb` / `received_mb` (what the object store carried).
`--quick` runs 1 and 2 MB (the test of this script).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MAKE_CORPUS = REPO / "bench" / "make_corpus.py"
STAGES = ("fetch", "shard", "tokenize")
BACKENDS = ("local", "ray", "ray-sn")
BACKEND_ARGS = {
    "local": [],
    "ray": ["--backend", "ray"],
    "ray-sn": ["--backend", "ray", "--ray-shared-root", "no"],
}
CARRIED = re.compile(r"carried ([\d,.]+) MB of inputs to tasks, ([\d,.]+) MB of files back")
POLL_S = 0.02
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def make_corpus(work: Path, mb: float, seed: int) -> tuple[Path, dict[str, Any]]:
    """The corpus of `mb` MB under `work` (generated once); its path and make_corpus summary."""
    data = work / f"corpus-{mb:g}mb-s{seed}"
    if not (data / "truth.json").exists():
        cmd = [sys.executable, str(MAKE_CORPUS), "--out", str(data), "--mb", str(mb)]
        proc = subprocess.run([*cmd, "--seed", str(seed)], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr}")
    with open(data / "truth.json", encoding="utf-8") as fh:
        truth = json.load(fh)
    return data, {"documents": truth["documents"], "bytes": truth["bytes"]}


def write_config(path: Path, data: Path) -> Path:
    path.write_text(
        'dataset = "scale"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
        f'[[sources]]\nname = "bench"\nkind = "jsonl"\npath = "{data}/part-*.jsonl"\n'
        'id_field = "id"\nlicense = "cdla-sharing-1.0"\n',
        encoding="utf-8",
    )
    return path


def _children() -> dict[int, list[int]]:
    """Every live process's children, from /proc/PID/stat."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(entry))
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _tree_kb(root: int) -> int:
    kids, todo, total = _children(), [root], 0
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, []))
        total += _rss_kb(pid)
    return total


def run_stage(cmd: list[str], log: Path) -> dict[str, Any]:
    """Run one stage subprocess; its wall and CPU seconds, peak RSS, and dedup-phase RSS."""
    marks: dict[str, float] = {}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w", encoding="utf-8") as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out: list[str] = []
        threads = [
            threading.Thread(target=_lines, args=(child.stderr, err, marks, start)),
            threading.Thread(target=lambda: out.append(child.stdout.read())),  # type: ignore[union-attr]
        ]
        for t in threads:
            t.start()
        hwm = tree = dedup = 0
        while child.poll() is None:
            hwm = max(hwm, _hwm_kb(child.pid))
            tree = max(tree, _tree_kb(child.pid))
            if "dedup_start" in marks and ("dedup_end" not in marks or not dedup):
                dedup = max(dedup, _rss_kb(child.pid))  # at least one sample, however short
            time.sleep(POLL_S)
        wall = time.perf_counter() - start
        for t in threads:
            t.join(timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if child.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {child.returncode}: {log.read_text(encoding='utf-8')}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "process_rss_mb": round(hwm / 1024, 1),
        "tree_rss_mb": round(tree / 1024, 1),
        "summary": json.loads(out[0]) if out and out[0].strip() else {},
    }
    if dedup:
        result["dedup_rss_mb"] = round(dedup / 1024, 1)
        result["dedup_s"] = round(marks.get("dedup_end", wall) - marks["dedup_start"], 2)
    if "ray_up" in marks:
        result["ray_start_s"] = round(marks["ray_up"], 2)
    if "sent_mb" in marks:
        result["sent_mb"], result["received_mb"] = marks["sent_mb"], marks["received_mb"]
    return result


def _lines(stream: Any, copy: Any, marks: dict[str, float], start: float) -> None:
    for line in stream:
        copy.write(line)
        if "shard: deduplicating" in line:
            marks["dedup_start"] = time.perf_counter() - start
        elif "shard: duplicates:" in line:
            marks["dedup_end"] = time.perf_counter() - start
        elif "running tasks on" in line and "ray_up" not in marks:
            marks["ray_up"] = time.perf_counter() - start
        elif carried := CARRIED.search(line):
            marks["sent_mb"] = float(carried[1].replace(",", ""))
            marks["received_mb"] = float(carried[2].replace(",", ""))


def run_size(
    work: Path, mb: float, seed: int, workers: int, backend: str, keep: bool
) -> dict[str, Any]:
    data, info = make_corpus(work, mb, seed)
    root = work / f"root-{mb:g}mb-{backend}"
    shutil.rmtree(root, ignore_errors=True)
    cfg = write_config(work / f"scale-{mb:g}mb.toml", data)
    extra = BACKEND_ARGS[backend]
    stages: dict[str, Any] = {}
    for stage in STAGES:
        cmd = [sys.executable, "-m", "corpus_assets.cli", "run", "--stage", stage]
        cmd += ["--config", str(cfg), "--root", str(root), "--workers", str(workers), *extra]
        result = run_stage(cmd, work / f"{stage}-{mb:g}mb-{backend}.stderr")
        result["mb_per_s"] = round(info["bytes"] / 1e6 / result["wall_s"], 2)
        stages[stage] = result
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    shard = stages["shard"].pop("summary")
    for stage in ("fetch", "tokenize"):
        stages[stage].pop("summary")
    return {
        "mb": mb,
        "backend": backend,
        "documents": info["documents"],
        "text_bytes": info["bytes"],
        "documents_out": shard.get("documents_out"),
        "duplicates": shard.get("duplicates"),
        "stages": stages,
    }


def ratios(small: dict[str, Any], large: dict[str, Any]) -> dict[str, Any]:
    """Largest over smallest size, per stage: peak RSS (process, tree, dedup) and MB/s."""
    out: dict[str, Any] = {}
    for stage in STAGES:
        a, b = small["stages"][stage], large["stages"][stage]
        keys = [k for k in ("process_rss_mb", "tree_rss_mb", "dedup_rss_mb", "mb_per_s") if k in a]
        out[stage] = {k: round(b[k] / a[k], 3) if a[k] else None for k in keys if k in b}
    return out


def _ends(runs: list[dict[str, Any]], backend: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The backend's runs of the smallest and the largest size."""
    mine = [r for r in runs if r["backend"] == backend]
    return mine[0], mine[-1]


def print_table(runs: list[dict[str, Any]]) -> None:
    head = f"{'size':>8} {'backend':>7} {'stage':>9} {'wall s':>8} {'MB/s':>7} {'cpu s':>7} "
    head += f"{'proc MB':>8} {'tree MB':>8} {'dedup MB':>9} {'Ray up s':>9} {'MB sent':>8} "
    head += f"{'MB back':>8}"
    print(head, file=sys.stderr)
    for run in runs:
        for stage, r in run["stages"].items():
            print(
                f"{run['mb']:>6g}MB {run['backend']:>7} {stage:>9} {r['wall_s']:>8} "
                f"{r['mb_per_s']:>7} {r['cpu_s']:>7} {r['process_rss_mb']:>8} "
                f"{r['tree_rss_mb']:>8} {r.get('dedup_rss_mb', ''):>9} "
                f"{r.get('ray_start_s', ''):>9} {r.get('sent_mb', ''):>8} "
                f"{r.get('received_mb', ''):>8}",
                file=sys.stderr,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,1000", help="corpus sizes in MB, comma-separated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backends", default="local", help=f"comma-separated, of {BACKENDS}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench-scale"))
    ap.add_argument("--quick", action="store_true", help="sizes 1 and 2 MB")
    ap.add_argument("--keep", action="store_true", help="keep the data roots")
    args = ap.parse_args()
    backends = args.backends.split(",")
    if not backends or any(b not in BACKENDS for b in backends):
        ap.error(f"--backends {args.backends!r}: each must be one of {', '.join(BACKENDS)}")
    sizes = [1.0, 2.0] if args.quick else [float(s) for s in args.sizes.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    load_before = list(os.getloadavg())
    runs = [
        run_size(args.work, mb, args.seed, args.workers, backend, args.keep)
        for mb in sizes
        for backend in backends
    ]
    print_table(runs)
    summary = {
        "sizes_mb": sizes,
        "workers": args.workers,
        "backends": backends,
        "cores": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": list(os.getloadavg()),
        "runs": runs,
        "largest_over_smallest": {b: ratios(*_ends(runs, b)) for b in backends},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
