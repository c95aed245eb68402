"""Overhead of `corpus build` (Dagster: instance, run, Pipes, checks) over the three stages alone.

    .venv/bin/python bench/bench_build.py [--config examples/tiny.toml] [--repeat 3]

For each repeat, in fresh data roots: the three `corpus run --stage` commands one after another
(cold), then again (warm: every stage a no-op), then `corpus build` cold and warm. Prints the
fastest of the repeats and the overhead per build; the target is under 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = [sys.executable, "-m", "corpus_assets.cli"]
TARGET_S = 3.0


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return took


def stages(config: Path, root: Path, env: dict[str, str]) -> float:
    return sum(
        _timed([*CORPUS, "run", "--stage", s, "--config", str(config), "--root", str(root)], env)
        for s in ("fetch", "shard", "tokenize")
    )


def build(config: Path, root: Path, env: dict[str, str]) -> float:
    return _timed([*CORPUS, "build", str(config), "--root", str(root)], env)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=REPO / "examples" / "tiny.toml")
    p.add_argument("--repeat", type=int, default=3)
    opts = p.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "CORPUS_ROOT")}
    times: dict[str, list[float]] = {
        k: [] for k in ("stages", "stages_warm", "build", "build_warm")
    }
    work = Path(tempfile.mkdtemp(prefix="bench-build-"))
    try:
        for i in range(opts.repeat):
            direct, dagster = work / f"direct-{i}", work / f"dagster-{i}"
            times["stages"].append(stages(opts.config, direct, env))
            times["stages_warm"].append(stages(opts.config, direct, env))
            times["build"].append(build(opts.config, dagster, env))
            times["build_warm"].append(build(opts.config, dagster, env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # The minimum of the repeats: other load on the machine only ever adds time.
    med = {k: min(v) for k, v in times.items()}
    result = {
        "config": str(opts.config),
        "repeat": opts.repeat,
        "cpus": os.cpu_count(),
        "min_s": {k: round(v, 2) for k, v in med.items()},
        "overhead_s": {
            "cold": round(med["build"] - med["stages"], 2),
            "warm": round(med["build_warm"] - med["stages_warm"], 2),
        },
        "target_s": TARGET_S,
    }
    print(f"{'':22}{'stages alone':>14}{'corpus build':>14}{'overhead':>10}")
    for label, a, b in (
        ("cold (fresh root)", "stages", "build"),
        ("warm (no-op rebuild)", "stages_warm", "build_warm"),
    ):
        print(f"{label:22}{med[a]:>13.2f}s{med[b]:>13.2f}s{med[b] - med[a]:>9.2f}s")
    print(json.dumps(result, indent=1))
    worst = max(result["overhead_s"].values())
    print(
        f"overhead per build: {worst:.2f} s ({'within' if worst < TARGET_S else 'OVER'} "
        f"the {TARGET_S:.0f} s target)"
    )


if __name__ == "__main__":
    main()
