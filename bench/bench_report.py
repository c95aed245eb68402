"""What the build report costs in a `corpus build`, against the stages it follows.

    .venv/bin/python bench/bench_report.py [--mb 20] [--out bench/out/report]

Builds the shard benchmark's corpus (bench/make_corpus.py, seed 0) with `corpus build` on a
fresh data root, then reads from the run's events: each stage step's time (step start to step
success), the `report_seconds` its materialization records (the report is made in the run
worker after the stage's subprocess exited, so the stage itself is not slowed), and the same
for a no-op rebuild, where the report is reused. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from bench_shard import MAKE_CORPUS, write_config  # noqa: E402

STEPS = ("raw", "shards", "tokens")


def build(cfg: Path, root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "CORPUS_ROOT")}
    cmd = [sys.executable, "-m", "corpus_assets.cli", "build", str(cfg), "--root", str(root)]
    done = subprocess.run(cmd, env=env, text=True, capture_output=True, check=False)
    if done.returncode != 0:
        sys.exit(f"corpus build exited {done.returncode}: {done.stderr[-2000:]}")


def timings(instance: dg.DagsterInstance, run_id: str) -> dict[str, dict[str, float]]:
    """Per step: seconds from start to success, and the report's seconds in it."""
    times: dict[str, dict[str, float]] = {}
    for record in instance.get_records_for_run(run_id).records:
        entry = record.event_log_entry
        event = entry.dagster_event
        if event is None or entry.step_key not in STEPS:
            continue
        step = times.setdefault(entry.step_key, {})
        if event.event_type == dg.DagsterEventType.STEP_START:
            step["start"] = entry.timestamp
        elif event.event_type == dg.DagsterEventType.STEP_SUCCESS:
            step["step_s"] = round(entry.timestamp - step.pop("start"), 2)
        elif event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            seconds = event.step_materialization_data.materialization.metadata.get("report_seconds")
            if seconds is not None:
                step["report_s"] = float(seconds.value)  # type: ignore[arg-type]
    for step in times.values():
        if "report_s" in step:
            stage = step["step_s"] - step["report_s"]
            step["report_share_of_the_rest_of_the_step"] = round(step["report_s"] / stage, 3)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "report")
    args = ap.parse_args()
    out = args.out.resolve()
    data = out / f"corpus-{args.mb:g}mb"
    if not (data / "truth.json").exists():
        make = [sys.executable, str(MAKE_CORPUS), "--out", str(data), "--mb", str(args.mb)]
        subprocess.run([*make, "--seed", "0"], check=True, capture_output=True)
    root = out / "root"
    shutil.rmtree(root, ignore_errors=True)
    cfg = write_config(out / "bench.toml", data / "part-*.jsonl", "bench", "cdla-sharing-1.0")
    build(cfg, root)
    build(cfg, root)
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        again, first = (r.run_id for r in instance.get_runs(dg.RunsFilter(job_name="corpus_build")))
        result = {
            "corpus_mb": args.mb,
            "fresh": timings(instance, first),
            "no_op_rebuild": timings(instance, again),
        }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
