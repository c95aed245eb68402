"""What the build report costs a build, and that no stage waits for it.

    .venv/bin/python bench/bench_report.py [--mb 20] [--pairs 3] [--out bench/out/report]

Builds the shard benchmark's corpus (bench/make_corpus.py, seed 0) on fresh data roots, in
alternating pairs, each build in a process of its own as `corpus build` runs it (the
`corpus_build` job in process, on the root's SQLite instance):

- `with_report`: the whole job, raw → shards → tokens → report (what every build does);
- `stages_only`: the same job with the `report` asset left out of the selection.

From each run's events: every step's seconds (step start to step success), the `report_seconds`
the report records, and the run's seconds (run start to run success). Prints one JSON object:
the medians per variant, and the ratios with_report / stages_only of the shards and tokens steps
(1.0 when the report slows no stage) and of the whole run. A no-op rebuild of the last
`with_report` root shows the report reused.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from bench_shard import MAKE_CORPUS, write_config  # noqa: E402

STEPS = ("raw", "shards", "tokens", "report")
VARIANTS = ("with_report", "stages_only")


def child(config: Path, root: Path, variant: str) -> dict[str, Any]:
    """One build of `config` on `root` in this process; its timings."""
    import dagster as dg

    from corpus_assets.build import driver
    from corpus_assets.build.output import QUIET_LOGS
    from corpus_assets.definitions import build_defs
    from corpus_assets.instance.home import open_instance
    from corpus_assets.jobs import BUILD_JOB
    from corpus_assets.resources.paths import CorpusPaths

    with open_instance(root) as instance:
        cfg = driver.register(config, root, instance)
        job = build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def(BUILD_JOB)
        keys = [dg.AssetKey(step) for step in STEPS if variant == "with_report" or step != "report"]
        result = job.execute_in_process(
            instance=instance,
            partition_key=cfg.partition_key,
            asset_selection=keys,
            run_config=QUIET_LOGS,
            raise_on_error=True,
        )
        return timings(instance, result.run_id)


def timings(instance: Any, run_id: str) -> dict[str, Any]:
    """Per step: seconds from start to success; the report's own seconds; the run's seconds."""
    import dagster as dg

    times: dict[str, Any] = {}
    starts: dict[str, float] = {}
    for record in instance.get_records_for_run(run_id).records:
        entry = record.event_log_entry
        event = entry.dagster_event
        if event is None:
            continue
        kind = event.event_type
        if kind == dg.DagsterEventType.RUN_START:
            starts["run"] = entry.timestamp
        elif kind == dg.DagsterEventType.RUN_SUCCESS:
            times["run_s"] = round(entry.timestamp - starts["run"], 3)
        elif entry.step_key not in STEPS:
            continue
        elif kind == dg.DagsterEventType.STEP_START:
            starts[entry.step_key] = entry.timestamp
        elif kind == dg.DagsterEventType.STEP_SUCCESS:
            times[f"{entry.step_key}_s"] = round(entry.timestamp - starts[entry.step_key], 3)
        elif kind == dg.DagsterEventType.ASSET_MATERIALIZATION:
            seconds = event.step_materialization_data.materialization.metadata.get("report_seconds")
            if seconds is not None:
                times["report_seconds"] = float(seconds.value)
    return times


def build(config: Path, root: Path, variant: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", str(config), str(root), variant]
    done = subprocess.run(cmd, text=True, capture_output=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{variant} build exited {done.returncode}: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = sorted({k for run in runs for k in run})
    return {k: round(statistics.median(run[k] for run in runs if k in run), 3) for k in keys}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "report")
    ap.add_argument(
        "--child", nargs=3, metavar=("CONFIG", "ROOT", "VARIANT"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.child:
        config, root, variant = args.child
        print(json.dumps(child(Path(config), Path(root), variant)))
        return 0
    out = args.out.resolve()
    data = out / f"corpus-{args.mb:g}mb"
    if not (data / "truth.json").exists():
        make = [sys.executable, str(MAKE_CORPUS), "--out", str(data), "--mb", str(args.mb)]
        subprocess.run([*make, "--seed", "0"], check=True, capture_output=True)
    cfg = write_config(out / "bench.toml", data / "part-*.jsonl", "bench", "cdla-sharing-1.0")
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for pair in range(args.pairs):
        for variant in VARIANTS if pair % 2 == 0 else VARIANTS[::-1]:
            root = out / f"root-{variant}"
            shutil.rmtree(root, ignore_errors=True)
            runs[variant].append(build(cfg, root, variant))
    again = build(cfg, out / "root-with_report", "with_report")
    got = {v: medians(runs[v]) for v in VARIANTS}
    with_report, stages_only = got["with_report"], got["stages_only"]
    result = {
        "corpus_mb": args.mb,
        "pairs": args.pairs,
        "runs": runs,
        "medians": got,
        "with_report_over_stages_only": {
            key: round(with_report[key] / stages_only[key], 3)
            for key in ("shards_s", "tokens_s", "run_s")
        },
        "report_step_share_of_the_run": round(with_report["report_s"] / with_report["run_s"], 3),
        "no_op_rebuild": again,
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
