"""Parallel generation shards and the ranked global merge, driven by the executor.

`executor_recipes.make_sharded` generates the scripted batches as shards; `make_ranked` ranks
candidates by their metadata (and calibration scores). Both must give exactly what the serial
path and the in-memory merge give.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from executor_recipes import RankedRecipe
from job_support import kill_group, run_job, start_job, wait_for_commit, wait_for_text

from corpus_assets.tasks.config import load_job_config
from corpus_assets.tasks.executor import DataJob
from corpus_assets.tasks.ranking import InMemoryRanking, SelectionPolicy, select_ranked_candidates
from corpus_assets.tasks.snapshot import load_snapshot
from corpus_assets.tasks.types import DataSample, GenerateContext, PublicTask
from corpus_assets.tasks.workers import RecipeError

HERE = Path(__file__).resolve().parent
ENV = os.environ | {
    "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), str(HERE)]),
    "HF_HUB_OFFLINE": "1",
}


def sample(task_id: str, text: str, answer: str = "1", **metadata: Any) -> dict[str, Any]:
    return {"id": task_id, "input": {"text": text}, "answer": answer, "metadata": metadata}


# duplicates (same id, same input), a rejection, and a second batch
BATCHES = [
    [sample(f"t{i:02d}", f"q{i % 9}") for i in range(12)]
    + [sample("t03", "q3"), sample("r00", "rejected")],
    [sample(f"u{i:02d}", f"p{i}") for i in range(7)],
]


def write_job(folder: Path, name: str, recipe: str, target: int, **fields: Any) -> Path:
    top = {k: fields.pop(k) for k in ("execution", "calibration", "max_candidates") if k in fields}
    config = {"recipe": recipe, "target_count": target, "purpose": "model", "params": fields}
    path = folder / name
    path.write_text(json.dumps(config | top))
    return path


def run(config: Path, output: Path, resume: bool = False) -> Any:
    return asyncio.run(DataJob(load_job_config(config), output, resume).run())


def log_lines(log: Path, kind: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith(kind + " ")]


@pytest.mark.parametrize(
    ("shard_size", "backend", "workers"),
    [(1, "thread", 1), (3, "thread", 2), (100, "thread", 1), (4, "process", 2)],
)
def test_sharded_generation_gives_what_serial_generation_gives(
    tmp_path: Path, shard_size: int, backend: str, workers: int
) -> None:
    common = {"batches": BATCHES, "reject": ["r00"], "need": 18}
    serial = run(
        write_job(tmp_path, "s.json", "executor_recipes:make", 18, **common), tmp_path / "s"
    )
    execution = {
        "shard_size": shard_size,
        "backend": backend,
        "max_workers": workers,
        "batch_size": 2,
    }
    sharded_config = write_job(
        tmp_path, "p.json", "executor_recipes:make_sharded", 18, execution=execution, **common
    )
    sharded = run(sharded_config, tmp_path / "p")
    assert sharded.dataset_id == serial.dataset_id
    for batch in (0, 1):
        name = f"work/batch-{batch}-candidates.jsonl"
        assert (tmp_path / "p" / name).read_bytes() == (tmp_path / "s" / name).read_bytes()
    report = json.loads((sharded.path / "report.json").read_text())
    totals = {"generated": 21, "rejected": 1, "duplicates": 1, "excluded": 0, "retained": 19}
    assert report["totals"] == totals
    assert not list((tmp_path / "p" / "work").glob("generation-*"))  # removed once imported


def test_complete_shard_files_are_reused_on_resume_even_when_never_committed(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    batch = [sample(f"t{i:02d}", f"q{i}") for i in range(12)]
    fail = {
        "kind": "ValueError",
        "on": "t06",
        "times": 1,
        "sleep": 0.5,
        "counter": str(tmp_path / "n"),
    }
    execution = {"shard_size": 2, "max_workers": 2, "batch_size": 2}
    config = write_job(
        tmp_path,
        "job.json",
        "executor_recipes:make_sharded",
        12,
        batches=[batch],
        fail=fail,
        log=str(log),
        execution=execution,
    )
    with pytest.raises(ValueError, match="scripted ValueError"):
        run(config, tmp_path / "out")
    work = tmp_path / "out" / "work"
    db = sqlite3.connect(work / "checkpoints.sqlite3")
    assert db.execute("SELECT consumed FROM batches").fetchone()[0] == 6  # shards 0-2 only
    db.close()
    for shard in (4, 5):  # generated and written by the other worker, never imported
        assert (work / f"generation-0-{shard}.json").is_file()
    before = len(log_lines(log, "shard"))
    snapshot = run(config, tmp_path / "out", resume=True)
    assert log_lines(log, "shard")[before:] == ["shard 0 6"]  # only the failed shard again
    uninterrupted = write_job(
        tmp_path, "clean.json", "executor_recipes:make_sharded", 12, batches=[batch]
    )
    assert snapshot.dataset_id == run(uninterrupted, tmp_path / "clean").dataset_id


def test_a_sharded_job_killed_mid_batch_resumes_to_the_same_snapshot(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    batch = [sample(f"t{i:02d}", f"q{i}") for i in range(40)]
    execution = {"shard_size": 4, "max_workers": 2, "batch_size": 2, "backend": "process"}
    config = write_job(
        tmp_path,
        "job.json",
        "executor_recipes:make_sharded",
        40,
        batches=[batch],
        log=str(log),
        slow=0.05,
        execution=execution,
    )
    proc = start_job(config, tmp_path / "out", ENV, tmp_path / "stderr")
    wait_for_text(log, "shard 0 12", proc)  # a few shards in, most still to come
    wait_for_commit(tmp_path / "out", proc)  # and the first of them admitted
    kill_group(proc)
    db = sqlite3.connect(tmp_path / "out" / "work" / "checkpoints.sqlite3")
    consumed, done = db.execute("SELECT consumed, done FROM batches").fetchone()
    db.close()
    assert 0 < consumed < 40 and not done  # killed mid-batch, with committed rows
    out = run_job(config, tmp_path / "out", ENV, resume=True)
    assert out.returncode == 0, out.stderr
    clean = write_job(tmp_path, "clean.json", "executor_recipes:make_sharded", 40, batches=[batch])
    assert (
        load_snapshot(tmp_path / "out" / "dataset").dataset_id
        == run(clean, tmp_path / "c").dataset_id
    )


def test_max_candidates_cuts_the_shard_plan_where_serial_generation_stops(tmp_path: Path) -> None:
    batch = [sample(f"t{i:02d}", f"q{i}") for i in range(10)]
    results = []
    for recipe in ("make", "make_sharded"):
        config = write_job(
            tmp_path,
            f"{recipe}.json",
            f"executor_recipes:{recipe}",
            3,
            batches=[batch],
            max_candidates=7,
            execution={"shard_size": 3},
        )
        snapshot = run(config, tmp_path / recipe)
        report = json.loads((snapshot.path / "report.json").read_text())
        results.append((snapshot.dataset_id, report["totals"]["generated"]))
    assert results[0] == results[1]
    assert results[0][1] == 7


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (
            [[0, 2], [3, 4]],
            "shard 1 is 3..4; shards must be contiguous from 0 (this one starting at 2)",
        ),
        ([[0, 5]], "1 to shard_size = 4 long"),
    ],
)
def test_a_bad_shard_plan_fails_naming_the_shard(
    tmp_path: Path, plan: list[list[int]], message: str
) -> None:
    config = write_job(
        tmp_path,
        "job.json",
        "executor_recipes:make_sharded",
        2,
        batches=[[sample(f"t{i}", f"q{i}") for i in range(5)]],
        plan=plan,
        execution={"shard_size": 4},
    )
    with pytest.raises(
        Exception, match=message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")
    ):
        run(config, tmp_path / "out")


def ranked_batch(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        sample(
            f"k{i:03d}",
            f"text {i}",
            priority=rng.choice([0.0, 0.5, 1.0, 2.0]),
            group=rng.choice(["g0", "g1", "g2"]),
            bucket=rng.choice(["b0", "b1", "b2", "b3"]),
            ineligible=rng.random() < 0.1,
        )
        for i in range(count)
    ]


POLICY = {"minimum_per_group": {"g2": 3, "g0": 2}, "maximum_per_bucket": 4}


def expected_ranked(batch: list[dict[str, Any]], target: int) -> tuple[str, ...]:
    """What the in-memory merge selects from the same candidates."""
    recipe = RankedRecipe(POLICY)
    context = GenerateContext(seed=0, batch_index=0, target_count=target, purpose="model")
    ranked = []
    for spec in batch:
        task = PublicTask(spec["id"], spec["input"], spec["metadata"])
        place = recipe.rank(DataSample(task, {"answer": "1"}), (), context)
        if place is not None:
            ranked.append(place)
    policy = SelectionPolicy(POLICY["minimum_per_group"], POLICY["maximum_per_bucket"])
    return select_ranked_candidates(InMemoryRanking(ranked), target, policy).task_ids


@pytest.mark.parametrize(("backend", "workers"), [("thread", 1), ("process", 2)])
def test_ranked_selection_through_the_executor_equals_the_in_memory_merge(
    tmp_path: Path, backend: str, workers: int
) -> None:
    batch = ranked_batch(60, seed=7)
    execution = {"backend": backend, "max_workers": workers, "batch_size": 7}
    config = write_job(
        tmp_path,
        "job.json",
        "executor_recipes:make_ranked",
        12,
        batches=[batch],
        policy=POLICY,
        execution=execution,
    )
    snapshot = run(config, tmp_path / "out")
    public = [json.loads(line)["task_id"] for line in (snapshot.path / "public.jsonl").open()]
    assert tuple(public) == expected_ranked(batch, 12)
    report = json.loads((snapshot.path / "report.json").read_text())
    eligible = sum(1 for s in batch if not s["metadata"]["ineligible"])
    assert report["selection"]["statistics"] == {"eligible": eligible}


def test_committed_ranking_chunks_are_not_ranked_again(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    first = ranked_batch(20, seed=1)  # cannot fill 30: a second batch is needed
    second = [dict(s, id="z" + s["id"]) for s in ranked_batch(20, seed=2)]
    fail = {"kind": "ValueError", "on": "zk005", "times": 1, "counter": str(tmp_path / "n")}
    config = write_job(
        tmp_path,
        "job.json",
        "executor_recipes:make_ranked",
        30,
        batches=[first, second],
        policy={"maximum_per_bucket": 100},
        fail=fail,
        log=str(log),
        execution={"batch_size": 4},
    )
    with pytest.raises(ValueError, match="scripted"):
        run(config, tmp_path / "out")
    ranked_before = log_lines(log, "rank")
    assert len(ranked_before) == 20  # batch 0 ranked, then its selection asked for more
    run(config, tmp_path / "out", resume=True)
    ranked_after = log_lines(log, "rank")[len(ranked_before) :]
    assert sorted(r.split()[1] for r in ranked_after) == sorted(s["id"] for s in second)


def test_a_policy_for_calibrated_jobs_only_leaves_plain_jobs_to_select(tmp_path: Path) -> None:
    batch = ranked_batch(10, seed=3)
    plain = write_job(
        tmp_path,
        "plain.json",
        "executor_recipes:make_ranked",
        4,
        batches=[batch],
        policy={"calibrated_only": True},
    )
    snapshot = run(plain, tmp_path / "plain")
    public = [json.loads(line)["task_id"] for line in (snapshot.path / "public.jsonl").open()]
    assert public == [s["id"] for s in batch[:4]]  # the scripted select: pool order


def test_a_rank_that_breaks_the_protocol_fails_the_job(tmp_path: Path) -> None:
    batch = [sample("a", "x", priority="high")]
    config = write_job(
        tmp_path, "job.json", "executor_recipes:make_ranked", 1, batches=[batch], policy={}
    )
    with pytest.raises((RecipeError, ValueError)):
        run(config, tmp_path / "out")
