"""A real `corpus` process with one scripted misbehaviour, for StageRunner(command=[...]) in tests.

    python stage_wrapper.py --state DIR [--stage STAGE] --mode MODE -- <corpus CLI args>

Modes (applied only to `corpus run --stage STAGE`, or every stage without --stage):
  exit-once=CODE    the first attempt exits CODE without running; later attempts run for real
  stall-once=SECS   the first attempt prints nothing and sleeps; later attempts run for real
  stall=SECS        every attempt prints nothing and sleeps (a hung stage)
  corrupt-shard     run for real, then flip bytes in the middle of the first shard file
  hang-task=INDEX   run for real, but shard task INDEX sleeps silently in its pool worker
  fail-after=CODE   run for real, list the build's shard and token files in DIR/published.json,
                    then exit CODE (a stage that fails after writing its output)
Anything else runs the real CLI unchanged. The child replaces this process (same pid, signals).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--state", required=True, type=Path)
    p.add_argument("--stage", default=None)
    p.add_argument("--mode", required=True)
    p.add_argument("args", nargs=argparse.REMAINDER)
    opts = p.parse_args()
    args = opts.args[1:] if opts.args[:1] == ["--"] else opts.args
    stage = args[args.index("--stage") + 1] if "--stage" in args else args[0]
    real = [sys.executable, "-m", "corpus_assets.cli", *args]
    if opts.stage is not None and stage != opts.stage:
        os.execv(real[0], real)
    mode, _, value = opts.mode.partition("=")
    opts.state.mkdir(parents=True, exist_ok=True)
    attempts = opts.state / f"{stage}.attempts"
    n = int(attempts.read_text()) if attempts.exists() else 0
    attempts.write_text(str(n + 1))
    if mode == "exit-once" and n == 0:
        sys.exit(int(value))
    if (mode == "stall-once" and n == 0) or mode == "stall":
        time.sleep(float(value))
        sys.exit(0)
    if mode == "hang-task":
        _hang_shard_task(int(value), opts.state / "hung.pid")
        from corpus_assets.cli import main as corpus_main

        corpus_main(args)
    if mode == "fail-after":
        import json
        import subprocess

        from corpus_assets.core.config import load_config
        from corpus_assets.core.store.layout import Layout

        code = subprocess.call(real)
        layout = Layout(Path(args[args.index("--root") + 1]).resolve())
        cfg = load_config(args[args.index("--config") + 1])
        published = {
            name: sorted(str(p) for p in folder.rglob("*") if p.is_file())
            for name, folder in (("shards", layout.shards(cfg)), ("tokens", layout.tokens(cfg)))
        }
        (opts.state / "published.json").write_text(json.dumps(published))
        sys.exit(int(value) if code == 0 else code)
    if mode == "corrupt-shard":
        import subprocess

        from corpus_assets.core.config import load_config
        from corpus_assets.core.store.layout import Layout

        code = subprocess.call(real)
        if code == 0:
            layout = Layout(Path(args[args.index("--root") + 1]))
            cfg = load_config(args[args.index("--config") + 1])
            shard = sorted(layout.shards(cfg).glob("shard-*.parquet"))[0]
            data = bytearray(shard.read_bytes())
            middle = len(data) // 2
            data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
            shard.write_bytes(bytes(data))
        sys.exit(code)
    os.execv(real[0], real)


def _hang_shard_task(index: int, pidfile: Path) -> None:
    """Make shard task `index` hang silently in whichever pool worker runs it (the workers are
    forked from this process, so they inherit the patched function); the worker writes its pid
    to `pidfile` first."""
    from corpus_assets.core.stages import shard_tasks

    real = shard_tasks.run_task

    def run_task(cfg: Any, task: Any, *rest: Any) -> Any:
        if task.index == index:
            pidfile.write_text(str(os.getpid()))
            time.sleep(3600)
        return real(cfg, task, *rest)

    run_task.__module__, run_task.__qualname__ = real.__module__, real.__qualname__  # pickled
    shard_tasks.run_task = run_task  # type: ignore[assignment]


if __name__ == "__main__":
    main()
