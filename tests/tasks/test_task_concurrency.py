"""Builds of one task partition that meet, and a task job reading a corpus build.

Real processes throughout. `corpus build` of a task config runs `corpus tasks --attach`, which
holds the partition's lock (`<root>/locks/<hash12>/tasks.lock`) for its whole run: a second
build waits, naming the holder, then reuses the published snapshot or, if the holder died,
resumes its job. A job that reads a corpus build holds that build's shard lock shared while it
reads, so a cleanup of the build waits for it.

This module is also the recipe factory `test_task_concurrency:gated_cloze` of the last test
(the job's interpreter imports it from tests/tasks).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from job_support import (
    IMPORT_PATH,
    REPO,
    STARTED,
    calls,
    checkpoint_state,
    dataset_files,
    expected_cleans,
    job_config,
    job_env,
    last_json,
    read_log,
)
from support.corpus import start_corpus
from support.processes import live_in_group, process, running
from support.waiting import wait_for

from corpus_assets.core.store import registry as corpus_registry
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import read_holder
from corpus_assets.recipes.cloze import ClozeRecipe
from corpus_assets.recipes.cloze import create_recipe as create_cloze
from corpus_assets.tasks.attach import PUBLISHED, partition_lock
from corpus_assets.tasks.config import load_job_config
from corpus_assets.tasks.registry import job_folder
from corpus_assets.tasks.types import DataSample, GenerateContext

HERE = Path(__file__).resolve().parent
ARITHMETIC = REPO / "examples" / "tasks" / "arithmetic.yaml"
TINY = REPO / "examples" / "tiny.toml"
TRIALS = 10  # 5-6 s each on two idle cores (about 15 s on a busy machine): 55-150 s in all
MEET_S = 200.0  # more rounds until the builds have met at the lock, this long at most
WAIT_S = 120.0
POLL_S = 0.02


def start(argv: list[str], env: dict[str, str], err: Path) -> subprocess.Popen[str]:
    """`corpus ARGV...` in its own session, stderr to the file `err`."""
    with open(err, "w", encoding="utf-8") as stderr:
        proc = start_corpus(
            *argv, environ=env, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True
        )
    STARTED.append(proc)
    return proc


def start_build(config: Path, root: Path, env: dict[str, str], err: Path) -> subprocess.Popen[str]:
    """`corpus build CONFIG --root ROOT --progress` (the stage's lines reach `err`)."""
    return start(["build", str(config), "--root", str(root), "--progress"], env, err)


def lone_build(config: Path, root: Path, env: dict[str, str]) -> dict[str, Any]:
    """The summary of a build of `config` alone on `root`."""
    err = root.with_suffix(".err")
    summary, _ = finish(start_build(config, root, env, err), err)
    return summary


def finish(proc: subprocess.Popen[str], err: Path) -> tuple[dict[str, Any], str]:
    """The build's summary and its stderr, once it has exited 0."""
    out, _ = proc.communicate(timeout=WAIT_S)
    text = err.read_text(encoding="utf-8")
    assert proc.returncode == 0, text[-3000:]
    summary: dict[str, Any] = json.loads(out)
    return summary, text


def build_env() -> dict[str, str]:
    """This environment, with tests/tasks importable (the test recipes) and no test controls."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAULT_", "CLOZE_"))}
    return env | {"PYTHONPATH": IMPORT_PATH, "HF_HUB_OFFLINE": "1"}


@pytest.mark.timeout(300)
def test_three_builds_of_one_task_config_at_once_publish_the_lone_builds_snapshot(
    tmp_path: Path,
) -> None:
    lone = lone_build(ARITHMETIC, tmp_path / "lone", build_env())
    want = dataset_files(Path(lone["job_folder"]))
    waited = trial = 0
    began = time.monotonic()
    # TRIALS rounds, then more until the builds have met at the lock (they almost always have
    # by then; the three processes' start-up jitter can keep them apart), within MEET_S
    while trial < TRIALS or (not waited and time.monotonic() - began < MEET_S):
        trial += 1
        root = tmp_path / f"trial-{trial}"
        errs = [tmp_path / f"trial-{trial}-{i}.err" for i in range(3)]
        procs = [start_build(ARITHMETIC, root, build_env(), err) for err in errs]
        done = [finish(proc, err) for proc, err in zip(procs, errs, strict=True)]
        assert {s["dataset_id"] for s, _ in done} == {lone["dataset_id"]}, trial
        folder = Path(done[0][0]["job_folder"])
        assert dataset_files(folder) == want, trial
        said = [text for _, text in done]
        assert not any("corpus tasks: error:" in text for text in said), said  # none retried
        # one build ran the job; the other two reused it (after waiting, if they came early)
        assert sum("tasks: starting the task job in" in text for text in said) == 1, said
        assert sum(PUBLISHED in text for text in said) == 2, said
        waited += sum("tasks: waiting for the task job of" in text for text in said)
    assert waited > 0, f"the builds never met at the lock in {trial} rounds"


@pytest.mark.timeout(300)
def test_a_killed_holder_is_resumed_by_one_waiter_and_reused_by_the_other(
    tmp_path: Path,
) -> None:
    root, log, gate = tmp_path / "data", tmp_path / "calls.log", tmp_path / "gate"
    config = job_config(tmp_path / "held.json")
    loaded = load_job_config(config)
    folder, lock = job_folder(root, loaded), partition_lock(root, loaded)
    env = job_env(log, "clean:40", gate)  # the job stops at its 40th clean call
    errs = [tmp_path / f"build-{i}.err" for i in range(3)]
    builds = [start_build(config, root, env, err) for err in errs]
    wait_for(
        lambda: "pause clean" in read_log(log) and read_holder(lock) is not None,
        WAIT_S,
        "a job holding the partition paused mid-batch",
        watch=builds,
    )
    holder = read_holder(lock)
    assert holder is not None and holder.host == socket.gethostname()
    job = process(holder.pid)
    assert job is not None
    assert job.cmdline.split(b"\0")[3:5] == [b"tasks", b"--attach"]  # the stage runner's child
    owner = next(b for b in builds if b.pid == job.parent)  # its `corpus build`
    waiters = [(b, e) for b, e in zip(builds, errs, strict=True) if b is not owner]
    waiting = f"tasks: waiting for the task job of {loaded.partition_key}: held by {holder}\n"
    for _, err in waiters:  # the line comes again while they wait: their stage's heartbeat
        wait_for(
            lambda e=err: e.read_text().count(waiting) >= 2,
            WAIT_S,
            "waiters saying so",
            watch=builds,
        )

    before = len(read_log(log))  # the paused job logs no more; the others have not started
    # the holder dies with its build (no retry of it): SIGKILL the build, then the job
    os.killpg(owner.pid, signal.SIGKILL)
    owner.communicate(timeout=WAIT_S)
    assert owner.returncode == -signal.SIGKILL
    os.killpg(holder.pid, signal.SIGKILL)  # the job's own process group, workers and all
    wait_for(lambda: not running(holder.pid) and not live_in_group(holder.pid), WAIT_S, "the kill")
    state = checkpoint_state(folder)  # what the dead job committed; a resume pauses at once
    assert state["batches"].get(0, (0, False))[0] > 0 and not (folder / "dataset").exists()
    gate.touch()

    done = [finish(build, err) for build, err in waiters]
    said = [text for _, text in done]
    resumed = f"tasks: resuming the task job in {folder}\n"
    assert sorted(resumed in text for text in said) == [False, True], said
    assert sorted(PUBLISHED in text for text in said) == [False, True], said
    again = read_log(log)[before:]
    assert Counter(calls(again, "clean")) == expected_cleans(state["batches"], 2)  # none twice

    lone = lone_build(config, tmp_path / "lone", job_env(tmp_path / "lone.log"))
    assert {s["dataset_id"] for s, _ in done} == {lone["dataset_id"]}
    assert dataset_files(folder) == dataset_files(Path(lone["job_folder"]))


def test_attach_takes_over_a_folder_killed_before_its_job_json_and_nothing_else(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    loaded = load_job_config(ARITHMETIC)
    folder = job_folder(root, loaded)
    (folder / "work").mkdir(parents=True)
    (folder / ".lock").write_text("123\n")
    (folder / "config.json").write_text("{}")
    argv = ["tasks", "--config", str(ARITHMETIC), "--output", str(folder), "--root", str(root)]
    env = build_env()
    plain = subprocess.run(
        [sys.executable, "-m", "corpus_assets.cli", *argv], env=env, capture_output=True, text=True
    )
    assert plain.returncode == 64, plain.stderr
    assert "already exists; a new job needs a new folder" in plain.stderr
    elsewhere = [*argv[:4], str(tmp_path / "other"), *argv[5:], "--attach"]
    other = subprocess.run(
        [sys.executable, "-m", "corpus_assets.cli", *elsewhere],
        env=env,
        capture_output=True,
        text=True,
    )
    assert other.returncode == 64, other.stderr
    assert f"--attach runs the job of task partition {loaded.partition_key} in" in other.stderr
    attached = subprocess.run(
        [sys.executable, "-m", "corpus_assets.cli", *argv, "--attach"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert attached.returncode == 0, attached.stderr
    assert f"tasks: starting the task job in {folder}" in attached.stderr
    assert (folder / "dataset" / "manifest.json").is_file()


# -- a job reading a corpus build ----------------------------------------------------------


def gated_cloze(**params: object) -> GatedCloze:
    """The cloze recipe, stopping twice where the folder CLOZE_GATES says (see `GatedCloze`)."""
    inner = create_cloze(**params)
    return GatedCloze(inner.candidate_count, inner.min_words, inner.min_word_length)


class GatedCloze(ClozeRecipe):
    """Creates `reading` in CLOZE_GATES as batch 0 starts reading the corpus, then waits for
    `read`; creates `projecting` at its first training row, then waits for `projected`."""

    def generate(self, context: GenerateContext) -> Iterator[DataSample]:
        if context.batch_index == 0:
            _gate("reading", "read")
        yield from super().generate(context)

    def training_row(self, sample: DataSample) -> dict[str, Any]:
        _gate("projecting", "projected")
        return super().training_row(sample)


def _gate(mark: str, wait_for: str) -> None:
    folder = Path(os.environ["CLOZE_GATES"])
    (folder / mark).touch()
    deadline = time.monotonic() + WAIT_S
    while not (folder / wait_for).exists() and time.monotonic() < deadline:
        time.sleep(POLL_S)


def try_flock(path: Path, mode: int) -> bool:
    """Whether a new descriptor of `path` gets the flock `mode` at once (released again)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def run_stage(root: Path, *argv: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "corpus_assets.cli", *argv, "--root", str(root)],
        env=build_env(),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.timeout(300)
def test_a_cleanup_of_a_corpus_build_waits_while_a_task_job_reads_it(tmp_path: Path) -> None:
    root, gates = tmp_path / "data", tmp_path / "gates"
    gates.mkdir()
    for stage in ("fetch", "shard"):
        run_stage(root, "run", "--stage", stage, "--config", str(TINY))
    corpus = corpus_registry.register(TINY, Layout(root)).config
    shards, lock = Layout(root).shards(corpus), Layout(root).stage_lock(corpus.hash12, "shard")
    config = tmp_path / "gated.json"
    config.write_text(
        json.dumps(
            {
                "recipe": "test_task_concurrency:gated_cloze",
                "name": "gated",
                "target_count": 8,
                "purpose": "harness",
                "params": {"candidate_count": 16},
                "inputs": [{"corpus": corpus.partition_key}],
            }
        )
    )
    env = build_env() | {"CLOZE_GATES": str(gates)}
    job = start(
        ["tasks", "--config", str(config), "--output", str(tmp_path / "job"), "--root", str(root)],
        env,
        tmp_path / "job.err",
    )
    wait_for(
        lambda: (gates / "reading").exists(), WAIT_S, "the job reading the corpus", watch=[job]
    )
    assert not try_flock(lock, fcntl.LOCK_EX)  # a writer (shard stage, cleanup) must wait
    assert try_flock(lock, fcntl.LOCK_SH)  # another reader need not
    cleanup_err = tmp_path / "cleanup.err"
    argv = ["cleanup", "--config", str(TINY), "--root", str(root)]
    cleanup = start(argv, build_env(), cleanup_err)
    waiting = "waiting for the shard stage"
    wait_for(
        lambda: waiting in cleanup_err.read_text(),
        WAIT_S,
        "the cleanup waiting",
        watch=[job, cleanup],
    )
    assert (shards / "_MANIFEST.json").is_file()

    (gates / "read").touch()  # the search ends; the job lets go of the corpus before projecting
    wait_for(lambda: (gates / "projecting").exists(), WAIT_S, "the job projecting", watch=[job])
    out, _ = cleanup.communicate(timeout=WAIT_S)
    assert cleanup.returncode == 0, cleanup_err.read_text()
    assert json.loads(out)["removed"] and not shards.exists()
    assert try_flock(lock, fcntl.LOCK_EX)

    (gates / "projected").touch()
    out, _ = job.communicate(timeout=WAIT_S)
    assert job.returncode == 0, (tmp_path / "job.err").read_text()[-3000:]
    manifest = json.loads((Path(last_json(out)["dataset_path"]) / "manifest.json").read_text())
    assert manifest["sources"]["corpus_inputs"][0]["partition_key"] == corpus.partition_key
