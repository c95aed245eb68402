"""Helpers for the executor's fault tests: `corpus tasks` processes, the call log, the checkpoints.

Every job runs `fault_recipes:create_recipe` (this folder) in a fresh interpreter whose
PYTHONPATH names the worktree and this folder, so spawned process workers import it too.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from support.corpus import run_corpus, start_corpus
from support.processes import live_in_group
from support.waiting import wait_for

from corpus_assets.recipes.arithmetic import create_recipe as create_arithmetic
from corpus_assets.tasks.types import GenerateContext

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# What a spawned job imports: the worktree, this folder's recipes and tests/support.
IMPORT_PATH = os.pathsep.join([str(REPO), str(HERE), str(HERE.parent)])
FACTORY = "fault_recipes:create_recipe"
CANDIDATES = 64  # per batch
TARGET = 100  # two batches: the first 64 candidates cannot fill it
BATCH_SIZE = 8
WAIT_S = 120.0
STARTED: list[subprocess.Popen[str]] = []  # every job started in a session, for stop_leftovers


def job_config(
    path: Path,
    backend: str = "thread",
    max_workers: int = 1,
    execution: dict[str, Any] | None = None,
    **top: Any,
) -> Path:
    """A JSON job config at `path`: two batches of 64, chunks of 8, `top` keys over defaults
    (`execution`: more execution settings)."""
    params: dict[str, Any] = {"candidate_count": CANDIDATES}
    params.update(top.pop("params", {}))
    config = {
        "recipe": FACTORY,
        "target_count": TARGET,
        "purpose": "harness",
        "seed": 0,
        "params": params,
        "max_batches": 4,
        **top,
        "execution": {"batch_size": BATCH_SIZE, "backend": backend, "max_workers": max_workers}
        | (execution or {}),
    }
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def job_env(log: Path, pause: str | None = None, gate: Path | None = None) -> dict[str, str]:
    """The environment of a job: imports for every process, the call log, the pause point."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULT_")}
    env["PYTHONPATH"] = IMPORT_PATH
    env["HF_HUB_OFFLINE"] = "1"
    env["FAULT_LOG"] = str(log)
    if pause is not None:
        env["FAULT_PAUSE"] = pause
    if gate is not None:
        env["FAULT_GATE"] = str(gate)
    return env


def tasks_args(config: Path, output: Path, resume: bool = False) -> list[str]:
    """The arguments of `corpus tasks --config CONFIG --output OUTPUT [--resume]`."""
    args = ["tasks", "--config", str(config), "--output", str(output)]
    return args + (["--resume"] if resume else [])


def run_job(
    config: Path, output: Path, env: dict[str, str], resume: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run a job to its end; never raises on a non-zero exit."""
    return run_corpus(*tasks_args(config, output, resume), environ=env)


def start_job(
    config: Path, output: Path, env: dict[str, str], stderr: Path, resume: bool = False
) -> subprocess.Popen[str]:
    """Start a job in its own session (so its whole process group can be killed)."""
    with open(stderr, "w", encoding="utf-8") as err:
        proc = start_corpus(
            *tasks_args(config, output, resume),
            environ=env, stdout=subprocess.PIPE, stderr=err, start_new_session=True,
        )  # fmt: skip
    STARTED.append(proc)
    return proc


def stop_leftovers() -> None:
    """SIGKILL the group of every job in STARTED that is still running (a failed test's)."""
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=WAIT_S)


def wait_for_pause(log: Path, proc: subprocess.Popen[str]) -> None:
    """Wait until the recipe logs `pause ...` (fail if the job ends first)."""
    wait_for(
        lambda: any(line.startswith("pause ") for line in read_log(log)),
        WAIT_S,
        f"a pause in {log}",
        watch=[proc],
    )


def wait_for_text(path: Path, text: str, proc: subprocess.Popen[str]) -> None:
    """Wait until the file at `path` (a job's stderr) contains `text`."""
    wait_for(
        lambda: path.exists() and text in path.read_text(encoding="utf-8"),
        WAIT_S,
        f"{text!r} in {path}",
        watch=[proc],
    )


def wait_for_commit(output: Path, proc: subprocess.Popen[str]) -> None:
    """Wait until the job's checkpoints hold a committed chunk (a batch with consumed > 0)."""

    def committed() -> bool:
        path = output / "work" / "checkpoints.sqlite3"
        if not path.exists():
            return False
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return bool(db.execute("SELECT 1 FROM batches WHERE consumed > 0").fetchone())
        except sqlite3.OperationalError:  # the tables are not made yet
            return False
        finally:
            db.close()

    wait_for(committed, WAIT_S, f"a committed chunk in {output}", watch=[proc])


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the job's whole process group and check it died of it."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=WAIT_S)
    assert proc.returncode == -signal.SIGKILL, proc.returncode
    # spawned workers are reparented, not reaped by us
    wait_for(
        lambda: not live_in_group(proc.pid),
        WAIT_S,
        f"no live member of process group {proc.pid} after SIGKILL",
    )


def read_log(log: Path) -> list[str]:
    """The call log's lines (none when it does not exist yet)."""
    if not log.exists():
        return []
    return log.read_text(encoding="utf-8").splitlines()


def calls(lines: list[str], kind: str) -> list[str]:
    """The arguments of the `kind` calls in `lines`."""
    return [line.split(" ", 1)[1] for line in lines if line.startswith(f"{kind} ")]


def checkpoint_state(output: Path) -> dict[str, Any]:
    """Batches (batch -> (consumed, done)) and the projected task ids in the checkpoints."""
    db = sqlite3.connect(output / "work" / "checkpoints.sqlite3")
    try:
        batches = {
            int(b): (int(c), bool(d))
            for b, c, d in db.execute("SELECT batch, consumed, done FROM batches")
        }
        rows = db.execute("SELECT task_id FROM projection ORDER BY row")
        projected = [str(task_id) for (task_id,) in rows]
    finally:
        db.close()
    return {"batches": batches, "projected": projected}


def checkpoint_dump(output: Path) -> list[str]:
    """Every row of the checkpoints as SQL text (to compare before and after)."""
    db = sqlite3.connect(output / "work" / "checkpoints.sqlite3")
    try:
        return list(db.iterdump())
    finally:
        db.close()


def integrity(output: Path) -> str:
    """`PRAGMA integrity_check` of the checkpoints."""
    db = sqlite3.connect(output / "work" / "checkpoints.sqlite3")
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


def dataset_files(output: Path) -> dict[str, bytes]:
    """Every file of `OUTPUT/dataset/` by name."""
    folder = output / "dataset"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def job_state(output: Path) -> dict[str, Any]:
    """`OUTPUT/job.json`."""
    doc: dict[str, Any] = json.loads((output / "job.json").read_text(encoding="utf-8"))
    return doc


def generated_ids(batch: int, seed: int = 0) -> list[str]:
    """The raw task ids batch `batch` of the test config generates, in order."""
    recipe = create_arithmetic(candidate_count=CANDIDATES)
    context = GenerateContext(seed=seed, batch_index=batch, target_count=TARGET, purpose="harness")
    return [sample.task_id for sample in recipe.generate(context)]


def expected_cleans(committed: dict[int, tuple[int, bool]], batches: int) -> Counter[str]:
    """The clean calls a resume owes: every uncommitted sample of every batch up to `batches`."""
    owed: Counter[str] = Counter()
    for batch in range(batches):
        consumed, done = committed.get(batch, (0, False))
        if not done:
            owed.update(generated_ids(batch)[consumed:])
    return owed


def last_json(stdout: str) -> dict[str, Any]:
    """The result line `corpus tasks` prints last."""
    doc: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return doc
