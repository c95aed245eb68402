"""The stage runner with real child processes: exit codes, retries, heartbeats, termination."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import dagster as dg
import pytest
from dagster_support import unlicensed, variant, wrapped
from support.processes import running

from corpus_assets.build import driver
from corpus_assets.resources.stage_failure import StageFailure
from corpus_assets.resources.stage_runner import failure
from corpus_assets.resources.supervise import Outcome, supervise


def _step_events(instance: dg.DagsterInstance, run_id: str, step: str) -> list[str]:
    return [
        r.event_log_entry.dagster_event_type.value  # type: ignore[union-attr]
        for r in instance.get_records_for_run(run_id).records
        if r.event_log_entry.step_key == step and r.event_log_entry.is_dagster_event
    ]


@pytest.mark.parametrize(
    ("code", "retried"), [(64, False), (65, False), (75, True), (1, True), (-9, True)]
)
def test_exit_codes_map_to_retry_or_give_up(code: int, retried: bool) -> None:
    outcome = Outcome(code, None, "", ("corpus run: error: something named",), 1.0)
    reported = StageFailure("something named", code, False) if code > 0 else None
    f = failure("run --stage shard", outcome, reported=reported)
    assert f.allow_retries is retried
    assert f.metadata["exit_code"].value == code
    assert ("something named" in str(f.description)) is (code > 0)


def test_transient_exit_is_retried_with_backoff(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    runner = wrapped(tmp_path / "w", "exit-once=75", "fetch")
    result = driver.build(example, root, instance, stage_runner=runner)
    assert result.exit_code == 0, result.summary
    assert (tmp_path / "w" / "fetch.attempts").read_text() == "2"
    events = _step_events(instance, result.run_id, "raw")
    assert events.count("STEP_UP_FOR_RETRY") == 1 and events[-1] == "STEP_SUCCESS"


HAND = {"version": "v1", "dataset": "tinystories", "tokenizer": {"id": "bytes"}}


def _cannot_build(example: Path, case: str) -> Path:
    """A config beside the example that loads but cannot build."""
    if case == "no sources":
        hand = example.with_name("hand.json")
        hand.write_text(json.dumps(HAND), encoding="utf-8")
        return hand
    return variant(example, "gone", tokenizer={"id": "gpt2", "path": "gone/tokenizer.json"})


@pytest.mark.parametrize(
    ("case", "says"),
    [("no sources", "config has no sources"), ("missing tokenizer", "gone/tokenizer.json")],
)
def test_a_config_that_cannot_build_fails_the_first_stage_once(
    example: Path, root: Path, instance: dg.DagsterInstance, case: str, says: str
) -> None:
    """A run started past `corpus build` (UI, `dagster job execute`): the fetch stage's own
    pre-flight refuses the config with 64 before fetching anything, never retried (fetch has
    the most retries), and the later stages never start; nothing published, not even raw/."""
    config = _cannot_build(example, case)
    result = driver.build(config, root, instance)
    assert result.exit_code == 64
    assert says in result.summary["error"]
    raw_events = _step_events(instance, result.run_id, "raw")
    assert raw_events.count("STEP_START") == 1 and "STEP_UP_FOR_RETRY" not in raw_events
    assert raw_events[-1] == "STEP_FAILURE"
    for later in ("shards", "tokens"):
        assert "STEP_START" not in _step_events(instance, result.run_id, later)
    assert not (root / "raw").exists() and not (root / "corpus").exists()
    assert not (root / "work").exists() and not (root / "tokens").exists()


def test_silent_stage_is_stopped_and_retried(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    runner = wrapped(tmp_path / "w", "stall-once=120", "shard", heartbeat_timeout_s=2.0)
    start = time.monotonic()
    result = driver.build(example, root, instance, stage_runner=runner)
    assert result.exit_code == 0, result.summary
    assert time.monotonic() - start < 90
    assert (tmp_path / "w" / "shard.attempts").read_text() == "2"
    messages = [
        r.event_log_entry.user_message
        for r in instance.get_records_for_run(result.run_id).records
        if r.event_log_entry.step_key == "shards"
    ]
    assert any("heartbeat timeout" in m for m in messages), messages


def test_interrupt_stops_the_whole_process_group(tmp_path: Path) -> None:
    """A cancel arrives as an exception while waiting: the child and its workers are stopped."""
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True, file=sys.stderr)\n"
        "time.sleep(600)\n"
    )

    def interrupt(_signo: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    lines: list[str] = []
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            supervise([sys.executable, "-c", script], dict(os.environ), 60.0, 5.0, lines.append)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - start < 10
    assert lines[:1] == ["started"]
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and running(grandchild):
        time.sleep(0.1)
    assert not running(grandchild), "a worker of the stopped stage survived"


def test_a_failure_reads_as_the_sentence_the_stage_reported_first() -> None:
    """The sentence, exit code and upstream flag come from the stage's Pipes message; its
    stderr is only shown (`stderr_tail`), never searched: an error line there is no sentence."""
    tail = ("shard: reading", "corpus run: error: materialize raw first: in stderr only")
    said = StageFailure("materialize raw first: source 'x' was not fetched", 64, True)
    f = failure("run --stage shard", Outcome(64, None, "", tail, 1.0), reported=said)
    assert f.description == (
        "materialize raw first: source 'x' was not fetched "
        "(`corpus run --stage shard` exit 64 (bad config or usage), not retried)"
    )
    assert f.metadata["upstream_missing"].value is True
    assert "shard: reading" in str(f.metadata["stderr_tail"].value)
    unsaid = failure("run --stage shard", Outcome(64, None, "", tail, 1.0))
    assert (
        unsaid.description
        == "`corpus run --stage shard` exit 64 (bad config or usage), not retried"
    )
    assert unsaid.metadata["upstream_missing"].value is False
    killed = failure("run --stage shard", Outcome(-9, None, "", ("shard: reading",), 1.0))
    assert killed.description == "`corpus run --stage shard` killed by signal 9, retried"
    assert killed.metadata["upstream_missing"].value is False
    last = failure("run --stage shard", Outcome(-9, None, "", ("shard: reading",), 1.0), True)
    assert last.description == "`corpus run --stage shard` killed by signal 9, no tries left"


def test_a_heartbeat_timeout_is_transient_and_its_last_try_says_so() -> None:
    outcome = Outcome(-2, 121.0, "", ("fetch: web.jsonl 1,024 bytes",), 130.0)
    retried = failure("run --stage fetch", outcome)
    assert retried.metadata["exit_code"].value == 75 and retried.allow_retries
    assert str(retried.description).endswith("(heartbeat timeout); stopped, retried")
    last = failure("run --stage fetch", outcome, last_try=True)
    assert last.metadata["exit_code"].value == 75
    assert str(last.description).endswith("(heartbeat timeout); stopped, no tries left")


def test_a_failed_stage_says_one_sentence_first(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    """The run's first ERROR event is the stage's sentence with its exit code, on one line; the
    child's exception is not reported through Pipes (no traceback in the run log)."""
    result = driver.build(unlicensed(example), root, instance)
    assert result.exit_code == 65
    logs = instance.all_logs(result.run_id)
    first = next(e.user_message for e in logs if e.level >= logging.ERROR)
    assert first.startswith("source 'tiny' has license 'proprietary'"), first
    assert first.endswith("(`corpus run --stage shard` exit 65 (bad data), not retried)"), first
    assert "\n" not in first and "Traceback" not in first
    assert not [e for e in logs if "pipes closed with exception" in e.user_message]
