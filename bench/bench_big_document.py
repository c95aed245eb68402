"""Peak memory of the fetch and shard stages on one huge document, against a one-line corpus.

    python bench/bench_big_document.py [--mb 200] [--work /tmp/bench-big] [--check]

For each source kind (`jsonl`: one JSON line; `text`: one file, one document) the script
writes one document of `--mb` MB of words, then runs `corpus run --stage fetch` and
`--stage shard` on it as subprocesses, and the same two stages on a corpus of one short
line (the baseline: the interpreter, its imports, the worker pool). A stage's peak RSS is the
largest of its process tree's (`wait4`). The document is over the default `max_chars`, so the
shard stage drops it as `too_many_chars` and, with nothing left, exits 65 ("no document
survived"). Reported per stage: the peak, the baseline's peak and the cost of the document,
(peak - baseline) / its size. A table goes to stderr, one JSON line to stdout (last line).
With --check it exits 1 when a cost is over 3x or the shard stage does not exit 65.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = [sys.executable, "-m", "corpus_assets.cli"]
WORDS = (
    *("the", "a", "cat", "dog", "river", "house", "light", "story"),
    *("small", "quiet", "morning", "garden", "walked", "found"),
)
KINDS = ("jsonl", "text")
LIMIT = 3.0
MAX_DOCUMENT_BYTES = 1 << 30  # the source keeps the document (the default skips one over 64 MiB)


def write_document(path: Path, mb: float, kind: str, seed: int = 0) -> int:
    """One document of `mb` MB of words (sentences), as `kind`, written a block at a time (this
    process stays small: a stage's peak RSS counts its parent's pages before exec); its size."""
    rng = random.Random(seed)
    block = " ".join(rng.choice(WORDS) for _ in range(100_000)).replace(" the ", ". The ") + ". "
    size = int(mb * 1_000_000)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('{"text": "' if kind == "jsonl" else "")
        left = size
        while left > 0:
            fh.write(block[:left])
            left -= len(block[:left])
        fh.write('"}\n' if kind == "jsonl" else "")
    return size


def write_config(folder: Path, kind: str) -> Path:
    name = "in.jsonl" if kind == "jsonl" else "in.txt"
    config = folder / "corpus.toml"
    config.write_text(
        f'dataset = "big"\nversion = "v1"\ntokenizer = {{id = "bytes"}}\n'
        f'[[sources]]\nname = "one"\nkind = "{kind}"\npath = "{name}"\nlicense = "mit"\n'
        f"max_document_bytes = {MAX_DOCUMENT_BYTES}\n",
        encoding="utf-8",
    )
    return config


def run_stage(stage: str, config: Path, root: Path) -> dict[str, Any]:
    """One stage subprocess: its exit code, last stderr line, wall seconds, peak RSS (MB)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    cmd = [*CORPUS, "run", "--stage", stage, "--config", str(config), "--root", str(root)]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").strip().splitlines()
    return {
        "exit": child.returncode,
        "last_line": lines[-1] if lines else "",
        "wall_s": round(time.perf_counter() - start, 2),
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
    }


def measure(work: Path, kind: str, mb: float) -> dict[str, Any]:
    base, big = work / kind / "baseline", work / kind / "big"
    for folder in (base, big):
        folder.mkdir(parents=True, exist_ok=True)
    name = "in.jsonl" if kind == "jsonl" else "in.txt"
    (base / name).write_text(
        json.dumps({"text": "one short line about a cat."}) + "\n"
        if kind == "jsonl"
        else "one short line about a cat.",
        encoding="utf-8",
    )
    size = write_document(big / name, mb, kind)
    out: dict[str, Any] = {"kind": kind, "document_mb": round(size / 1e6, 1), "stages": {}}
    for stage in ("fetch", "shard"):
        small = run_stage(stage, write_config(base, kind), base / "root")
        large = run_stage(stage, write_config(big, kind), big / "root")
        cost = (large["peak_mb"] - small["peak_mb"]) * 1024 * 1024 / size
        out["stages"][stage] = {
            "baseline_mb": small["peak_mb"],
            "peak_mb": large["peak_mb"],
            "cost_x": round(cost, 2),
            "wall_s": large["wall_s"],
            "exit": large["exit"],
            "last_line": large["last_line"],
        }
    return out


def problems(runs: list[dict[str, Any]]) -> list[str]:
    found = []
    for run in runs:
        fetch, shard = run["stages"]["fetch"], run["stages"]["shard"]
        if fetch["exit"] != 0:
            found.append(f"{run['kind']}: fetch exited {fetch['exit']}: {fetch['last_line']}")
        if shard["exit"] != 65 or "no document survived" not in shard["last_line"]:
            found.append(f"{run['kind']}: shard exited {shard['exit']}: {shard['last_line']}")
        for stage, numbers in run["stages"].items():
            if numbers["cost_x"] > LIMIT:
                found.append(f"{run['kind']} {stage}: {numbers['cost_x']}x the document's size")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of the document (MB)")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (else a temp)")
    parser.add_argument("--check", action="store_true", help=f"exit 1 over {LIMIT}x")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-big-") as tmp:
        work = args.work or Path(tmp)
        load = os.getloadavg()
        runs = [measure(work, kind, args.mb) for kind in KINDS]
    print(f"{'kind':6} {'stage':6} {'baseline MB':>11} {'peak MB':>8} {'cost':>6}", file=sys.stderr)
    for run in runs:
        for stage, n in run["stages"].items():
            print(
                f"{run['kind']:6} {stage:6} {n['baseline_mb']:11.0f} {n['peak_mb']:8.0f} "
                f"{n['cost_x']:5.2f}x",
                file=sys.stderr,
            )
    found = problems(runs)
    print(json.dumps({"load_average_before": load, "runs": runs, "problems": found}))
    if args.check and found:
        sys.exit("; ".join(found))


if __name__ == "__main__":
    main()
