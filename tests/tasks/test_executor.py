"""The data-job executor end to end: real files, real worker threads and processes.

The scripted recipe (`executor_recipes.py`) makes duplicates, conflicts, rejections and
failures on purpose; the example arithmetic recipe checks the published snapshot.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from job_support import IMPORT_PATH, job_state, start_job
from support.corpus import run_corpus
from support.processes import live_in_group

from corpus_assets.core.errors import ConfigError, DataError, TransientError
from corpus_assets.tasks.config import load_job_config
from corpus_assets.tasks.executor import (
    MAX_RETRY_DELAY_S,
    DataJob,
    ExhaustedError,
    retry_delay,
)
from corpus_assets.tasks.snapshot import load_snapshot
from corpus_assets.tasks.workers import RecipeError

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXAMPLE = REPO / "examples" / "tasks" / "arithmetic.yaml"
SCRIPTED = "executor_recipes:make"


def sample(task_id: str, text: str, answer: str = "1") -> dict[str, Any]:
    return {"id": task_id, "input": {"text": text}, "answer": answer, "metadata": {}}


TOP_LEVEL = {
    "target_count",
    "max_batches",
    "max_candidates",
    "exclusions",
    "inputs",
    "execution",
    "calibration",
    "seed",
}


def write_config(folder: Path, name: str = "job.json", **fields: Any) -> Path:
    """A JSON job config for the scripted recipe; fields that are not job keys are its params."""
    config = {"recipe": SCRIPTED, "target_count": 2, "purpose": "harness"}
    config |= {k: v for k, v in fields.items() if k in TOP_LEVEL}
    config["params"] = {k: v for k, v in fields.items() if k not in TOP_LEVEL}
    path = folder / name
    path.write_text(json.dumps(config))
    return path


def run_job(config: Path, output: Path, resume: bool = False) -> Any:
    return asyncio.run(DataJob(load_job_config(config), output, resume).run())


def corpus(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_corpus(*args, cwd=cwd, env={"PYTHONPATH": IMPORT_PATH})


# -- the example job, as a new user runs it ------------------------------------------------


def test_example_job_publishes_a_verified_owner_only_snapshot_and_exports_it(
    tmp_path: Path,
) -> None:
    out = corpus(
        "tasks",
        "--config",
        str(EXAMPLE),
        "--output",
        "job",
        "--export-hf",
        "job-hf",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    job, dataset = tmp_path / "job", tmp_path / "job" / "dataset"
    assert result["dataset_path"] == str(dataset)
    for name in ("job.json", "config.json", "progress.json", "work/checkpoints.sqlite3"):
        assert (job / name).is_file(), name
    names = sorted(p.name for p in dataset.iterdir())
    assert names == sorted(
        [
            "public.jsonl",
            "references.jsonl",
            "train.jsonl",
            "probes.jsonl",
            "report.json",
            "manifest.json",
        ]
    )
    for path in [job, *job.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    snapshot = load_snapshot(dataset)
    assert snapshot.dataset_id == result["dataset_id"]
    assert job_state(job)["state"] == "succeeded"
    assert job_state(job)["dataset_id"] == result["dataset_id"]
    rows = list(snapshot.training_rows())
    assert len(rows) == 64
    assert rows[0]["messages"][0]["role"] == "user"
    assert rows[0]["answer"].startswith("\\boxed{")
    report = json.loads((dataset / "report.json").read_text())
    assert report["calibrated"] is False
    assert "not difficulty-calibrated" in report["selection"]["statistics"]["note"]
    assert not any("reference" in line for line in (dataset / "public.jsonl").open())

    import datasets

    hf = datasets.load_from_disk(result["training_dataset_path"])
    assert len(hf) == 64
    assert hf[0]["task_id"] == rows[0]["task_id"]


def test_python_m_runs_the_same_command(tmp_path: Path) -> None:
    env = os.environ | {"PYTHONPATH": str(REPO)}
    a = subprocess.run(
        [
            sys.executable,
            "-m",
            "corpus_assets.tasks",
            "--config",
            str(EXAMPLE),
            "--output",
            str(tmp_path / "a"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert a.returncode == 0, a.stderr
    b = corpus("tasks", "--config", str(EXAMPLE), "--output", str(tmp_path / "b"))
    assert (
        json.loads(a.stdout.splitlines()[-1])["dataset_id"]
        == json.loads(b.stdout.splitlines()[-1])["dataset_id"]
    )


@pytest.mark.parametrize(
    ("backend", "workers", "batch_size"),
    [("thread", 2, 5), ("thread", 4, 256), ("process", 1, 9), ("process", 2, 5), ("process", 4, 3)],
)
def test_any_worker_count_backend_and_chunk_size_give_the_same_snapshot(
    tmp_path: Path, backend: str, workers: int, batch_size: int
) -> None:
    text = EXAMPLE.read_text()
    base = tmp_path / "base.yaml"
    base.write_text(text)
    other = tmp_path / "other.yaml"
    other.write_text(
        text + f"execution:\n  backend: {backend}\n  max_workers: {workers}\n"
        f"  batch_size: {batch_size}\n"
    )
    a = run_job(base, tmp_path / "a")
    b = run_job(other, tmp_path / "b")
    assert a.dataset_id == b.dataset_id
    for name in ("public.jsonl", "references.jsonl", "train.jsonl", "report.json"):
        assert (a.path / name).read_bytes() == (b.path / name).read_bytes(), name


# -- duplicates, exclusions, conflicts -----------------------------------------------------


def test_duplicates_rejections_and_exclusions_are_counted_per_batch(tmp_path: Path) -> None:
    exclusions = tmp_path / "previous-public.jsonl"
    exclusions.write_text(json.dumps({"task_id": "e", "input": {}, "metadata": {}}) + "\n")
    batches = [
        [sample("a", "A"), sample("a", "A"), sample("r", "R"), sample("e", "E")],
        [sample("a", "A"), sample("b", "B"), sample("c", "C")],
    ]
    config = write_config(
        tmp_path,
        batches=batches,
        reject=["r"],
        need=3,
        target_count=3,
        exclusions=[exclusions.name],
    )
    snapshot = run_job(config, tmp_path / "out")
    report = json.loads((snapshot.path / "report.json").read_text())
    assert report["batches"] == [
        {"batch": 0, "generated": 4, "rejected": 1, "duplicates": 1, "excluded": 1, "retained": 1},
        {"batch": 1, "generated": 3, "rejected": 0, "duplicates": 1, "excluded": 0, "retained": 2},
    ]
    assert report["totals"] == {
        "generated": 7,
        "rejected": 1,
        "duplicates": 2,
        "excluded": 1,
        "retained": 3,
    }
    assert [t.task_id for t in snapshot.public_tasks()] == ["a", "b", "c"]
    assert report["selection"]["statistics"] == {"pool_type": "CandidatePool", "scores": 0}
    work = tmp_path / "out" / "work"
    candidates = [json.loads(x) for x in (work / "batch-1-candidates.jsonl").open()]
    public = [json.loads(x) for x in (work / "batch-1-public.jsonl").open()]
    assert [c["task_id"] for c in candidates] == ["b", "c"]
    assert candidates[0]["reference"] == {"answer": "1"}
    assert all("reference" not in p for p in public)
    assert [p["task_id"] for p in public] == ["b", "c"]


def test_a_previous_snapshot_public_file_excludes_its_tasks(tmp_path: Path) -> None:
    first = run_job(EXAMPLE, tmp_path / "first")
    (tmp_path / "previous.jsonl").write_bytes((first.path / "public.jsonl").read_bytes())
    config = tmp_path / "second.yaml"
    config.write_text(EXAMPLE.read_text() + "exclusions: [previous.jsonl]\n")
    second = run_job(config, tmp_path / "second")
    before = {t.task_id for t in first.public_tasks()}
    after = {t.task_id for t in second.public_tasks()}
    assert len(after) == 64
    assert not before & after
    report = json.loads((second.path / "report.json").read_text())
    assert report["batches"][0]["excluded"] == 64  # batch 0 was the first job's whole pool
    assert report["totals"]["excluded"] >= 64  # later batches may regenerate a few of them
    assert report["exclusion_ids"] == 64


def test_the_same_input_with_another_reference_fails_naming_both_task_ids(
    tmp_path: Path,
) -> None:
    batches = [[sample("x1", "same", "3"), sample("x2", "same", "4")]]
    config = write_config(tmp_path, batches=batches)
    out = corpus("tasks", "--config", str(config), "--output", str(tmp_path / "out"))
    assert out.returncode == 65, out.stderr
    assert "conflicting references" in out.stderr
    assert "'x1'" in out.stderr and "'x2'" in out.stderr
    state = job_state(tmp_path / "out")
    assert state["state"] == "failed" and state["exit_code"] == 65
    assert "'x1'" in state["error"]
    assert not (tmp_path / "out" / "dataset").exists()


def test_one_task_id_must_always_mean_the_same_content(tmp_path: Path) -> None:
    config = write_config(tmp_path, batches=[[sample("t", "one"), sample("t", "two")]])
    with pytest.raises(DataError, match="'t' names two different cleaned samples"):
        run_job(config, tmp_path / "out")
    same_task = write_config(
        tmp_path, "b.json", batches=[[sample("t", "one", "1"), sample("t", "one", "2")]]
    )
    with pytest.raises(DataError, match="conflicting references: task 't'"):
        run_job(same_task, tmp_path / "out2")


def test_the_same_input_and_reference_under_two_ids_is_not_a_conflict(tmp_path: Path) -> None:
    config = write_config(tmp_path, batches=[[sample("p", "same"), sample("q", "same")]])
    snapshot = run_job(config, tmp_path / "out")
    assert [t.task_id for t in snapshot.public_tasks()] == ["p", "q"]


# -- bounds and selection ------------------------------------------------------------------


def test_running_out_of_batches_names_the_bound_and_the_counts(tmp_path: Path) -> None:
    batches = [[sample("a", "A")], [sample("b", "B")], [sample("c", "C")]]
    config = write_config(tmp_path, batches=batches, need=5, max_batches=2)
    with pytest.raises(ExhaustedError) as err:
        run_job(config, tmp_path / "out")
    message = str(err.value)
    assert "max_batches = 2 reached after 2 batch(es)" in message
    assert "2 generated, 2 retained" in message
    assert "have 2 candidates, need 5" in message
    assert job_state(tmp_path / "out")["exit_code"] == 65


def test_max_candidates_stops_generation_at_that_count(tmp_path: Path) -> None:
    batches = [[sample(f"s{i}", f"S{i}") for i in range(5)] for _ in range(1)]
    batches.append([sample(f"t{i}", f"T{i}") for i in range(5)])
    config = write_config(tmp_path, batches=batches, need=9, max_candidates=7, max_batches=5)
    with pytest.raises(
        ExhaustedError,
        match=r"max_candidates = 7 reached after 2 batch\(es\) "
        r"with 7 generated, 7 retained",
    ):
        run_job(config, tmp_path / "out")


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["a"], "chose 1 task(s); it must choose exactly target_count = 2"),
        (["a", "a"], "chose task id(s) twice: a"),
        (["a", "zzz"], "chose 'zzz', which is not a retained candidate"),
        (["a", "r"], "chose 'r', which is not a retained candidate"),
    ],
)
def test_a_bad_selection_fails_the_job(tmp_path: Path, ids: list[str], message: str) -> None:
    config = write_config(
        tmp_path,
        batches=[[sample("a", "A"), sample("b", "B"), sample("r", "R")]],
        reject=["r"],
        select_override={"task_ids": ids},
    )
    with pytest.raises(RecipeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_job(config, tmp_path / "out")


# -- retries -------------------------------------------------------------------------------


def test_retry_delay_doubles_from_the_base_and_is_capped() -> None:
    assert [retry_delay(1.0, n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert retry_delay(0.25, 2) == 1.0
    assert retry_delay(100.0, 0) == MAX_RETRY_DELAY_S


@pytest.mark.parametrize("kind", ["OSError", "TimeoutError", "ConnectionResetError"])
def test_os_and_timeout_errors_are_retried_and_the_job_succeeds(tmp_path: Path, kind: str) -> None:
    counter, log = tmp_path / "raised.txt", tmp_path / "calls.txt"
    batches = [[sample(f"s{i}", f"S{i}") for i in range(6)]]
    config = write_config(
        tmp_path,
        batches=batches,
        fail={"kind": kind, "times": 2, "counter": str(counter)},
        log=str(log),
        execution={"max_retries": 2, "retry_delay": 0.01, "batch_size": 2},
    )
    snapshot = run_job(config, tmp_path / "out")
    assert len(counter.read_text().splitlines()) == 2
    assert len(list(snapshot.public_tasks())) == 2
    report = json.loads((snapshot.path / "report.json").read_text())
    assert report["totals"]["generated"] == 6


def test_retries_stop_at_max_retries_with_a_transient_exit(tmp_path: Path) -> None:
    counter = tmp_path / "raised.txt"
    config = write_config(
        tmp_path,
        batches=[[sample("a", "A"), sample("b", "B")]],
        fail={"kind": "OSError", "times": 10, "counter": str(counter)},
        execution={"max_retries": 2, "retry_delay": 0.01},
    )
    out = corpus("tasks", "--config", str(config), "--output", str(tmp_path / "out"))
    assert out.returncode == 75, out.stderr
    assert "after 3 attempt(s)" in out.stderr
    assert len(counter.read_text().splitlines()) == 3
    assert job_state(tmp_path / "out")["state"] == "failed"


def test_other_errors_are_never_retried(tmp_path: Path) -> None:
    counter = tmp_path / "raised.txt"
    config = write_config(
        tmp_path,
        batches=[[sample("a", "A"), sample("b", "B")]],
        fail={"kind": "ValueError", "times": 10, "counter": str(counter)},
        execution={"max_retries": 5, "retry_delay": 0.01},
    )
    with pytest.raises(ValueError, match="scripted ValueError"):
        run_job(config, tmp_path / "out")
    assert len(counter.read_text().splitlines()) == 1


def test_committed_chunks_are_reused_by_a_retry(tmp_path: Path) -> None:
    """The retry starts from the checkpoints: chunks committed before the error are kept."""
    counter, log = tmp_path / "raised.txt", tmp_path / "calls.txt"
    batches = [[sample(f"s{i}", f"S{i}") for i in range(6)]]
    config = write_config(
        tmp_path,
        batches=batches,
        log=str(log),
        target_count=6,
        fail={"kind": "OSError", "times": 1, "counter": str(counter), "on": "s4"},
        execution={"max_retries": 1, "retry_delay": 0.01, "batch_size": 2},
    )
    run_job(config, tmp_path / "out")
    cleans = [line for line in log.read_text().splitlines() if line.startswith("clean")]
    assert cleans.count("clean s4") == 2  # the failed call, then the retry
    assert [cleans.count(f"clean s{i}") for i in range(4)] == [1, 1, 1, 1]


# -- the job folder ------------------------------------------------------------------------


def test_a_new_job_needs_a_new_folder_and_resume_needs_a_job_folder(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("mine")
    out = corpus("tasks", "--config", str(EXAMPLE), "--output", str(tmp_path / "taken"))
    assert out.returncode == 64
    assert "already exists" in out.stderr and "--resume" in out.stderr
    assert (tmp_path / "taken" / "file").read_text() == "mine"
    out = corpus("tasks", "--config", str(EXAMPLE), "--output", str(tmp_path / "taken"), "--resume")
    assert out.returncode == 64
    assert "not a data job's folder" in out.stderr


def test_resuming_a_finished_job_returns_its_snapshot_without_work(tmp_path: Path) -> None:
    log = tmp_path / "calls.txt"
    config = write_config(tmp_path, batches=[[sample("a", "A"), sample("b", "B")]], log=str(log))
    first = run_job(config, tmp_path / "out")
    calls = log.read_text()
    again = run_job(config, tmp_path / "out", resume=True)
    assert again.dataset_id == first.dataset_id
    assert log.read_text() == calls
    (first.path / "train.jsonl").write_bytes(b"{}\n{}\n")
    with pytest.raises(DataError, match=r"train\.jsonl"):
        run_job(config, tmp_path / "out", resume=True)


def test_the_checkpoint_database_is_wal_and_holds_the_pool(tmp_path: Path) -> None:
    config = write_config(tmp_path, batches=[[sample("a", "A"), sample("b", "B")]])
    run_job(config, tmp_path / "out")
    db = sqlite3.connect(tmp_path / "out" / "work" / "checkpoints.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert [r[0] for r in db.execute("SELECT task_id FROM candidates ORDER BY seq")] == ["a", "b"]
    assert db.execute("SELECT COUNT(*) FROM projection").fetchone()[0] == 2


def test_unknown_keys_and_bad_calibrators_fail_before_any_file_is_written(tmp_path: Path) -> None:
    bad = write_config(tmp_path, "bad.json", execution={"workers": 2})
    out = corpus("tasks", "--config", str(bad), "--output", str(tmp_path / "out"))
    assert out.returncode == 64
    assert "unknown key 'workers' in [execution]; allowed: max_workers" in out.stderr
    missing = write_config(tmp_path, "cal.json", calibration={"implementation": "x.y:z"})
    out = corpus("tasks", "--config", str(missing), "--output", str(tmp_path / "out"))
    assert out.returncode == 64
    assert "module 'x' not found (from 'x.y:z')" in out.stderr
    unknown_param = write_config(
        tmp_path,
        "param.json",
        calibration={"implementation": "calibrators:answer_all", "params": {"speed": 1}},
    )
    with pytest.raises(ConfigError, match=r"does not take these params.*speed"):
        run_job(unknown_param, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_existing_export_folder_is_refused_before_the_job_runs(tmp_path: Path) -> None:
    (tmp_path / "hf").mkdir()
    out = corpus(
        "tasks",
        "--config",
        str(EXAMPLE),
        "--output",
        str(tmp_path / "out"),
        "--export-hf",
        str(tmp_path / "hf"),
    )
    assert out.returncode == 64
    assert "already exists" in out.stderr
    assert not (tmp_path / "out").exists()


def test_a_second_job_on_a_locked_folder_fails_at_once(tmp_path: Path) -> None:
    import fcntl

    config = write_config(tmp_path, batches=[[sample("a", "A"), sample("b", "B")]])
    out = tmp_path / "out"
    run_job(config, out)
    fd = os.open(out / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(TransientError, match="in use by another process"):
            run_job(config, out, resume=True)
    finally:
        os.close(fd)


def _start_big_job(tmp_path: Path, execution: str) -> tuple[subprocess.Popen[str], Path]:
    """A 400k-candidate example job in its own session, once it has committed a chunk."""
    config = tmp_path / "big.yaml"
    config.write_text(
        EXAMPLE.read_text()
        .replace("candidate_count: 64", "candidate_count: 400000")
        .replace("maximum_per_recipe: 1000", "maximum_per_recipe: 400000")
        + f"max_candidates: 400000\nexecution:\n{execution}"
    )
    err = tmp_path / "stderr.txt"
    proc = start_job(config, tmp_path / "out", os.environ | {"PYTHONPATH": str(REPO)}, err)
    deadline = time.monotonic() + 120
    while not (tmp_path / "out" / "progress.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"the job did not start: {err.read_text()}")
        time.sleep(0.05)
    return proc, err


@pytest.mark.timeout(180)
def test_worker_processes_exit_when_the_coordinator_is_killed(tmp_path: Path) -> None:
    """SIGKILL of `corpus tasks` alone: its spawned producer and workers must not linger."""
    proc, _ = _start_big_job(tmp_path, "  backend: process\n  max_workers: 2\n")
    try:
        workers = [pid for pid in live_in_group(proc.pid) if pid != proc.pid]
        assert len(workers) >= 3  # two pool workers and the producer (and a resource tracker)
        proc.send_signal(signal.SIGKILL)  # the coordinator only, not its group
        assert proc.wait(30) == -signal.SIGKILL
        deadline = time.monotonic() + 30
        while live_in_group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not live_in_group(proc.pid)
    finally:
        if live_in_group(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.timeout(180)
def test_a_burst_of_signals_still_ends_in_one_clean_cancel(tmp_path: Path) -> None:
    """A flood of SIGTERMs: one cancel, one 'stopping' line, exit 143, `cancelled` recorded."""
    proc, err_file = _start_big_job(tmp_path, "  batch_size: 64\n")
    try:
        for _ in range(200):
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.0005)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = err_file.read_text()
    assert proc.returncode == 143, err
    assert err.count("stopping after the current chunk") == 1  # pending signals may merge
    state = job_state(tmp_path / "out")
    assert state["state"] == "cancelled" and state["exit_code"] == 143
