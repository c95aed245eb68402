"""Cleanups that really delete: a cancel during the real shard or tokenize stage, a tokenize
stage that fails after shards were published, SIGTERM or Ctrl-C of `corpus build`. `corpus build`
cleans up without a daemon, and beside a real `dagster-daemon run` (which then adds none); a
failed `dagster job execute` run is cleaned up by the daemon's sensor.

Each asserts that the partition's shards, tokens and staging existed and are gone, that raw and
raw/LEDGER.jsonl are kept, and that the instance holds exactly one cleanup run for the failed run.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from daemon_support import Daemon, running_daemon
from fault_support import (
    corpus_config,
    messages,
    runs_of,
    sensor_requests,
    staged,
    step_events,
)
from support.dagster import cancel_when
from support.processes import stage_pids
from support.waiting import wait_for

from corpus_assets.build import driver
from corpus_assets.core.config import LoadedConfig, load_config
from corpus_assets.core.store.layout import Layout
from corpus_assets.jobs import BUILD_JOB, CLEANUP_JOB
from corpus_assets.resources.stage_runner import StageRunner
from corpus_assets.sensors.cleanup import (
    CANCEL_SENSOR,
    CLEANUP_OF_TAG,
    CLEANUP_PARTITION_TAG,
    FAILURE_SENSOR,
    RUN_KEY_TAG,
    SENSOR_NAME_TAG,
)

DOCS = 8 * 1024  # eight shard tasks of ~1 MB, one worker: the shard stage runs for seconds
DAGSTER = str(Path(sys.executable).with_name("dagster"))
CLEANED = re.compile(r"\[corpus\] cleaned up (\S+) after (failed|cancelled) run (\S+)")
FULL_LOG = re.compile(r"^\[corpus\] full log: (\S+)$", re.M)


def _before_cleanup(root: Path, cfg: LoadedConfig) -> dict[str, object]:
    """What must survive a cleanup: the raw folders and the ledger's bytes."""
    layout = Layout(root.resolve())
    raw = sorted(p.name for p in layout.raw.iterdir() if p.name.startswith(cfg.model.dataset))
    assert raw, "nothing was fetched"
    return {"raw": raw, "ledger": layout.ledger.read_bytes()}


def _assert_cleaned(
    instance: dg.DagsterInstance,
    root: Path,
    cfg: LoadedConfig,
    failed_run_id: str,
    kept: dict[str, object],
    sensor: str,
) -> dg.DagsterRun:
    """Shards, tokens and staging gone; raw and ledger as they were; exactly one cleanup run."""
    layout = Layout(root.resolve())
    assert not layout.shards(cfg).exists() and not layout.tokens(cfg).exists()
    assert not (layout.root / "work" / cfg.hash12).exists()
    assert layout.ledger.read_bytes() == kept["ledger"], "the ledger changed"
    raw = sorted(p.name for p in layout.raw.iterdir() if p.name.startswith(cfg.model.dataset))
    assert raw == kept["raw"]
    assert all((layout.raw / name / "_SOURCE.json").is_file() for name in raw)
    cleanups = [
        r
        for r in runs_of(instance, CLEANUP_JOB)
        if r.tags[CLEANUP_PARTITION_TAG] == cfg.partition_key
    ]
    assert [r.tags[CLEANUP_OF_TAG] for r in cleanups] == [failed_run_id], "one cleanup per run"
    [cleanup] = cleanups
    assert cleanup.status == dg.DagsterRunStatus.SUCCESS
    assert cleanup.tags[RUN_KEY_TAG] == failed_run_id and cleanup.tags[SENSOR_NAME_TAG] == sensor
    assert cfg.partition_key not in instance.get_materialized_partitions(dg.AssetKey("shards"))
    return cleanup


def _removed(instance: dg.DagsterInstance, cleanup: dg.DagsterRun) -> str:
    """The cleanup stage's own line: what it really deleted."""
    [line] = [m for m in messages(instance, cleanup.run_id) if m.startswith("cleanup: removed")]
    return line


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stage", ["shard", "tokenize"])
def test_cancel_during_staging_cleans_up(
    stage: str, tmp_path: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    """No daemon: `corpus build` itself cleans up the run cancelled while the real stage had
    written task outputs to staging (after shards were published, for tokenize)."""
    config = corpus_config(tmp_path / "configs", f"cancel-{stage}", DOCS)
    cfg = load_config(config)
    layout = Layout(root.resolve())
    seen: dict[str, object] = {}

    def staging_written(_run: dg.DagsterRun) -> bool:
        files = staged(root, cfg.hash12, stage)
        if files:
            seen.update(_before_cleanup(root, cfg), staged=files)
            seen["shards"] = (layout.shards(cfg) / "_MANIFEST.json").is_file()
        return bool(files)

    watcher = cancel_when(instance, staging_written)
    lines: list[str] = []
    runner = StageRunner(workers=1, termination_timeout_s=10)
    result = driver.build(config, root, instance, stage_runner=runner, emit=lines.append)
    watcher.join(timeout=5)
    assert seen, "the run ended before the stage wrote any task output"
    assert seen["shards"] is (stage == "tokenize")
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.CANCELED
    assert stage_pids(root, stage) == [], "the cancelled stage is still running"
    step = {"shard": "shards", "tokenize": "tokens"}[stage]
    events = step_events(instance, result.run_id, step)
    assert events.count("STEP_START") == 1 and "STEP_UP_FOR_RETRY" not in events
    assert f"[corpus] cleaned up {cfg.partition_key} after cancelled run {run.run_id}" in lines

    cleanup = _assert_cleaned(instance, root, cfg, run.run_id, seen, CANCEL_SENSOR)
    removed = [f"work/{cfg.hash12}"]
    if stage == "tokenize":
        removed.insert(0, f"corpus/{cfg.model.dataset}/v1/{cfg.hash12}")
    assert _removed(instance, cleanup) == f"cleanup: removed {', '.join(removed)}"
    # The sensors, had a daemon run, would see the cleanup and add none.
    answers = sensor_requests(instance, run.run_id)
    assert answers and all(isinstance(a, dg.SkipReason) for a in answers), answers
    assert all("already has cleanup run" in str(a.skip_message) for a in answers), answers


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    with running_daemon(tmp_path_factory.mktemp("daemon")) as running:
        yield running


def _break_tokenizer_when_staged(
    root: Path, cfg: LoadedConfig, tokenizer: Path
) -> dict[str, object]:
    """Break the tokenizer file once the shard stage has written staging (past every check of
    the config): shard publishes, then tokenize fails (exit 64, never retried)."""
    seen: dict[str, object] = {}

    def watch() -> None:
        wait_for(lambda: staged(root, cfg.hash12, "shard"), 240, "the shard stage's tasks")
        seen.update(_before_cleanup(root, cfg), staged=staged(root, cfg.hash12, "shard"))
        tokenizer.write_text("not a tokenizer\n", encoding="utf-8")

    threading.Thread(target=watch, daemon=True).start()
    return seen


def _wait(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


def _failed_run(instance: dg.DagsterInstance, cfg: LoadedConfig) -> dg.DagsterRun:
    [run] = [
        r
        for r in runs_of(instance, BUILD_JOB)
        if r.tags.get("dagster/partition") == cfg.partition_key
    ]
    assert run.is_finished and run.status != dg.DagsterRunStatus.SUCCESS, run.status
    return run


def _daemon_looked(daemon: Daemon, instance: dg.DagsterInstance, *runs: dg.DagsterRun) -> None:
    """Wait until both cleanup sensors finished a tick that began after the runs ended."""
    ends = [instance.get_run_record_by_id(r.run_id) for r in runs]
    last = max(r.end_time or 0.0 for r in ends if r is not None)
    for sensor in (FAILURE_SENSOR, CANCEL_SENSOR):
        wait_for(lambda s=sensor: daemon.ticked_after(s, last), 120, f"a tick of {sensor}")


def _daemon_skipped(daemon: Daemon, run_id: str) -> None:
    """The daemon's failure sensor saw the run and left it (to `corpus build`, or as cleaned)."""
    reasons = [r for r in daemon.skip_reasons(FAILURE_SENSOR) if run_id in r]
    assert reasons, daemon.skip_reasons(FAILURE_SENSOR)
    assert all("corpus build" in r or "already has cleanup run" in r for r in reasons), reasons


def _published(instance: dg.DagsterInstance, run_id: str) -> bool:
    """The run materialized its shards (they were published before it failed)."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).records
    return any(
        r.event_log_entry.dagster_event is not None
        and r.event_log_entry.dagster_event.asset_key == dg.AssetKey("shards")
        for r in records
    )


def _full_log(err: str) -> str:
    """The run log that `corpus build` named on stderr (it holds the stages' own lines)."""
    [path] = FULL_LOG.findall(err)
    return Path(path).read_text(encoding="utf-8")


@pytest.mark.timeout(400)
def test_tokenize_fails_after_publish_build_cleans_up_beside_daemon(
    daemon: Daemon, tmp_path: Path
) -> None:
    """`corpus build` compensates while a daemon runs the sensors: still one cleanup."""
    config = corpus_config(tmp_path / "configs", "tokfail", DOCS, tokenizer=True)
    cfg = load_config(config)
    seen = _break_tokenizer_when_staged(daemon.root, cfg, config.with_name("tok.json"))
    code, err = _wait(daemon.corpus("build", str(config), "--workers", "1"))
    assert seen, err
    assert code == 64, err
    [(partition, what, run_id)] = CLEANED.findall(err)
    assert (partition, what) == (cfg.partition_key, "failed"), err
    removed = f"cleanup: removed corpus/tokfail/v1/{cfg.hash12}, work/{cfg.hash12}"
    assert removed in _full_log(err), err
    with daemon.instance() as instance:
        run = _failed_run(instance, cfg)
        assert run.run_id == run_id and run.status == dg.DagsterRunStatus.FAILURE
        assert _published(instance, run_id), "tokenize failed before shards were published"
        [cleanup] = runs_of(instance, CLEANUP_JOB, CLEANUP_OF_TAG, run_id)
        _daemon_looked(daemon, instance, run, cleanup)
        _assert_cleaned(instance, daemon.root, cfg, run_id, seen, FAILURE_SENSOR)
        _daemon_skipped(daemon, run_id)


@pytest.mark.timeout(400)
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupt_during_shard_stops_and_cleans_up_beside_daemon(
    sig: signal.Signals, code: int, daemon: Daemon, tmp_path: Path
) -> None:
    """SIGTERM or Ctrl-C (SIGINT) of `corpus build` while shard writes staging: the stage is
    stopped, the run FAILED, one cleanup (by `corpus build`; the daemon adds none), 143 / 130."""
    config = corpus_config(tmp_path / "configs", f"stop-{sig.name.lower()}", DOCS)
    cfg = load_config(config)
    build = daemon.corpus("build", str(config), "--workers", "1")
    wait_for(lambda: staged(daemon.root, cfg.hash12, "shard"), 240, "the shard stage's tasks")
    kept = _before_cleanup(daemon.root, cfg)
    build.send_signal(sig)
    exit_code, err = _wait(build)
    assert exit_code == code, err
    assert stage_pids(daemon.root, "shard") == [], "the shard stage outlived `corpus build`"
    [(partition, what, run_id)] = CLEANED.findall(err)
    assert (partition, what) == (cfg.partition_key, "failed"), err
    assert f"cleanup: removed work/{cfg.hash12}" in _full_log(err), err
    assert err.rstrip().endswith("corpus build: interrupted"), err
    with daemon.instance() as instance:
        run = _failed_run(instance, cfg)
        assert run.run_id == run_id and run.status == dg.DagsterRunStatus.FAILURE
        [cleanup] = runs_of(instance, CLEANUP_JOB, CLEANUP_OF_TAG, run_id)
        _daemon_looked(daemon, instance, run, cleanup)
        _assert_cleaned(instance, daemon.root, cfg, run_id, kept, FAILURE_SENSOR)
        _daemon_skipped(daemon, run_id)


@pytest.mark.timeout(400)
def test_daemon_cleans_up_a_failed_cli_run(daemon: Daemon, tmp_path: Path) -> None:
    """A run of `dagster job execute` (no compensation of its own): the daemon's sensor cleans
    up the shards its failed tokenize stage left, exactly once."""
    config = corpus_config(tmp_path / "configs", "clifail", DOCS, tokenizer=True)
    cfg = load_config(config)
    register = daemon.corpus("register", str(config))
    assert _wait(register)[0] == 0
    seen = _break_tokenizer_when_staged(daemon.root, cfg, config.with_name("tok.json"))
    run_config = tmp_path / "run.json"
    run_config.write_text(json.dumps({"resources": {"stage_runner": {"config": {"workers": 1}}}}))
    argv = [DAGSTER, "job", "execute", "-m", "corpus_assets.definitions", "-j", BUILD_JOB]
    argv += ["--tags", json.dumps({"dagster/partition": cfg.partition_key}), "-c", str(run_config)]
    done = subprocess.run(
        argv, env=daemon.env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert seen and done.returncode != 0, done.stderr[-3000:]
    assert "[corpus] cleaned up" not in done.stderr
    with daemon.instance() as instance:
        run = _failed_run(instance, cfg)
        assert run.status == dg.DagsterRunStatus.FAILURE and _published(instance, run.run_id)
        wait_for(
            lambda: any(
                r.status == dg.DagsterRunStatus.SUCCESS
                for r in runs_of(instance, CLEANUP_JOB, CLEANUP_OF_TAG, run.run_id)
            ),
            240,
            "the daemon's cleanup run",
        )
        [cleanup] = runs_of(instance, CLEANUP_JOB, CLEANUP_OF_TAG, run.run_id)
        _daemon_looked(daemon, instance, run, cleanup)  # one more tick: no second cleanup
        cleanup = _assert_cleaned(instance, daemon.root, cfg, run.run_id, seen, FAILURE_SENSOR)
        removed = f"cleanup: removed corpus/clifail/v1/{cfg.hash12}, work/{cfg.hash12}"
        assert _removed(instance, cleanup) == removed
