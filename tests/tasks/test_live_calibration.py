"""Calibration against a live model server: the real `openai` client, the real executor.

Each test starts `tests/support/openai_server.py` on loopback; its answers follow the mode in
each prompt (`live_recipe.py`), and its `/stats` count what it was asked and how many requests
were in flight at once. Jobs run as `corpus tasks` subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import support.model_server as support_model_server
from job_support import IMPORT_PATH, kill_group, last_json, run_job, start_job
from support.processes import stop_group
from support.waiting import wait_for

from corpus_assets.calibrators.openai import live_responses
from corpus_assets.core.errors import ConfigError
from corpus_assets.tasks.snapshot import load_snapshot

HERE = Path(__file__).resolve().parent
ENV = os.environ | {"PYTHONPATH": IMPORT_PATH, "HF_HUB_OFFLINE": "1"}
LIVE = "corpus_assets.calibrators.openai:live_responses"
RECORDED = "corpus_assets.recipes.arithmetic_calibration:recorded_responses"
IDENTITY = {"harness_ref": "sum-harness-v1", "verifier_digest": "exact-sum-v1"}


class ModelServer(support_model_server.ModelServer):
    """The test server, its requests counted per task."""

    def asked(self) -> Counter[str]:
        """Chat requests received per task id (the prompt's first word)."""
        return Counter(_task_of(prompt) for prompt, _, _ in self.stats()["log"])


def _task_of(prompt: str) -> str:
    return prompt.split(":")[0].split(" ")[0]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., ModelServer]]:
    """Start test servers (`serve(*args)`); every one is stopped after the test."""
    started: list[ModelServer] = []

    def start(*args: str) -> ModelServer:
        server = ModelServer(tmp_path / f"server-{len(started)}.log", *args)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_group(server.proc, grace=5)


def live_job(
    path: Path,
    url: str,
    batches: list[list[str]],
    target: int,
    repeats: int = 2,
    execution: dict[str, Any] | None = None,
    recipe: str = "live_recipe:make",
    recipe_params: dict[str, Any] | None = None,
    **params: Any,
) -> Path:
    """A job config calibrated against the server at `url`; `params` over the defaults."""
    config = {
        "recipe": recipe,
        "target_count": target,
        "purpose": "model",
        "params": {"batches": batches, **(recipe_params or {})},
        "calibration": {
            "implementation": LIVE,
            "repeats": repeats,
            "params": {"base_url": url, "model": "test-model", **IDENTITY, **params},
        },
        "execution": {"batch_size": 4} | (execution or {}),
    }
    path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    return path


def probes(output: Path) -> dict[str, list[tuple[Any, str | None, float | None]]]:
    """Per task, (response, failure_reason, score) by repeat."""
    found: dict[str, list[tuple[Any, str | None, float | None]]] = {}
    for row in load_snapshot(output / "dataset").probes():
        found.setdefault(row["task_id"], []).append(
            (row["response"], row["failure_reason"], row["score"])
        )
    return found


def manifest(output: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((output / "dataset" / "manifest.json").read_text())
    return doc


def provenances(output: Path) -> list[dict[str, Any]]:
    """Every distinct provenance of every batch in the manifest's calibration."""
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("kind") in ("live_responses", "recorded_responses"):
                found.append(value)
                return
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(manifest(output))
    return found


MODES = ["right", "wrong", "half", "malformed", "length", "filter", "right", "half"]


def test_a_live_job_grades_the_answers_and_its_reports_replay_to_the_same_dataset(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve("--digest", "sha256:feedface")
    batches = [MODES, ["wrong", "right", "half", "right"]]
    config = live_job(tmp_path / "live.json", server.url, batches, 10, record_dir="record")
    out = run_job(config, tmp_path / "live", ENV)
    assert out.returncode == 0, out.stderr
    found = probes(tmp_path / "live")
    assert found["b0-00"] == [("7", None, 1.0)] * 2
    assert found["b0-01"] == [("9", None, 0.0)] * 2
    assert found["b0-02"] == [("9", None, 1.0), ("10", None, 0.0)]
    assert found["b0-03"] == [("somewhere around there, I think", None, 0.0)] * 2
    assert found["b0-04"] == [("The answer is", "length", None)] * 2
    assert found["b0-05"] == [(None, "content_filter", None)] * 2
    assert found["b1-01"] == [("108", None, 1.0)] * 2
    # one request per task (n = repeats), the model checked once before any task
    stats = server.stats()
    assert server.asked() == Counter(f"b0-{i:02d}" for i in range(8)) + Counter(
        f"b1-{i:02d}" for i in range(4)
    )
    assert {n for _, n, _ in stats["log"]} == {2}
    assert stats["models"] == 1
    # the provenance is what the server said, and names the reports
    provenance = provenances(tmp_path / "live")
    assert len(provenance) == 2  # one per batch: every call of a batch says the same
    first = provenance[0]
    assert (first["model_ref"], first["backend_model_digest"]) == ("test-model", "sha256:feedface")
    record = tmp_path / "record"
    reports = [[record / f"batch-{b}-repeat-{r}.json" for r in range(2)] for b in range(2)]
    assert [[Path(p["path"]) for p in prov["reports"]] for prov in provenance] == reports
    trials = {json.loads(path.read_text())["trial_id"] for batch in reports for path in batch}
    assert len(trials) == 4
    report = json.loads(reports[0][1].read_text())
    assert report["results"][2] == {
        "task_id": "b0-02", "response": "10", "failure_reason": None, "score": None,
    }  # fmt: skip
    # the same job, replayed from the reports with no server
    stop_group(server.proc, grace=5)
    replay = json.loads(config.read_text())
    replay["calibration"] = {
        "implementation": RECORDED,
        "repeats": 2,
        "params": {
            "model_ref": first["model_ref"],
            "backend_model_digest": first["backend_model_digest"],
            **IDENTITY,
            "reports": [[str(p) for p in batch] for batch in reports],
        },
    }
    (tmp_path / "replay.json").write_text(json.dumps(replay))
    again = run_job(tmp_path / "replay.json", tmp_path / "replayed", ENV)
    assert again.returncode == 0, again.stderr
    assert last_json(again.stdout)["dataset_id"] == last_json(out.stdout)["dataset_id"]


def test_a_server_serving_another_model_fails_the_job_before_any_task_is_sent(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve("--model", "another-model")
    config = live_job(tmp_path / "job.json", server.url, [["right"] * 4], 4)
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 65, out.stderr
    assert "serves 'another-model', not 'test-model'" in out.stderr
    assert server.stats()["chat"] == 0


def test_no_more_than_max_concurrency_requests_are_in_flight(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve("--latency", "0.15")
    execution = {"batch_size": 8, "max_workers": 3}  # up to 24 tasks asked at once
    config = live_job(
        tmp_path / "job.json", server.url, [["right"] * 24], 24, execution=execution,
        max_concurrency=4,
    )  # fmt: skip
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 0, out.stderr
    assert server.stats()["max_in_flight"] == 4


def test_faults_are_retried_inside_the_calibrator(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve("--hang", "6")  # the first request of b0-02 outlives its timeout
    modes = ["flaky", "busy", "hang", "right"]
    config = live_job(tmp_path / "job.json", server.url, [modes], 4, request_timeout_s=2)
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 0, out.stderr
    assert server.asked() == {"b0-00": 3, "b0-01": 2, "b0-02": 2, "b0-03": 1}
    assert all(
        p == [(str(7 + i), None, 1.0)] * 2 for i, p in enumerate(probes(tmp_path / "out").values())
    )


def test_a_server_that_stays_down_is_a_transient_failure_of_the_job(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve()
    config = live_job(
        tmp_path / "job.json", server.url, [["down"]], 1, request_retries=1,
        execution={"max_retries": 1, "retry_delay": 0.1},
    )  # fmt: skip
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 75, out.stderr
    assert "after 2 attempt(s)" in out.stderr
    assert "HTTP 500" in out.stderr
    assert server.asked() == {"b0-00": 4}  # (1 + 1 request retry) x (1 + 1 job retry)


def test_answers_already_given_are_not_asked_again_when_a_call_is_retried(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    """A call whose last task fails is retried by the executor; with record_dir its answered
    tasks come from the record's journal, and the server is asked only about the failed one."""
    server = serve()
    config = live_job(
        tmp_path / "job.json", server.url, [["right", "wrong", "down"]], 3, request_retries=0,
        record_dir="record", execution={"max_retries": 2, "retry_delay": 0.1},
    )  # fmt: skip
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 75, out.stderr
    assert server.asked() == {"b0-00": 1, "b0-01": 1, "b0-02": 3}


def test_a_server_that_ignores_n_is_asked_once_per_repeat(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve("--ignore-n")
    execution = {"batch_size": 1}  # one task at a time: the second knows n is ignored
    config = live_job(
        tmp_path / "job.json", server.url, [["right", "wrong"]], 2, repeats=3, seed=5,
        execution=execution,
    )  # fmt: skip
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 0, out.stderr
    log = [(_task_of(prompt), n, seed) for prompt, n, seed in server.stats()["log"]]
    first = [("b0-00", 1, 6), ("b0-00", 1, 7), ("b0-00", 3, 5)]  # sorted
    assert sorted(log[:3]) == first
    assert sorted(log[3:]) == [("b0-01", 1, 5), ("b0-01", 1, 6), ("b0-01", 1, 7)]
    assert probes(tmp_path / "out")["b0-01"] == [("9", None, 0.0)] * 3


def test_the_recipe_prompt_or_a_chat_input_gives_the_messages(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve()
    prompted = live_job(
        tmp_path / "p.json", server.url, [["right"]], 1, recipe="live_recipe:make_prompted"
    )
    assert run_job(prompted, tmp_path / "p", ENV).returncode == 0
    chat = live_job(tmp_path / "c.json", server.url, [["wrong"]], 1, recipe_params={"chat": True})
    assert run_job(chat, tmp_path / "c", ENV).returncode == 0
    prompts = [prompt for prompt, _, _ in server.stats()["log"]]
    assert prompts == ["b0-00 asks: 0 + 7 = ? [right]", "b0-00: 0 + 7 = ? [wrong]"]
    assert probes(tmp_path / "p")["b0-00"] == [("7", None, 1.0)] * 2
    assert probes(tmp_path / "c")["b0-00"] == [("8", None, 0.0)] * 2
    # no prompt method, an input that is no chat: refused naming the task, nothing sent
    bare = live_job(
        tmp_path / "b.json", server.url, [["right"]], 1, recipe="live_recipe:make_unprompted"
    )
    out = run_job(bare, tmp_path / "b", ENV)
    assert out.returncode == 65, out.stderr
    assert "task 'b0-00' gives no chat messages" in out.stderr
    assert server.stats()["chat"] == 2


def _committed(output: Path) -> set[str]:
    db = sqlite3.connect(output / "work" / "checkpoints.sqlite3")
    try:
        return {str(t) for (t,) in db.execute("SELECT DISTINCT task_id FROM responses")}
    finally:
        db.close()


def test_a_job_killed_while_calibrating_resumes_without_asking_any_task_twice(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    gate = tmp_path / "gate"
    server = serve("--hold-after", "8", "--gate", str(gate))
    modes = ["right", "wrong", "half", "right"] * 4
    config = live_job(
        tmp_path / "job.json", server.url, [modes], 16, record_dir="record",
        execution={"batch_size": 4}, max_concurrency=4,
    )  # fmt: skip
    proc = start_job(config, tmp_path / "out", ENV, tmp_path / "stderr")
    # two calls answered and committed, the third's four requests held at the server
    wait_for(
        lambda: server.stats()["held"] == 4 and len(_committed(tmp_path / "out")) == 8,
        60, "two committed calls and a held one", watch=[proc],
    )  # fmt: skip
    kill_group(proc)
    committed = _committed(tmp_path / "out")
    before = server.asked()
    gate.touch()
    out = run_job(config, tmp_path / "out", ENV, resume=True)
    assert out.returncode == 0, out.stderr
    after = server.asked() - before
    assert not committed & set(after)  # nothing committed is asked again
    assert after == Counter(f"b0-{i:02d}" for i in range(8, 16))  # the rest, once each
    # the same dataset and reports as a job never interrupted
    fresh = serve()
    uninterrupted = live_job(
        tmp_path / "fresh.json", fresh.url, [modes], 16, record_dir="fresh-record",
        execution={"batch_size": 4}, max_concurrency=4,
    )  # fmt: skip
    done = run_job(uninterrupted, tmp_path / "fresh", ENV)
    assert done.returncode == 0, done.stderr
    assert last_json(out.stdout)["dataset_id"] == last_json(done.stdout)["dataset_id"]
    for repeat in range(2):
        name = f"batch-0-repeat-{repeat}.json"
        assert (tmp_path / "record" / name).read_bytes() == (
            tmp_path / "fresh-record" / name
        ).read_bytes()


def test_a_record_dir_of_another_calibration_is_refused(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve()
    config = live_job(
        tmp_path / "job.json", server.url, [["right", "down"]], 2, request_retries=0,
        record_dir="record",
    )  # fmt: skip
    assert run_job(config, tmp_path / "a", ENV).returncode == 75  # b0-00 is journaled
    other = live_job(
        tmp_path / "other.json", server.url, [["right", "right"]], 2, record_dir="record",
        temperature=0.5,
    )  # fmt: skip
    out = run_job(other, tmp_path / "b", ENV)
    assert out.returncode == 65, out.stderr
    assert "belongs to another calibration" in out.stderr


def test_the_arithmetic_recipe_is_asked_its_training_messages(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    """The documented shape: the example recipe's `prompt` gives the messages its training rows
    hold; every candidate is asked once, and the job selects from the graded answers."""
    server = serve()
    config = live_job(
        tmp_path / "job.json", server.url, [], 8, repeats=1,
        recipe="corpus_assets.recipes.arithmetic:create_recipe", max_tokens=64,
    )  # fmt: skip
    doc = json.loads(config.read_text())
    doc["params"] = {"candidate_count": 32}
    config.write_text(json.dumps(doc))
    out = run_job(config, tmp_path / "out", ENV)
    assert out.returncode == 0, out.stderr
    asked = [prompt for prompt, _, _ in server.stats()["log"]]
    assert len(asked) == len(set(asked)) == 32
    rows = load_snapshot(tmp_path / "out" / "dataset").training_rows()
    assert len(rows) == 8
    for row in rows:
        assert row["messages"][0]["content"] in asked
        assert "boxed" in row["messages"][0]["content"]


def test_the_key_is_read_from_the_named_variable_and_written_nowhere(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve()
    key = "sk-live-test-0123456789"
    config = live_job(
        tmp_path / "job.json", server.url, [["right", "refuse"]], 1, api_key_env="LIVE_TEST_KEY",
        record_dir="record", request_retries=3,
    )  # fmt: skip
    missing = run_job(config, tmp_path / "missing", ENV)
    assert missing.returncode == 64, missing.stderr
    assert "'LIVE_TEST_KEY' (api_key_env) is not set" in missing.stderr
    out = run_job(config, tmp_path / "out", ENV | {"LIVE_TEST_KEY": key})
    assert out.returncode == 65, out.stderr  # a 400 is no fault a retry mends
    assert "HTTP 400" in out.stderr and "b0-01" in out.stderr
    assert server.asked()["b0-01"] == 1
    assert server.stats()["keys"] == [f"Bearer {key}"]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "server-0.log"]
    assert any("record" in p.parts for p in written)
    assert not [p for p in written if key.encode() in p.read_bytes()]
    assert key not in out.stderr + out.stdout


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"model": ""}, "model must be a non-empty string"),
        ({"max_concurrency": 0}, "max_concurrency must be an integer >= 1"),
        ({"request_retries": -1}, "request_retries must be an integer >= 0"),
        ({"temperature": -1}, "temperature must be a number >= 0"),
        ({"top_p": 1.5}, "top_p must be a number in (0, 1]"),
        ({"stop": "###"}, "stop must be a list of strings"),
        ({"request_timeout_s": 0}, "request_timeout_s must be a positive number"),
    ],
)
def test_bad_params_are_config_errors(params: dict[str, Any], message: str) -> None:
    good = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **IDENTITY}
    with pytest.raises(ConfigError, match=re.escape(message)):
        live_responses(**(good | params))


def test_the_live_bench_runs_and_reports_every_number(tmp_path: Path) -> None:
    """`bench/bench_tasks.py --part live`, tiny: its summary's structure, never its timings."""
    bench = HERE.parents[1] / "bench" / "bench_tasks.py"
    cmd = [sys.executable, str(bench), "--part", "live", "--work", str(tmp_path / "work")]
    cmd += ["--live-requests", "1", "--live-latency", "0.01", "--live-rounds", "1"]
    cmd += ["--overhead-requests", "20"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr
    live = json.loads(done.stdout.strip().splitlines()[-1])["live"]
    assert [run["concurrency"] for run in live["runs"]] == [1, 8, 32]
    for run in live["runs"]:
        assert run["requests"] == 100 and run["max_in_flight"] <= run["concurrency"]
        assert run["requests_per_s"] > 0 and run["bare_requests_per_s"] > 0
    assert set(live["overhead"]) == {"requests", "bare_s", "ask_s", "ms_per_request"}
    assert "| max_concurrency |" in done.stdout
