"""A live calibration keeps each answer the moment it arrives: a kill, a cancel or a failed
sibling request re-asks at most the requests in flight (<= `max_concurrency`).

Jobs run as `corpus tasks` subprocesses against `tests/support/openai_server.py` on loopback,
which logs every chat request it receives as (prompt, n, seed). A request is named by its task
and its seed (the config's seed + the first repeat it asks), so a request sent again after an
interruption is a (task, seed) the server saw before. Three calls of 16 tasks are asked two at
a time, 4 requests in flight: before the answer journal, a kill after 20 answered requests
re-asked every answered task of the calls not yet committed.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from job_support import IMPORT_PATH, job_state, kill_group, last_json, run_job, start_job
from support.model_server import ModelServer
from support.waiting import wait_for

ENV = os.environ | {"PYTHONPATH": IMPORT_PATH, "HF_HUB_OFFLINE": "1"}
LIVE = "corpus_assets.calibrators.openai:live_responses"
CONCURRENCY = 4
SEED = 5
TASKS = 48
MODES = ["right", "wrong", "right", "length"] * (TASKS // 4)  # the same answers with or without n
MODES[10] = "busy"  # its first request gets a 429 (Retry-After 0.2 s), then it is "right"
BUSY = ("b0-10", SEED)
EXECUTION = {"batch_size": 16, "max_workers": 2}  # 32 tasks asked at once, 4 requests in flight
ANSWERED = 20  # requests the server has answered when the job is interrupted


def config(path: Path, url: str, execution: dict[str, Any] | None = None, **params: Any) -> Path:
    """The job config; `params` over the calibrator's defaults."""
    doc = {
        "recipe": "live_recipe:make",
        "target_count": TASKS,
        "purpose": "model",
        "params": {"batches": [MODES]},
        "calibration": {
            "implementation": LIVE,
            "repeats": 2,
            "params": {
                "base_url": url,
                "model": "test-model",
                "harness_ref": "sum-harness-v1",
                "verifier_digest": "exact-sum-v1",
                "seed": SEED,
                "max_concurrency": CONCURRENCY,
                **params,
            },
        },
        "execution": EXECUTION | (execution or {}),
    }
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def requests(server: ModelServer) -> Counter[tuple[str, int]]:
    """Chat requests received per (task id, seed)."""
    return Counter((prompt.split(":")[0], seed) for prompt, _, seed in server.stats()["log"])


@dataclass(frozen=True)
class Reference:
    dataset_id: str
    reports: dict[str, bytes]


def answered(before: Counter[tuple[str, int]]) -> set[tuple[str, int]]:
    """The requests the server answered: all it received but b0-10's first (a 429)."""
    return {key for key, count in before.items() if key != BUSY or count > 1}


def reports(folder: Path) -> dict[str, bytes]:
    """The record's report files (`record_dir`), by name."""
    return {p.name: p.read_bytes() for p in sorted(folder.glob("batch-*-repeat-*.json"))}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    """The dataset_id and record reports of the job run once without interruption."""
    tmp = tmp_path_factory.mktemp("uninterrupted")
    server = ModelServer(tmp / "server.log", "--latency", "0.02")
    try:
        job = config(tmp / "job.json", server.url, record_dir="record")
        done = run_job(job, tmp / "out", ENV)
        assert done.returncode == 0, done.stderr
        assert sum(requests(server).values()) == TASKS + 1  # a request per task, b0-10's 429
        found = reports(tmp / "record")
        assert len(found) == 2
        yield Reference(str(last_json(done.stdout)["dataset_id"]), found)
    finally:
        server.stop()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[ModelServer]]:
    started: list[ModelServer] = []
    yield started
    for server in started:
        server.stop()


def interrupted_then_resumed(
    tmp_path: Path, server: ModelServer, how: signal.Signals, **params: Any
) -> tuple[Counter[tuple[str, int]], Counter[tuple[str, int]], str]:
    """Start the job, send `how` to it after ANSWERED answered requests, resume it to its end:
    the requests before and after, and the resumed job's dataset_id."""
    job = config(tmp_path / "job.json", server.url, **params)
    out = tmp_path / "out"
    proc = start_job(job, out, ENV, tmp_path / "stderr")
    wait_for(lambda: server.answered() >= ANSWERED, 60, "answered requests", watch=[proc])
    if how is signal.SIGKILL:
        kill_group(proc)  # checks the job died of the SIGKILL
        assert job_state(out)["state"] == "running"
    else:
        os.kill(proc.pid, how)
        proc.communicate(timeout=60)
        assert proc.returncode == 128 + how, (tmp_path / "stderr").read_text()
        assert job_state(out)["state"] == "cancelled"
    before = requests(server)
    assert ANSWERED <= sum(before.values()) < TASKS * 2  # interrupted while calibrating
    resumed = run_job(job, out, ENV, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    after = requests(server) - before
    return before, after, str(last_json(resumed.stdout)["dataset_id"])


@pytest.mark.parametrize("ignore_n", [False, True], ids=["n", "ignore-n"])
def test_a_kill_re_asks_at_most_the_requests_in_flight(
    tmp_path: Path, servers: list[ModelServer], uninterrupted: Reference, ignore_n: bool
) -> None:
    """SIGKILL after 20 answered requests: the resumed job asks again at most
    `max_concurrency` requests the server saw, and publishes the uninterrupted dataset and
    record reports (with `record_dir`, whose own journal holds only whole calls). A server
    that ignores `n` gets one request per (task, repeat)."""
    args = ["--latency", "0.02"] + (["--ignore-n"] if ignore_n else [])
    server = ModelServer(tmp_path / "server.log", *args)
    servers.append(server)
    before, after, dataset_id = interrupted_then_resumed(
        tmp_path, server, signal.SIGKILL, record_dir="record"
    )
    again = answered(before) & set(after)
    assert len(again) <= CONCURRENCY, sorted(again)
    assert max((n for key, n in after.items() if key != BUSY), default=1) == 1
    asked = {task for task, _ in before + after}
    assert asked == {f"b0-{i:02d}" for i in range(TASKS)}
    assert dataset_id == uninterrupted.dataset_id
    assert reports(tmp_path / "record") == uninterrupted.reports  # the record holds them all


def test_a_cancel_re_asks_at_most_the_requests_in_flight(
    tmp_path: Path, servers: list[ModelServer], uninterrupted: Reference
) -> None:
    """SIGTERM after 20 answered requests: the job stops (exit 143, cancelled), the requests
    in flight are dropped, and the resume asks again at most `max_concurrency` of them."""
    server = ModelServer(tmp_path / "server.log", "--latency", "0.02")
    servers.append(server)
    before, after, dataset_id = interrupted_then_resumed(tmp_path, server, signal.SIGTERM)
    again = answered(before) & set(after)
    assert len(again) <= CONCURRENCY, sorted(again)
    assert {task for task, _ in before + after} == {f"b0-{i:02d}" for i in range(TASKS)}
    assert dataset_id == uninterrupted.dataset_id


def test_a_failed_sibling_request_re_asks_at_most_the_requests_in_flight(
    tmp_path: Path, servers: list[ModelServer], uninterrupted: Reference
) -> None:
    """One request fails (a 429 with no request retry left) in the middle of a call: the call
    and the job's attempt fail, the executor retries the attempt, and the retry asks again
    the failed request and at most `max_concurrency` answered ones (the other call's requests
    in flight when the failure ended the attempt), never what had been answered before."""
    server = ModelServer(tmp_path / "server.log", "--latency", "0.02")
    servers.append(server)
    job = config(
        tmp_path / "job.json", server.url, request_retries=0,
        execution={"max_retries": 1, "retry_delay": 0.1},
    )  # fmt: skip
    done = run_job(job, tmp_path / "out", ENV)
    assert done.returncode == 0, done.stderr
    assert "HTTP 429" in done.stderr and "; retry 1 in" in done.stderr  # the attempt failed
    asked = requests(server)
    assert asked[BUSY] == 2
    again = sum(count - 1 for key, count in asked.items() if key != BUSY)
    assert again <= CONCURRENCY, asked
    assert len(asked) == TASKS
    assert last_json(done.stdout)["dataset_id"] == uninterrupted.dataset_id
